// Trace import: format fixtures written here (Kineto and TensorFlow shapes, malformed files), the
// op → signature mapping, and the real traces of ../shared/data/traces (skipped when absent).
#include "placelab/profiler/trace_import.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <zlib.h>

#include "placelab/graph/error.h"

namespace placelab {
namespace {

namespace fs = std::filesystem;

fs::path temp_file(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / ("placelab_trace_test_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

fs::path gzip_file(const std::string& name, const std::string& text) {
  fs::path p = fs::temp_directory_path() / ("placelab_trace_test_" + std::to_string(::getpid()) + "_" + name);
  gzFile f = gzopen(p.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(f);
  return p;
}

// A two-step Kineto trace: step 1 runs an addmm (2 kernels) and a relu, an HtoD and a DtoH copy
// of known sizes; step 2 repeats the addmm with one kernel. Times in µs.
const char* kKineto = R"json({
  "deviceProperties": [{"id": 0, "name": "Test GPU"}],
  "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 1000, "dur": 1000},
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 1010, "dur": 100,
     "args": {"Input Dims": [[32, 64], [128, 64], [128]]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 1020, "dur": 80,
     "args": {"Input Dims": [[128], [32, 64], [64, 128], [], []]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1030, "dur": 5, "args": {"correlation": 11}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1040, "dur": 5, "args": {"correlation": 12}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 1200, "dur": 50, "args": {"Input Dims": [[32, 128]]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1210, "dur": 5, "args": {"correlation": 13}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 1300, "dur": 50},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 1310, "dur": 5, "args": {"correlation": 14}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 1320, "dur": 5, "args": {"correlation": 15, "size": "4000"}},
    {"ph": "X", "cat": "kernel", "name": "gemm_part1", "pid": 0, "tid": 7, "ts": 1050, "dur": 10, "args": {"device": 3, "correlation": 11}},
    {"ph": "X", "cat": "kernel", "name": "gemm_part2", "pid": 0, "tid": 7, "ts": 1060, "dur": 20, "args": {"device": 3, "correlation": 12}},
    {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7, "ts": 1220, "dur": 4, "args": {"device": 3, "correlation": 13}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": 1330, "dur": 2,
     "args": {"device": 3, "correlation": 14, "bytes": 1000}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": 1340, "dur": 3,
     "args": {"device": 3, "correlation": 15}},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 1350, "dur": 1, "args": {"device": 3}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#8", "pid": 1, "tid": 1, "ts": 2000, "dur": 1000},
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 2010, "dur": 100,
     "args": {"Input Dims": [[32, 64], [128, 64], [128]]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2030, "dur": 5, "args": {"correlation": 21}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 2050, "dur": 40, "args": {"device": 3, "correlation": 21}},
    {"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 2100, "dur": 6, "args": {"device": 3, "correlation": 99}}
  ]
})json";

TEST(TraceImport, KinetoAttributesKernelsToTopLevelOps) {
  TraceImport t = import_trace_text(kKineto, "fixture.json");
  const ImportReport& r = t.report;
  EXPECT_EQ(r.format, TraceFormat::kKineto);
  EXPECT_EQ(r.gpu_name, "Test GPU");
  EXPECT_EQ(r.kernels, 5);
  EXPECT_NEAR(r.total_kernel_s, 80e-6, 1e-12);
  ASSERT_EQ(r.steps, 2);
  ASSERT_EQ(r.step_kernel_s.size(), 2u);
  EXPECT_NEAR(r.step_kernel_s[0], 34e-6, 1e-12);
  // The orphan ran during step 8 but has no launch record: it belongs to no step.
  EXPECT_NEAR(r.step_kernel_s[1], 40e-6, 1e-12);
  EXPECT_NEAR(r.kernel_time_per_step_s, 37e-6, 1e-12);
  EXPECT_EQ(r.unattributed_kernels, 1);
  EXPECT_EQ(r.memsets, 1);
  EXPECT_EQ(r.devices.at(3), "gpu:0");  // renumbered densely

  // The linear op (outermost aten op) owns both of its addmm's kernels: 30 µs in step 7, 40 µs in
  // step 8; the calibration keeps the median of the two instances.
  ASSERT_EQ(t.calibration.backend, "trace");
  const DeviceCalibration* d = t.calibration.find_device("gpu:0");
  ASSERT_NE(d, nullptr);
  const KernelSignature gemm = KernelSignature::gemm(32, 128, 64);
  ASSERT_EQ(d->kernel_times_s.count(gemm), 1u);
  EXPECT_NEAR(d->kernel_times_s.at(gemm), 35e-6, 1e-12);
  ASSERT_EQ(d->kernel_times_s.count(KernelSignature::elementwise(32 * 128, 1)), 1u);
  EXPECT_NEAR(d->kernel_times_s.at(KernelSignature::elementwise(32 * 128, 1)), 4e-6, 1e-12);
  EXPECT_EQ(r.signatures, 2);
  EXPECT_TRUE(d->fits.count(KernelClass::kGemm));
  ASSERT_FALSE(r.ops.empty());
  EXPECT_EQ(r.ops.front().op, "aten::linear");
  EXPECT_EQ(r.ops.front().calls, 2);
  EXPECT_EQ(r.ops.front().kernels, 3);

  // Copies: the DtoH size comes from the runtime call's "size" string.
  ASSERT_EQ(r.copies.size(), 2u);
  EXPECT_EQ(r.copies[0].kind, "DtoH");
  EXPECT_EQ(r.copies[0].bytes, 4000);
  EXPECT_EQ(r.copies[1].kind, "HtoD");
  EXPECT_EQ(r.copies[1].bytes, 1000);
  EXPECT_FALSE(r.copies[1].fitted);  // one sample: aggregate bandwidth
  EXPECT_NEAR(r.copies[1].fit.bandwidth_Bps, 1000 / 2e-6, 1);
  const CopyCalibration* h2d = t.calibration.find_copy("cpu:0", "gpu:0");
  ASSERT_NE(h2d, nullptr);
  EXPECT_NEAR(h2d->fit.time_s(1000), 2e-6, 1e-12);
  EXPECT_NE(t.calibration.find_copy("gpu:0", "cpu:0"), nullptr);
  EXPECT_NE(r.brief().find("steps: 2"), std::string::npos);
}

TEST(TraceImport, KeepsTraceDeviceIdsWhenAsked) {
  TraceImportOptions o;
  o.renumber_devices = false;
  o.gpu_prefix = "cuda:";
  TraceImport t = import_trace_text(kKineto, "fixture.json", o);
  EXPECT_EQ(t.report.devices.at(3), "cuda:3");
  EXPECT_NE(t.calibration.find_device("cuda:3"), nullptr);
}

TEST(TraceImport, ReadsGzipAndPlainFilesAlike) {
  fs::path plain = temp_file("plain.json", kKineto);
  fs::path gz = gzip_file("packed.json.gz", kKineto);
  TraceImport a = import_trace(plain), b = import_trace(gz);
  EXPECT_EQ(a.report.kernels, b.report.kernels);
  EXPECT_DOUBLE_EQ(a.report.total_kernel_s, b.report.total_kernel_s);
  EXPECT_EQ(b.report.origin, gz.string());
  fs::remove(plain);
  fs::remove(gz);
}

TEST(TraceImport, MalformedJsonNamesFileAndLine) {
  fs::path p = temp_file("bad.json", "{\n  \"traceEvents\": [\n    {\"ph\": \"X\",, \"name\": \"k\"}\n  ]\n}\n");
  try {
    import_trace(p);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(p.string() + ":3: invalid JSON"), std::string::npos) << msg;
  }
  fs::remove(p);
}

TEST(TraceImport, RejectsWhatIsNoTrace) {
  EXPECT_THROW(import_trace_text(R"({"events": []})", "x.json"), InputError);
  EXPECT_THROW(import_trace_text(R"({"traceEvents": {}})", "x.json"), InputError);
  try {  // nested 100,000 levels deep: rejected with its line before anything recursive runs
    import_trace_text("{\"traceEvents\": " + std::string(100000, '[') + std::string(100000, ']') + "}", "deep.json");
    ADD_FAILURE() << "a 100,000-level document was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("deep.json:1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(import_trace_text(R"({"traceEvents": [{"ph": "X", "name": "a"}]})", "x.json"), InputError);
  EXPECT_THROW(import_trace(fs::path("/nonexistent/trace.json")), InputError);
  fs::path corrupt = temp_file("corrupt.gz", std::string("\x1f\x8b\x08\x00garbage", 11));
  EXPECT_THROW(import_trace(corrupt), InputError);
  fs::remove(corrupt);
}

// Numbers no parser should trust: a timestamp beyond double's range is an InputError with its
// line (nlohmann's out_of_range was an internal error), and a ProfilerStep# or device number beyond
// int64_t is no number (std::stoll threw) — the trace still imports.
TEST(TraceImport, OutOfRangeNumbersAreInputErrorsOrIgnored) {
  try {
    import_trace_text("{\"traceEvents\": [\n {\"ph\": \"X\", \"cat\": \"kernel\", \"ts\": 1e400}]}", "big.json");
    ADD_FAILURE() << "1e400 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("big.json:2: invalid JSON: number overflow parsing '1e400'"), std::string::npos)
        << e.what();
  }
  std::string kineto = kKineto;
  const std::string step = "ProfilerStep#7";
  ASSERT_NE(kineto.find(step), std::string::npos);
  kineto.replace(kineto.find(step), step.size(), "ProfilerStep#123456789012345678901");
  const TraceImport t = import_trace_text(kineto, "huge-step.json");
  EXPECT_EQ(t.report.kernels, 5);
  EXPECT_EQ(t.report.steps, 2);
}

TEST(TraceImport, OptionsValidateNameTheField) {
  TraceImportOptions o;
  o.host_device = "gpu:9";
  try {
    o.validate();
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("host_device"), std::string::npos);
  }
}

// TF timeline: one step; "stream:all" repeats the per-stream rows, so only it counts; memcpy rows
// carry their size in the label; node names map to a graph's signatures.
const char* kTensorFlow = R"json({"traceEvents": [
  {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "/job:localhost/replica:0/task:0/device:GPU:0 Compute"}},
  {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "/device:GPU:0/stream:all Compute"}},
  {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "/device:GPU:0/stream:14 Compute"}},
  {"name": "process_name", "ph": "M", "pid": 3, "args": {"name": "/device:GPU:0/memcpy Compute"}},
  {"name": "process_name", "ph": "M", "pid": 4, "args": {"name": "/job:localhost/replica:0/task:0/device:CPU:0 Compute"}},
  {"ph": "X", "cat": "Op", "name": "MatMul", "pid": 0, "tid": 0, "ts": 10, "dur": 50, "args": {"name": "fc/MatMul", "op": "MatMul"}},
  {"ph": "X", "cat": "Op", "name": "MatMul", "pid": 1, "tid": 0, "ts": 20, "dur": 12, "args": {"name": "fc/MatMul", "op": "MatMul"}},
  {"ph": "X", "cat": "Op", "name": "MatMul", "pid": 1, "tid": 0, "ts": 40, "dur": 8, "args": {"name": "fc/MatMul", "op": "MatMul"}},
  {"ph": "X", "cat": "Op", "name": "Relu", "pid": 1, "tid": 0, "ts": 60, "dur": 3, "args": {"name": "fc/Relu", "op": "Relu"}},
  {"ph": "X", "cat": "Op", "name": "MatMul", "pid": 2, "tid": 0, "ts": 20, "dur": 12, "args": {"name": "fc/MatMul", "op": "MatMul"}},
  {"ph": "X", "cat": "Op", "name": "MEMCPYHtoD", "pid": 3, "tid": 0, "ts": 5, "dur": 4, "args": {"name": "edge_1_input", "op": "MEMCPYHtoD", "label": "MEMCPYHtoD 4096 bytes"}},
  {"ph": "X", "cat": "Op", "name": "MEMCPYHtoD", "pid": 3, "tid": 0, "ts": 70, "dur": 12, "args": {"name": "edge_2_input", "op": "MEMCPYHtoD", "label": "MEMCPYHtoD 65536 bytes"}},
  {"ph": "X", "cat": "Op", "name": "MEMCPYHtoD", "pid": 3, "tid": 0, "ts": 90, "dur": 36, "args": {"name": "edge_3_input", "op": "MEMCPYHtoD", "label": "MEMCPYHtoD 262144 bytes"}},
  {"ph": "X", "cat": "Op", "name": "ApplyAdam", "pid": 4, "tid": 0, "ts": 100, "dur": 30, "args": {"name": "adam/update", "op": "ApplyAdam"}}
]})json";

TEST(TraceImport, TensorFlowTimelineUsesStreamAllAndGraphSignatures) {
  OpGraph g;
  g.add_op({.name = "fc/MatMul", .type = "MatMul", .kernel = KernelSignature::gemm(64, 256, 512)});
  g.add_op({.name = "adam/update", .type = "ApplyAdam", .kernel = KernelSignature::elementwise(1000, 4)});
  TraceImportOptions o;
  o.graph = &g;
  TraceImport t = import_trace_text(kTensorFlow, "tf.json", o);
  const ImportReport& r = t.report;
  EXPECT_EQ(r.format, TraceFormat::kTensorFlow);
  EXPECT_EQ(r.kernels, 3);  // stream:all only; the device row and stream:14 are not counted
  EXPECT_NEAR(r.total_kernel_s, 23e-6, 1e-12);
  EXPECT_EQ(r.steps, 1);
  const DeviceCalibration* gpu = t.calibration.find_device("gpu:0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_NEAR(gpu->kernel_times_s.at(KernelSignature::gemm(64, 256, 512)), 20e-6, 1e-12);
  const DeviceCalibration* cpu = t.calibration.find_device("cpu:0");
  ASSERT_NE(cpu, nullptr);
  EXPECT_NEAR(cpu->kernel_times_s.at(KernelSignature::elementwise(1000, 4)), 30e-6, 1e-12);
  ASSERT_EQ(r.ops_without_signature.size(), 1u);
  EXPECT_EQ(r.ops_without_signature[0], "Relu");
  // Three HtoD copies of growing size: a real fit, 4 µs + bytes / (258048 B / 32 µs).
  ASSERT_EQ(r.copies.size(), 1u);
  EXPECT_EQ(r.copies[0].kind, "HtoD");
  EXPECT_EQ(r.copies[0].count, 3);
  EXPECT_TRUE(r.copies[0].fitted);
  const CopyCalibration* h2d = t.calibration.find_copy("cpu:0", "gpu:0");
  ASSERT_NE(h2d, nullptr);
  EXPECT_NEAR(h2d->fit.time_s(4096), 4e-6, 0.3e-6);
  EXPECT_NEAR(h2d->fit.time_s(262144), 36e-6, 1e-6);
}

TEST(TraceImport, TorchOpsMapToSignatures) {
  using V = std::vector<std::vector<int64_t>>;
  auto sig = [](std::string_view op, const V& dims, std::vector<std::string> concrete = {}) {
    return signature_for_torch_op(op, dims, concrete);
  };
  EXPECT_EQ(sig("aten::mm", {{8, 16}, {16, 32}}), KernelSignature::gemm(8, 32, 16));
  EXPECT_EQ(sig("aten::bmm", {{4, 8, 16}, {4, 16, 32}}), KernelSignature::gemm(8, 32, 16, 4));
  EXPECT_EQ(sig("aten::linear", {{2, 5, 64}, {10, 64}, {10}}), KernelSignature::gemm(10, 10, 64));
  EXPECT_EQ(sig("aten::conv2d", {{8, 3, 32, 32}, {16, 3, 5, 5}, {16}, {}, {}, {}, {}},
                {"", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"}),
            KernelSignature::conv2d(KernelClass::kConv2D, 8, 3, 32, 32, 16, 5, 5, 2, 1));
  EXPECT_EQ(sig("aten::conv2d", {{8, 3, 32, 32}, {16, 3, 5, 5}}),
            KernelSignature::conv2d(KernelClass::kConv2D, 8, 3, 32, 32, 16, 5, 5, 1, 0));
  EXPECT_EQ(sig("aten::conv2d", {{8, 4, 32, 32}, {16, 2, 3, 3}}), std::nullopt);  // grouped
  EXPECT_EQ(sig("aten::softmax", {{4, 6, 100}, {}, {}}), KernelSignature::softmax(24, 100));
  EXPECT_EQ(sig("aten::embedding", {{1000, 64}, {8, 20}}), KernelSignature::embedding(1000, 64, 160));
  EXPECT_EQ(sig("aten::add_", {{128}, {128}, {}}), KernelSignature::elementwise(128, 2));
  EXPECT_EQ(sig("aten::mul", {{4, 32}, {}}), KernelSignature::elementwise(128, 1));
  EXPECT_EQ(sig("aten::mm", {{8, 16}, {17, 32}}), std::nullopt);  // inner dimensions disagree
  EXPECT_EQ(sig("aten::max_pool2d", {{8, 3, 32, 32}}), std::nullopt);
  EXPECT_EQ(memcpy_kind("Memcpy PtoP (Device -> Device)"), "PtoP");
  EXPECT_EQ(memcpy_kind("MEMCPYDtoH"), "DtoH");
  EXPECT_EQ(memcpy_kind("Memset (Device)"), std::nullopt);
}

// The real traces (../shared/data/traces, third-party: see its README). Figures from the README.
fs::path shared_trace(const char* name) { return fs::path(PLACELAB_SHARED_DIR) / "data" / "traces" / name; }

#define REQUIRE_TRACE(path)                                                            \
  if (!fs::exists(path)) GTEST_SKIP() << "shared trace not found: " << (path).string() \
                                      << " (../shared beside the checkout is absent)"

TEST(TraceImportReal, V100CnnTraining) {
  const fs::path p = shared_trace("v100-sxm2-cnn-training.kineto.json.gz");
  REQUIRE_TRACE(p);
  TraceImport t = import_trace(p);
  const ImportReport& r = t.report;
  EXPECT_EQ(r.gpu_name, "Tesla V100-SXM2-32GB");
  EXPECT_EQ(r.steps, 5);
  EXPECT_EQ(r.kernels, 4350);
  // README: ≈93.7 ms of kernels per step.
  EXPECT_NEAR(r.total_kernel_s / 5, 93.7e-3, 0.5e-3);
  EXPECT_NEAR(r.kernel_time_per_step_s, 93.7e-3, 2e-3);
  bool dtod = false;
  for (const TraceCopyKind& k : r.copies) dtod |= k.kind == "DtoD" && k.count > 0;
  EXPECT_TRUE(dtod);
  const DeviceCalibration* d = t.calibration.find_device("gpu:0");
  ASSERT_NE(d, nullptr);
  // DtoD copies become the device's copy kernel class.
  bool copy_class = false;
  for (const auto& [sig, s] : d->kernel_times_s) copy_class |= sig.cls == KernelClass::kCopy && s > 0;
  EXPECT_TRUE(copy_class);
  // No shapes recorded: convolutions are summarised by op type, not turned into signatures.
  bool conv_op = false;
  for (const TraceOpSummary& o : r.ops) conv_op |= o.op == "aten::conv2d" && o.calls == 265 && o.with_signature == 0;
  EXPECT_TRUE(conv_op);
  EXPECT_LT(r.unattributed_kernels, r.kernels / 100);
}

TEST(TraceImportReal, A100AlexNetForward) {
  const fs::path p = shared_trace("a100-alexnet-forward.kineto.json.gz");
  REQUIRE_TRACE(p);
  TraceImport t = import_trace(p);
  const ImportReport& r = t.report;
  EXPECT_EQ(r.gpu_name, "NVIDIA A100-PG509-200");
  EXPECT_EQ(r.kernels, 79);
  EXPECT_EQ(r.steps, 0);
  ASSERT_EQ(r.copies.size(), 1u);
  EXPECT_EQ(r.copies[0].kind, "HtoD");
  EXPECT_EQ(r.copies[0].count, 16);
  // 16 pageable copies from 256 B to 151 MB: a real fit; PCIe 4 pageable lands at a few GB/s.
  EXPECT_TRUE(r.copies[0].fitted);
  EXPECT_GT(r.copies[0].fit.bandwidth_Bps, 1e9);
  EXPECT_LT(r.copies[0].fit.bandwidth_Bps, 32e9);
  EXPECT_NE(t.calibration.find_copy("cpu:0", "gpu:0"), nullptr);
}

TEST(TraceImportReal, Mi250ToyTraining) {
  const fs::path p = shared_trace("mi250-toy-training.kineto.json.gz");
  REQUIRE_TRACE(p);
  TraceImport t = import_trace(p);
  const ImportReport& r = t.report;
  EXPECT_EQ(r.kernels, 14);
  ASSERT_EQ(r.copies.size(), 1u);
  EXPECT_EQ(r.copies[0].kind, "HtoD");
  EXPECT_EQ(r.copies[0].count, 2);
  EXPECT_EQ(r.copies[0].bytes, 2 * 2560);  // sizes from the hipMemcpyWithStream calls
  // ProfilerStep#2 only closes the profiler: all 14 kernels belong to step 1.
  ASSERT_EQ(r.steps, 2);
  EXPECT_NEAR(r.step_kernel_s[0], r.total_kernel_s, 1e-12);
  EXPECT_EQ(r.step_kernel_s[1], 0.0);
  EXPECT_NEAR(r.kernel_time_per_step_s, r.total_kernel_s, 1e-12);
  EXPECT_EQ(r.devices.at(2), "gpu:0");
  // Shapes were recorded: the linear layer's GEMM and the backward mm become signatures.
  const DeviceCalibration* d = t.calibration.find_device("gpu:0");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->kernel_times_s.count(KernelSignature::gemm(5, 128, 128)), 1u);
  EXPECT_EQ(d->kernel_times_s.count(KernelSignature::gemm(128, 128, 5)), 1u);
  EXPECT_GT(r.signatures, 3);
}

}  // namespace
}  // namespace placelab
