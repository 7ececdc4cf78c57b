// Trace import: format fixtures written here (Kineto and TensorFlow shapes, malformed files), the
// op → signature mapping, and the real traces of ../shared/data/traces (skipped when absent).
#include "placelab/profiler/trace_import.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <zlib.h>

#include "placelab/core/error.h"

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

// A gzip bomb: 64 MiB of spaces compress to ~64 KB. Inflating stops at the limit, long before the
// whole stream is in memory; a plain file over the limit is refused before it is read.
TEST(TraceImport, TracesOverTheSizeLimitAreRefusedBeforeTheyFillMemory) {
  std::string padded = kKineto;
  padded.append(std::size_t{64} << 20, ' ');
  fs::path bomb = gzip_file("bomb.json.gz", padded);
  EXPECT_LT(fs::file_size(bomb), std::uintmax_t{1} << 20);
  TraceImportOptions o;
  o.max_bytes = int64_t{16} << 20;
  try {
    import_trace(bomb, o);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("its gzip data inflate to more than 16 MiB (the limit"), std::string::npos)
        << e.what();
  }
  fs::path plain = temp_file("big.json", padded);
  try {
    import_trace(plain, o);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the file holds more than 16 MiB"), std::string::npos) << e.what();
  }
  o.max_bytes = int64_t{128} << 20;
  EXPECT_EQ(import_trace(bomb, o).report.kernels, import_trace(temp_file("small.json", kKineto)).report.kernels);
  fs::remove(bomb);
  fs::remove(plain);
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

// Durations no GPU can have: negative, or longer than a day or than the trace's own span (plus a
// second), refused with the event's line before they become a calibration.
TEST(TraceImport, UnphysicalDurationsAreRefusedWithTheirLine) {
  const auto events = [](const std::string& dur) {
    return "{\"traceEvents\": [\n"
           "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 0, \"tid\": 1, \"ts\": 0, \"dur\": 50},\n"
           "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7, \"ts\": 10, \"dur\": " +
           dur + "}\n]}";
  };
  for (const char* dur : {"-1", "1e15", "2000000"}) {
    try {
      import_trace_text(events(dur), "t.json");
      ADD_FAILURE() << "dur " << dur << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("t.json:3: dur = "), std::string::npos) << e.what();
    }
  }
  try {  // within the trace's span plus a second: not refused for its duration
    import_trace_text(events("999000"), "t.json");
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find("dur ="), std::string::npos) << e.what();
  }
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

// Found by fuzz/trace_fuzz: "ph" of another type than a string escaped as nlohmann's type_error;
// a baseTimeNanoseconds of 1e300 was converted to time_t (undefined behaviour).
TEST(TraceImport, FieldsOfAnotherTypeOrAbsurdTimesAreIgnored) {
  std::string kineto = kKineto;
  const std::string events = "\"traceEvents\": [\n";
  ASSERT_NE(kineto.find(events), std::string::npos);
  kineto.insert(kineto.find(events) + events.size(),
                R"({"ph": 5, "cat": "kernel", "name": 7}, {"ph": ["X"], "cat": "cpu_op"}, {"ph": "M", "name": null},)"
                "\n");
  kineto.insert(1, R"("baseTimeNanoseconds": 1e300, )");
  const TraceImport t = import_trace_text(kineto, "odd-types.json");
  EXPECT_EQ(t.report.kernels, 5);
  EXPECT_EQ(t.report.steps, 2);
  EXPECT_EQ(t.calibration.created, "");
  // The TensorFlow reader's process-name rows, too.
  EXPECT_THROW(import_trace_text(R"({"traceEvents": [{"ph": "M", "name": 1, "args": {"name": "/device:GPU:0"}}]})", "tf.json"),
               InputError);
}

// Found by fuzz/trace_fuzz: a correlation id of 1e96 was converted to int64_t (undefined
// behaviour). Ids, devices and byte counts beyond ±2^50 are taken as absent.
TEST(TraceImport, AbsurdIdsDevicesAndSizesAreTakenAsAbsent) {
  std::string kineto = kKineto;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"correlation\": 99}", "\"correlation\": 1.13e96}"},
           {"\"bytes\": 1000}", "\"bytes\": 1e300}"},
           {"\"size\": \"4000\"}", "\"size\": \"1e30\"}"}}) {
    ASSERT_NE(kineto.find(from), std::string::npos) << from;
    kineto.replace(kineto.find(from), from.size(), to);
  }
  const TraceImport t = import_trace_text(kineto, "absurd.json");
  EXPECT_EQ(t.report.kernels, 5);
  EXPECT_EQ(t.report.unattributed_kernels, 1);  // the orphan, as before
  ASSERT_EQ(t.report.copies.size(), 2u);
  for (const TraceCopyKind& k : t.report.copies) EXPECT_EQ(k.bytes, 0) << k.kind;  // sizes unknown
  // A TensorFlow memcpy label of 400 digits: std::stod threw std::out_of_range there.
  std::string tf = R"json({"traceEvents": [
    {"name": "process_name", "ph": "M", "pid": 3, "args": {"name": "/device:GPU:0/memcpy Compute"}},
    {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "/device:GPU:0/stream:all Compute"}},
    {"ph": "X", "cat": "Op", "name": "MatMul", "pid": 1, "tid": 0, "ts": 20, "dur": 12, "args": {"name": "fc/MatMul", "op": "MatMul"}},
    {"ph": "X", "cat": "Op", "name": "MEMCPYHtoD", "pid": 3, "tid": 0, "ts": 5, "dur": 4, "args": {"name": "e", "op": "MEMCPYHtoD", "label": "MEMCPYHtoD DIGITS bytes"}}]})json";
  tf.replace(tf.find("DIGITS"), 6, std::string(400, '9'));
  EXPECT_NO_THROW(import_trace_text(tf, "tf-digits.json"));
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
  // No concrete inputs: stride and padding unknown, so no signature (never PyTorch's defaults).
  EXPECT_EQ(sig("aten::conv2d", {{8, 3, 32, 32}, {16, 3, 5, 5}}), std::nullopt);
  EXPECT_EQ(sig("aten::conv2d", {{8, 3, 32, 32}, {16, 3, 5, 5}, {16}, {}, {}, {}, {}},
                {"", "", "", "[2, 1]", "[1, 1]", "[1, 1]", "1"}),
            std::nullopt);  // asymmetric stride
  EXPECT_EQ(sig("aten::cudnn_convolution", {{8, 3, 32, 32}, {16, 3, 5, 5}, {}, {}, {}, {}},
                {"", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"}),
            KernelSignature::conv2d(KernelClass::kConv2D, 8, 3, 32, 32, 16, 5, 5, 1, 2));
  // The builder's signatures of the TensorFlow counterparts.
  EXPECT_EQ(sig("aten::batch_norm", {{8, 16, 4, 4}, {16}, {16}, {16}, {16}}), KernelSignature::elementwise(2048, 2));
  EXPECT_EQ(sig("aten::cudnn_batch_norm_backward", {{8, 16, 4, 4}, {8, 16, 4, 4}, {16}}),
            KernelSignature::elementwise(2048, 3));
  EXPECT_EQ(sig("aten::max_pool2d", {{8, 16, 32, 32}, {}, {}, {}, {}, {}}, {"", "[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]", "False"}),
            KernelSignature::reduction(8 * 16 * 16 * 16 * 9, 8 * 16 * 16 * 16));
  EXPECT_EQ(sig("aten::max_pool2d", {{8, 16, 32, 32}}), std::nullopt);  // window not recorded
  EXPECT_EQ(sig("aten::avg_pool2d", {{8, 16, 32, 32}}, {"", "[2, 2]", "[]", "[0, 0]", "False", "True", ""}),
            KernelSignature::reduction(8 * 16 * 16 * 16 * 4, 8 * 16 * 16 * 16));
  EXPECT_EQ(sig("aten::adaptive_avg_pool2d", {{8, 16, 7, 7}, {}}, {"", "[1, 1]"}), KernelSignature::reduction(8 * 16 * 49, 128));
  EXPECT_EQ(sig("aten::max_pool2d_with_indices_backward", {{8, 16, 16, 16}, {8, 16, 32, 32}}),
            KernelSignature::elementwise(8 * 16 * 32 * 32, 3));
  EXPECT_EQ(sig("aten::_adaptive_avg_pool2d_backward", {{8, 16, 1, 1}, {8, 16, 7, 7}}), KernelSignature::elementwise(8 * 16 * 49, 1));
  EXPECT_EQ(sig("aten::threshold_backward", {{8, 16}, {8, 16}, {}}), KernelSignature::elementwise(128, 2));
  EXPECT_EQ(sig("aten::_log_softmax_backward_data", {{32, 10}, {32, 10}, {}, {}}), KernelSignature::elementwise(320, 2));
  // convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
  // transposed, output_padding, groups, output_mask): both gradients signed like the forward.
  const std::vector<std::vector<int64_t>> bwd_dims = {{8, 16, 16, 16}, {8, 3, 32, 32}, {16, 3, 3, 3}};
  const std::vector<std::string> bwd_concrete = {"", "", "", "[0]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1",
                                                 "[True, True, False]"};
  auto bwd = conv_backward_signatures(bwd_dims, bwd_concrete);
  ASSERT_TRUE(bwd.has_value());
  EXPECT_EQ(bwd->input_grad, KernelSignature::conv2d(KernelClass::kConv2DBackpropInput, 8, 3, 32, 32, 16, 3, 3, 2, 1));
  EXPECT_EQ(bwd->filter_grad, KernelSignature::conv2d(KernelClass::kConv2DBackpropFilter, 8, 3, 32, 32, 16, 3, 3, 2, 1));
  std::vector<std::string> first_layer = bwd_concrete;
  first_layer[10] = "[False, True, False]";
  bwd = conv_backward_signatures(bwd_dims, first_layer);
  ASSERT_TRUE(bwd.has_value());
  EXPECT_FALSE(bwd->input_grad.has_value());
  EXPECT_TRUE(bwd->filter_grad.has_value());
  EXPECT_FALSE(conv_backward_signatures(bwd_dims, {}).has_value());  // nothing concrete recorded
  EXPECT_EQ(sig("aten::conv2d", {{8, 4, 32, 32}, {16, 2, 3, 3}}), std::nullopt);  // grouped
  EXPECT_EQ(sig("aten::softmax", {{4, 6, 100}, {}, {}}), KernelSignature::softmax(24, 100));
  EXPECT_EQ(sig("aten::embedding", {{1000, 64}, {8, 20}}), KernelSignature::embedding(1000, 64, 160));
  EXPECT_EQ(sig("aten::add_", {{128}, {128}, {}}), KernelSignature::elementwise(128, 2));
  EXPECT_EQ(sig("aten::mul", {{4, 32}, {}}), KernelSignature::elementwise(128, 1));
  EXPECT_EQ(sig("aten::mm", {{8, 16}, {17, 32}}), std::nullopt);  // inner dimensions disagree
  EXPECT_EQ(memcpy_kind("Memcpy PtoP (Device -> Device)"), "PtoP");
  EXPECT_EQ(memcpy_kind("MEMCPYDtoH"), "DtoH");
  EXPECT_EQ(memcpy_kind("Memset (Device)"), std::nullopt);
}

// Builds Kineto-style traces event by event: host events (ops, annotations, launches) on a thread,
// and GPU kernels linked to their launch by correlation id. Times in µs.
class TraceWriter {
 public:
  explicit TraceWriter(std::string kernel_cat = "kernel", std::string runtime_cat = "cuda_runtime")
      : kernel_cat_(std::move(kernel_cat)), runtime_cat_(std::move(runtime_cat)) {}
  void host(const std::string& cat, const std::string& name, int tid, double ts, double dur, const std::string& args = "") {
    add(cat, name, tid, ts, dur, args);
  }
  // A launch at `ts` on `tid` and its kernel `name` (on the GPU at ts + 1000, `dur` µs).
  void launch(const std::string& name, int tid, double ts, double dur, const std::string& extra_args = "") {
    ++corr_;
    std::string corr = "\"correlation\": " + std::to_string(corr_);
    add(runtime_cat_, "cudaLaunchKernel", tid, ts, 1, corr + extra_args);
    events_.push_back("{\"ph\": \"X\", \"cat\": \"" + kernel_cat_ + "\", \"name\": \"" + name +
                      "\", \"pid\": 0, \"tid\": \"stream 7\", \"ts\": " + std::to_string(ts + 1000) +
                      ", \"dur\": " + std::to_string(dur) + ", \"args\": {\"device\": 0, " + corr + extra_args + "}}");
  }
  void raw(const std::string& event) { events_.push_back(event); }
  std::string json() const {
    std::string out = "{\"deviceProperties\": [{\"id\": 0, \"name\": \"Fixture GPU\"}], \"traceEvents\": [\n";
    for (std::size_t i = 0; i < events_.size(); ++i) out += (i ? ",\n" : "") + events_[i];
    return out + "\n]}";
  }

 private:
  void add(const std::string& cat, const std::string& name, int tid, double ts, double dur, const std::string& args) {
    std::string e = "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name + "\", \"pid\": 1, \"tid\": " +
                    std::to_string(tid) + ", \"ts\": " + std::to_string(ts) + ", \"dur\": " + std::to_string(dur);
    if (!args.empty()) e += ", \"args\": {" + args + "}";
    events_.push_back(e + "}");
  }
  std::string kernel_cat_, runtime_cat_;
  std::vector<std::string> events_;
  int corr_ = 0;
};

const TraceOpUsage* find_usage(const ImportReport& r, const std::string& op, const std::string& graph_type = "",
                               std::optional<TraceDropReason> dropped = std::nullopt) {
  for (const TraceOpUsage& u : r.usage)
    if (u.op == op && (graph_type.empty() || u.graph_type == graph_type) && u.dropped == dropped) return &u;
  return nullptr;
}

// PyTorch 1.8's Kineto (libkineto/src/output_json.cpp before 2021-11): capitalised categories,
// "Input dims", "external id"; plus the categories every reader must step over (Trace, User,
// python_function around the ops, gpu_user_annotation, cuda_driver launches).
TEST(TraceImport, ReadsThePyTorch18Schema) {
  TraceWriter w("Kernel", "Runtime");
  w.raw(R"j({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0, "dur": 9000})j");
  w.host("Operator", "ProfilerStep#1", 1, 100, 800);
  w.host("python_function", "nn/modules/linear.py(93): forward", 1, 105, 300);
  w.host("Operator", "aten::linear", 1, 110, 200, R"("Input dims": [[32, 64], [128, 64], [128]], "External id": 5)");
  w.host("Operator", "aten::addmm", 1, 120, 150, R"("Input dims": [[128], [32, 64], [64, 128], [], []], "External id": 6)");
  w.launch("sgemm_32x32", 1, 130, 30, R"(, "external id": 6)");
  // A launch on a thread without ops (a 1.8 trace's runtime rows can sit apart): "external id" links it.
  w.launch("gemm_epilogue", 9, 140, 10, R"(, "external id": 6)");
  w.host("Operator", "aten::relu", 1, 400, 50, R"("Input dims": [[32, 128]], "External id": 7)");
  w.launch("relu_kernel", 1, 410, 4);
  w.raw(R"j({"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": "stream 7", "ts": 1600, "dur": 2, "args": {"device": 0, "correlation": 77, "external id": 0, "bytes": 4096}})j");
  w.raw(R"j({"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7", "ts": 1610, "dur": 1, "args": {"device": 0}})j");
  w.raw(R"j({"ph": "X", "cat": "User", "name": "ProfilerStep#1", "pid": 0, "tid": "stream 7 user", "ts": 1100, "dur": 500, "args": {"External id": 1}})j");
  w.raw(R"j({"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 0, "tid": 7, "ts": 1100, "dur": 500})j");
  const TraceImport t = import_trace_text(w.json(), "pt18.json");
  const ImportReport& r = t.report;
  EXPECT_EQ(r.format, TraceFormat::kKineto);
  EXPECT_EQ(r.kernels, 3);
  EXPECT_EQ(r.unattributed_kernels, 0);
  EXPECT_EQ(r.steps, 1);
  EXPECT_EQ(r.memsets, 1);
  ASSERT_EQ(r.copies.size(), 1u);
  EXPECT_EQ(r.copies[0].bytes, 4096);
  const DeviceCalibration* d = t.calibration.find_device("gpu:0");
  ASSERT_NE(d, nullptr);
  EXPECT_NEAR(d->kernel_times_s.at(KernelSignature::gemm(32, 128, 64)), 40e-6, 1e-12);  // both kernels of linear
  EXPECT_NEAR(d->kernel_times_s.at(KernelSignature::elementwise(32 * 128, 1)), 4e-6, 1e-12);
  const TraceOpUsage* linear = find_usage(r, "aten::linear");
  ASSERT_NE(linear, nullptr);
  EXPECT_EQ(linear->kernel_class, "gemm");
  EXPECT_EQ(linear->phase, Phase::kForward);
}

// Forward on the main thread, backward on the autograd thread, an optimizer step: phases, the
// convolution backward split at its first wgrad kernel, and what cannot be split.
std::string backward_fixture(bool concrete) {
  const std::string conv_args =
      R"("Input Dims": [[8, 3, 32, 32], [16, 3, 3, 3], [], [], [], [], []])" +
      std::string(concrete ? R"(, "Concrete Inputs": ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"])" : "");
  const std::string bwd_args =
      R"("Input Dims": [[8, 16, 16, 16], [8, 3, 32, 32], [16, 3, 3, 3], [], [], [], [], [], [], [], []])" +
      std::string(concrete ? R"(, "Concrete Inputs": ["", "", "", "[0]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"])"
                           : "");
  TraceWriter w;
  w.host("user_annotation", "ProfilerStep#3", 1, 0, 5000);
  w.host("cpu_op", "aten::conv2d", 1, 10, 100, conv_args);
  w.host("cpu_op", "aten::convolution", 1, 12, 90);
  w.launch("implicit_convolve_sgemm", 1, 20, 50);
  w.host("cpu_op", "aten::relu_", 1, 200, 20, R"("Input Dims": [[8, 16, 16, 16]])");
  w.launch("relu_kernel", 1, 205, 5);
  // Backward, on thread 2.
  w.host("cpu_op", "autograd::engine::evaluate_function: ReluBackward0", 2, 1000, 100);
  w.host("cpu_op", "ReluBackward0", 2, 1001, 98);
  w.host("cpu_op", "aten::threshold_backward", 2, 1002, 96, R"("Input Dims": [[8, 16, 16, 16], [8, 16, 16, 16], []])");
  w.launch("threshold_kernel", 2, 1010, 6);
  w.host("cpu_op", "autograd::engine::evaluate_function: ConvolutionBackward0", 2, 1200, 300);
  w.host("cpu_op", "ConvolutionBackward0", 2, 1201, 298);
  w.host("cpu_op", "aten::convolution_backward", 2, 1202, 296, bwd_args);
  w.launch("cudnn::ops::scalePackedTensor_kernel", 2, 1210, 2);
  w.launch("dgrad_engine", 2, 1220, 10);
  w.launch("sm70_xmma_wgrad_implicit_gemm", 2, 1230, 20);
  w.launch("splitKreduce_kernel", 2, 1240, 5);  // after the wgrad kernel: weight gradient
  // A second convolution backward whose kernels name no gradient: cannot be split.
  w.host("cpu_op", "autograd::engine::evaluate_function: ConvolutionBackward0", 2, 1600, 300);
  w.host("cpu_op", "ConvolutionBackward0", 2, 1601, 298);
  w.host("cpu_op", "aten::convolution_backward", 2, 1602, 296, bwd_args);
  w.launch("volta_sgemm_64x64_nt", 2, 1610, 7);
  w.launch("volta_sgemm_64x64_tn", 2, 1620, 8);
  // The update.
  w.host("user_annotation", "Optimizer.step#SGD.step", 1, 3000, 500);
  w.host("cpu_op", "aten::_foreach_add_", 1, 3010, 100);
  w.launch("multi_tensor_apply_kernel", 1, 3020, 9);
  return w.json();
}

TEST(TraceImport, BackwardOpsAreAttributedSignedAndSplit) {
  const TraceImport t = import_trace_text(backward_fixture(true), "bwd.json");
  const ImportReport& r = t.report;
  EXPECT_EQ(r.unattributed_kernels, 0);
  const DeviceCalibration* d = t.calibration.find_device("gpu:0");
  ASSERT_NE(d, nullptr);
  EXPECT_NEAR(d->kernel_times_s.at(KernelSignature::conv2d(KernelClass::kConv2D, 8, 3, 32, 32, 16, 3, 3, 2, 1)), 50e-6, 1e-12);
  // Input gradient: the kernels before the first wgrad one (2 + 10 µs); weight gradient: the rest
  // (20 + 5 µs). The unsplittable instance adds to neither.
  EXPECT_NEAR(d->kernel_times_s.at(KernelSignature::conv2d(KernelClass::kConv2DBackpropInput, 8, 3, 32, 32, 16, 3, 3, 2, 1)),
              12e-6, 1e-12);
  EXPECT_NEAR(d->kernel_times_s.at(KernelSignature::conv2d(KernelClass::kConv2DBackpropFilter, 8, 3, 32, 32, 16, 3, 3, 2, 1)),
              25e-6, 1e-12);
  EXPECT_NEAR(d->kernel_times_s.at(KernelSignature::elementwise(8 * 16 * 16 * 16, 2)), 6e-6, 1e-12);  // ReluGrad

  const TraceOpUsage* split = find_usage(r, "aten::convolution_backward", "", TraceDropReason::kUnsplittableBackward);
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->instances, 1);
  EXPECT_EQ(split->phase, Phase::kBackward);
  EXPECT_NEAR(split->kernel_s_per_step, 15e-6, 1e-12);
  const TraceOpUsage* relu_grad = find_usage(r, "aten::threshold_backward");
  ASSERT_NE(relu_grad, nullptr);
  EXPECT_EQ(relu_grad->phase, Phase::kBackward);
  const TraceOpUsage* update = find_usage(r, "aten::_foreach_add_", "", TraceDropReason::kNoShapes);
  ASSERT_NE(update, nullptr);
  EXPECT_EQ(update->phase, Phase::kUpdate);
  EXPECT_NE(r.usage_table().find("unsplittable backward"), std::string::npos) << r.usage_table();
}

// The same trace without "Concrete Inputs": nothing guessed, and the report says why.
TEST(TraceImport, ConvolutionsWithoutConcreteInputsAreCountedNotGuessed) {
  const TraceImport t = import_trace_text(backward_fixture(false), "bwd.json");
  const ImportReport& r = t.report;
  const TraceOpUsage* conv = find_usage(r, "aten::conv2d", "", TraceDropReason::kStrideNotRecorded);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->instances, 1);
  EXPECT_NEAR(conv->kernel_s_per_step, 50e-6, 1e-12);
  const TraceOpUsage* bwd = find_usage(r, "aten::convolution_backward", "", TraceDropReason::kStrideNotRecorded);
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(bwd->instances, 2);  // the input and the weight gradient of the splittable instance
  for (const auto& [sig, s] : t.calibration.find_device("gpu:0")->kernel_times_s)
    EXPECT_NE(sig.cls, KernelClass::kConv2D) << to_string(sig);
  EXPECT_NE(r.usage_table().find("stride/padding not recorded"), std::string::npos);
}

// Graph-guided signatures for a trace without shapes: two steps of a two-conv network. Per step
// the i-th aten::conv2d is the graph's i-th Conv2D; the convolution backward splits into the
// graph's one Conv2DBackpropInput (the first layer's input needs none) and two
// Conv2DBackpropFilter; one relu in the trace against two Relu in the graph drops the type.
std::string graph_fixture() {
  TraceWriter w;
  for (int step = 0; step < 2; ++step) {
    const double t0 = step * 10000.0;
    w.host("user_annotation", "ProfilerStep#" + std::to_string(step), 1, t0, 9000);
    w.host("cpu_op", "aten::conv2d", 1, t0 + 10, 50);
    w.launch("conv_a", 1, t0 + 20, 100 + step * 10);  // 100 then 110 µs: median 105
    w.host("cpu_op", "aten::relu_", 1, t0 + 100, 20);
    w.launch("relu", 1, t0 + 105, 3);
    w.host("cpu_op", "aten::conv2d", 1, t0 + 200, 50);
    w.launch("conv_b", 1, t0 + 210, 40);
    w.host("cpu_op", "autograd::engine::evaluate_function: ConvolutionBackward0", 2, t0 + 1000, 100);
    w.host("cpu_op", "aten::convolution_backward", 2, t0 + 1001, 98);
    w.launch("dgrad", 2, t0 + 1010, 30);
    w.launch("wgrad_b", 2, t0 + 1020, 35);
    w.host("cpu_op", "autograd::engine::evaluate_function: ConvolutionBackward0", 2, t0 + 2000, 100);
    w.host("cpu_op", "aten::convolution_backward", 2, t0 + 2001, 98);
    w.launch("wgrad_a", 2, t0 + 2010, 60);
  }
  return w.json();
}

OpGraph pytorch_form_graph() {
  auto conv = [](KernelClass cls, int64_t k) { return KernelSignature::conv2d(cls, 8, 3, 32, 32, k, 3, 3, 1, 1); };
  OpGraph g;
  g.add_op({.name = "conv_a", .type = "Conv2D", .kernel = conv(KernelClass::kConv2D, 16)});
  g.add_op({.name = "relu_a", .type = "Relu", .kernel = KernelSignature::elementwise(1000, 1)});
  g.add_op({.name = "conv_b", .type = "Conv2D", .kernel = conv(KernelClass::kConv2D, 32)});
  g.add_op({.name = "relu_b", .type = "Relu", .kernel = KernelSignature::elementwise(2000, 1)});
  g.add_op({.name = "conv_b/dx", .type = "Conv2DBackpropInput", .phase = Phase::kBackward,
            .kernel = conv(KernelClass::kConv2DBackpropInput, 32)});
  g.add_op({.name = "conv_b/dw", .type = "Conv2DBackpropFilter", .phase = Phase::kBackward,
            .kernel = conv(KernelClass::kConv2DBackpropFilter, 32)});
  g.add_op({.name = "conv_a/dw", .type = "Conv2DBackpropFilter", .phase = Phase::kBackward,
            .kernel = conv(KernelClass::kConv2DBackpropFilter, 16)});
  return g;
}

TEST(TraceImport, GraphGuidedSignaturesMatchByPositionPerStep) {
  const OpGraph g = pytorch_form_graph();
  TraceImportOptions o;
  o.graph = &g;
  const TraceImport t = import_trace_text(graph_fixture(), "graph.json", o);
  const ImportReport& r = t.report;
  ASSERT_EQ(r.steps, 2);
  const DeviceCalibration* d = t.calibration.find_device("gpu:0");
  ASSERT_NE(d, nullptr);
  EXPECT_NEAR(d->kernel_times_s.at(g.op(0).kernel), 105e-6, 1e-12);  // conv_a: median of 100, 110
  EXPECT_NEAR(d->kernel_times_s.at(g.op(2).kernel), 40e-6, 1e-12);   // conv_b
  EXPECT_NEAR(d->kernel_times_s.at(g.op(4).kernel), 30e-6, 1e-12);   // conv_b's input gradient
  EXPECT_NEAR(d->kernel_times_s.at(g.op(5).kernel), 35e-6, 1e-12);   // conv_b's weight gradient
  EXPECT_NEAR(d->kernel_times_s.at(g.op(6).kernel), 60e-6, 1e-12);   // conv_a's weight gradient
  EXPECT_EQ(d->kernel_times_s.count(g.op(1).kernel), 0u);            // Relu: count mismatch
  EXPECT_EQ(d->kernel_times_s.size(), 5u);

  const TraceOpUsage* relu = find_usage(r, "aten::relu_", "Relu", TraceDropReason::kCountMismatch);
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(relu->detail, "trace 1 per step, graph 2");
  EXPECT_EQ(relu->instances, 2);
  EXPECT_NEAR(relu->kernel_s_per_step, 3e-6, 1e-12);
  const TraceOpUsage* dw = find_usage(r, "aten::convolution_backward", "Conv2DBackpropFilter");
  ASSERT_NE(dw, nullptr);
  EXPECT_EQ(dw->instances, 4);
  EXPECT_EQ(dw->kernel_class, "conv2d_backprop_filter");
  EXPECT_NEAR(dw->kernel_s_per_step, 95e-6, 1e-12);
  EXPECT_NEAR(r.used_kernel_s_per_step, 105e-6 + 40e-6 + 30e-6 + 95e-6, 1e-9);
  EXPECT_NEAR(r.dropped_kernel_s_per_step, 3e-6, 1e-12);
  const std::string table = r.usage_table();
  EXPECT_NE(table.find("count mismatch with the graph (Relu): trace 1 per step, graph 2"), std::string::npos) << table;
}

// A 1x1 layer's weight gradient in cuDNN is a plain GEMM followed by a "reduce_wgrad" helper: a
// split at the first wgrad name would hand the GEMM to the input gradient. The cudaEventRecord
// that opens each cuDNN call separates the two calls instead.
TEST(TraceImport, ConvolutionBackwardSplitsAtItsLastCudnnCall) {
  TraceWriter w;
  w.host("user_annotation", "ProfilerStep#0", 1, 0, 9000);
  w.host("cpu_op", "aten::conv2d", 1, 10, 50);
  w.launch("conv_a", 1, 20, 100);
  w.host("cpu_op", "aten::relu_", 1, 100, 20);
  w.launch("relu", 1, 105, 3);
  w.host("cpu_op", "aten::conv2d", 1, 200, 50);
  w.launch("conv_b", 1, 210, 40);
  w.host("cpu_op", "aten::relu_", 1, 300, 20);
  w.launch("relu", 1, 305, 3);
  w.host("cpu_op", "autograd::engine::evaluate_function: ConvolutionBackward0", 2, 1000, 100);
  w.host("cpu_op", "aten::convolution_backward", 2, 1001, 98);
  w.host("cuda_runtime", "cudaEventRecord", 2, 1005, 1);
  w.launch("volta_sgemm_32x128_nt", 2, 1010, 30);
  w.host("cuda_runtime", "cudaEventRecord", 2, 1015, 1);
  w.launch("volta_sgemm_32x128_tn", 2, 1020, 35);
  w.launch("void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>", 2, 1030, 5);
  w.host("cpu_op", "autograd::engine::evaluate_function: ConvolutionBackward0", 2, 2000, 100);
  w.host("cpu_op", "aten::convolution_backward", 2, 2001, 98);
  w.host("cuda_runtime", "cudaEventRecord", 2, 2005, 1);
  w.launch("wgrad_alg0_engine", 2, 2010, 60);
  const OpGraph g = pytorch_form_graph();
  TraceImportOptions o;
  o.graph = &g;
  const TraceImport t = import_trace_text(w.json(), "calls.json", o);
  const DeviceCalibration* d = t.calibration.find_device("gpu:0");
  ASSERT_NE(d, nullptr);
  EXPECT_NEAR(d->kernel_times_s.at(g.op(4).kernel), 30e-6, 1e-12);  // conv_b's input gradient: the first call
  EXPECT_NEAR(d->kernel_times_s.at(g.op(5).kernel), 40e-6, 1e-12);  // its weight gradient: GEMM + helper
  EXPECT_NEAR(d->kernel_times_s.at(g.op(6).kernel), 60e-6, 1e-12);  // conv_a's weight gradient alone
}

// A benchmark harness marks its own passes, nested ("measure|forward" around a cache clear and the
// pass itself): --step-marker picks them and the innermost markers are the steps. The median idle
// time before an op's first kernel is the GPU's launch gap.
TEST(TraceImport, CustomStepMarkersTakeTheInnermostAndLaunchGapsAreMedians) {
  TraceWriter w;
  w.host("user_annotation", "[param|model|warmup|forward]", 1, 0, 900);
  w.host("cpu_op", "aten::relu_", 1, 10, 20);
  w.launch("relu", 1, 15, 50);  // GPU 1015..1065
  w.host("user_annotation", "[param|model|measure|forward]", 1, 2000, 3000);
  w.host("cpu_op", "aten::zero_", 1, 2010, 20);  // the harness's cache clear, outside the inner pass
  w.launch("clear", 1, 2015, 500);  // GPU 3015..3515
  w.host("user_annotation", "[param|model|measure|forward]", 1, 2900, 1000);
  w.host("cpu_op", "aten::relu_", 1, 2910, 20);
  w.launch("relu", 1, 2915, 40);    // GPU 3915..3955: 400 us after the clear (a stall)
  w.host("cpu_op", "aten::relu_", 1, 2960, 20);
  w.launch("relu", 1, 2965, 30);    // GPU 3965..3995: 10 us gap
  w.host("cpu_op", "aten::relu_", 1, 2999, 20);
  w.launch("relu", 1, 3001, 30);    // GPU 4001..4031: 6 us gap
  TraceImportOptions o;
  o.step_marker = "measure|forward";
  const TraceImport t = import_trace_text(w.json(), "harness.json", o);
  EXPECT_EQ(t.report.steps, 1);  // the inner measure marker; the outer one holds it
  EXPECT_NEAR(t.report.kernel_time_per_step_s, 100e-6, 1e-12);
  ASSERT_EQ(t.report.launch_gap_s.count("gpu:0"), 1u);
  EXPECT_NEAR(t.report.launch_gap_s.at("gpu:0"), 10e-6, 1e-12);  // median of 400, 10, 6 us
  o.step_marker = "forward]";
  EXPECT_EQ(import_trace_text(w.json(), "harness.json", o).report.steps, 2);  // warmup and the inner measure
  o.step_marker = "";
  EXPECT_THROW(import_trace_text(w.json(), "harness.json", o), InputError);
}

TEST(TraceImport, UnknownSchemasAndKernellessTracesSayWhatWasFound) {
  try {
    import_trace_text(R"({"traceEvents": [{"ph": "X", "cat": "Stuff", "name": "a"}, {"ph": "X", "cat": "Stuff", "name": "b"},
                         {"ph": "X", "cat": "Other", "name": "c"}]})",
                      "odd.json");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("odd.json:1: traceEvents: neither"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Stuff 2, Other 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected Kineto categories kernel"), std::string::npos) << msg;
  }
  try {  // a CPU-only profile: ops but no kernels
    import_trace_text(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]})", "cpu.json");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cpu.json:1: no GPU kernel events (event categories seen: cpu_op 1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\"Kernel\" (1.8)"), std::string::npos) << msg;
  }
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

// Host costs (docs/calibration.md, "Host costs") and calibrating on some steps only.
TEST(TraceImportReal, V100HostCostsAndSomeStepsOnly) {
  const fs::path p = shared_trace("v100-sxm2-cnn-training.kineto.json.gz");
  REQUIRE_TRACE(p);
  TraceImport all = import_trace(p);
  // The per-type medians of the ops' host time: a forward convolution's issue (aten::conv2d,
  // ~52 µs in the trace) costs more than a ReLU's (~18 µs); the overall median in between.
  const Calibration& c = all.calibration;
  ASSERT_TRUE(c.dispatch_s_by_type.count("Conv2D") && c.dispatch_s_by_type.count("Relu"));
  EXPECT_GT(c.dispatch_s_by_type.at("Conv2D"), 40e-6);
  EXPECT_LT(c.dispatch_s_by_type.at("Relu"), 25e-6);
  EXPECT_GT(c.dispatch_s, c.dispatch_s_by_type.at("Relu"));
  EXPECT_LT(c.dispatch_s, c.dispatch_s_by_type.at("Conv2D"));
  EXPECT_GT(all.report.host_ops, 3000);
  // The GPU-bound run: a gap is the device's only where the kernel was already queued.
  EXPECT_LT(all.report.launch_gap_s.at("gpu:0"), 2e-6);

  TraceImportOptions o;
  o.first_step = 2;
  o.last_step = 4;
  TraceImport late = import_trace(p, o);
  EXPECT_LT(late.report.kernels, all.report.kernels);
  EXPECT_NEAR(late.report.kernel_time_per_step_s, (93.60e-3 + 93.71e-3 + 93.42e-3) / 3, 0.1e-3);
  o.last_step = 5;
  EXPECT_THROW(import_trace(p, o), InputError);  // 5 steps: 0..4
  o.first_step = 3;
  o.last_step = 2;
  EXPECT_THROW(import_trace(p, o), InputError);
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
  // Launch-bound: every kernel was launched after the one before it ended, so no gap is the
  // device's (the host's issue time is, docs/calibration.md "Launch gap").
  EXPECT_EQ(r.launch_gap_s.count("gpu:0"), 0u);
}

}  // namespace
}  // namespace placelab
