// The GPU backends (profiler/cuda). The CUDA-free helpers — options, the sweep, CUPTI record →
// sample conversion, error messages, the device map, the no-device path — run everywhere; the
// kernels, CUPTI collection, calibration and executor need a GPU and skip with the reason when
// there is none.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cupti_activity.h"
#include "gpu_kernel.h"
#include "placelab/core/error.h"
#include "placelab/profiler/cpu_calibrator.h"
#include "placelab/profiler/cpu_kernels.h"
#include "placelab/profiler/cuda_executor.h"
#include "placelab/profiler/cupti_calibrator.h"
#include "placelab/profiler/gpu_check.h"

namespace placelab {
namespace {

std::string no_device_reason() {
  std::string why;
  return gpu::visible_device_count(&why) == 0 ? why : std::string{};
}

#define REQUIRE_GPU()                                                  \
  do {                                                                 \
    const std::string why_ = no_device_reason();                       \
    if (!why_.empty()) GTEST_SKIP() << why_;     \
  } while (0)

// ---------------------------------------------------------------------------------------------
// CUDA-free helpers

TEST(GpuCalibrationOptions, ValidateNamesTheField) {
  auto message = [](const GpuCalibrationOptions& o) {
    try {
      o.validate();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  GpuCalibrationOptions o;
  EXPECT_EQ(message(o), "no error");
  o.devices = {0, 0};
  EXPECT_NE(message(o).find("devices[1] = 0: listed twice"), std::string::npos) << message(o);
  o = {};
  o.repeats = 0;
  EXPECT_NE(message(o).find("repeats = 0"), std::string::npos);
  o = {};
  o.copy_bytes = {4096, -1};
  EXPECT_NE(message(o).find("copy_bytes[1] = -1"), std::string::npos);
  o.copy_bytes = {4096, 4096};
  EXPECT_NE(message(o).find("at least 2 distinct sizes"), std::string::npos);
  o = {};
  o.sweep = false;
  EXPECT_NE(message(o).find("nothing to measure"), std::string::npos);
  o = {};
  o.sweep_scale = 1.5;
  EXPECT_NE(message(o).find("sweep_scale"), std::string::npos);
}

TEST(GpuCalibrationOptions, SignaturesAreTheCpuSweepThenExtras) {
  GpuCalibrationOptions o;
  o.sweep_scale = 0.05;
  const KernelSignature extra = KernelSignature::gemm(100, 200, 300);
  const std::vector<KernelSignature> sweep = default_cpu_sweep(0.05);
  o.signatures = {KernelSignature::noop(), extra, sweep.front(), extra};
  const std::vector<KernelSignature> s = gpu_calibration_signatures(o);
  ASSERT_EQ(s.size(), sweep.size() + 1);  // noop and repeats dropped
  for (std::size_t i = 0; i < sweep.size(); ++i) EXPECT_EQ(s[i], sweep[i]);
  EXPECT_EQ(s.back(), extra);

  o.sweep = false;
  o.signatures = {KernelSignature::gemm(1 << 16, 1 << 16, 1 << 16)};
  EXPECT_THROW(gpu_calibration_signatures(o), InputError);  // 48 GB of buffers
}

TEST(GpuCalibrationOptions, DefaultCopySizesSpanLatencyToBandwidth) {
  const std::vector<int64_t> s = default_gpu_copy_sizes();
  ASSERT_EQ(s.size(), 9u);
  EXPECT_EQ(s.front(), 4096);
  EXPECT_EQ(s.back(), int64_t{256} << 20);
  for (std::size_t i = 1; i < s.size(); ++i) EXPECT_EQ(s[i], 4 * s[i - 1]);
}

ActivityRecord ext(uint32_t corr, uint64_t id) {
  return {.kind = ActivityRecord::Kind::kExternalCorrelation, .correlation_id = corr, .external_id = id};
}
ActivityRecord kernel(uint32_t corr, uint64_t start, uint64_t end) {
  return {.kind = ActivityRecord::Kind::kKernel, .correlation_id = corr, .start_ns = start, .end_ns = end};
}

TEST(ActivityRecords, RepetitionTimesSumTheRecordsOfEachExternalId) {
  // Repetition 0 (external id 5): a cuDNN-like launch of two kernels; repetition 1 (id 6): one
  // memcpy. Id 4 (a warm-up) and an unmapped kernel are ignored.
  std::vector<ActivityRecord> r = {
      kernel(10, 1000, 1500), kernel(11, 1600, 1900), ext(10, 5), ext(11, 5), ext(12, 6), ext(9, 4),
      kernel(9, 0, 100000), kernel(77, 0, 5000),
      {.kind = ActivityRecord::Kind::kMemcpy, .correlation_id = 12, .start_ns = 2000, .end_ns = 6000, .bytes = 4096}};
  const std::vector<double> t = repetition_times_s(r, 5, 2);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_NEAR(t[0], 800e-9, 1e-15);
  EXPECT_NEAR(t[1], 4000e-9, 1e-15);
}

TEST(ActivityRecords, MissingOrBackwardRecordsAreErrors) {
  std::vector<ActivityRecord> r = {kernel(1, 0, 10), ext(1, 1)};
  EXPECT_THROW(repetition_times_s(r, 1, 2), Error);  // repetition 1 (id 2) has no record
  r = {kernel(1, 50, 10), ext(1, 1)};
  EXPECT_THROW(repetition_times_s(r, 1, 1), Error);
}

TEST(GpuCheck, FormatsApiErrors) {
  EXPECT_EQ(gpu::format_api_error("cudaMalloc(&p, n)", 2, "cudaErrorMemoryAllocation", "out of memory", "a.cu", 7),
            "cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (2): out of memory [a.cu:7]");
  EXPECT_EQ(gpu::format_api_error("cublasSgemm(...)", 13, "CUBLAS_STATUS_EXECUTION_FAILED", "", "b.cpp", 1),
            "cublasSgemm(...) failed: CUBLAS_STATUS_EXECUTION_FAILED (13) [b.cpp:1]");
  EXPECT_EQ(gpu::cublas_status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
}

TEST(GpuCheck, MacrosEvaluateOnceAndThrowWithTheCall) {
  int calls = 0;
  auto fail_once = [&] { return ++calls == 1 ? cudaErrorInsufficientDriver : cudaSuccess; };
  try {
    PLACELAB_CUDA_CHECK(fail_once());
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("fail_once() failed: cudaErrorInsufficientDriver (35)"), std::string::npos) << msg;
  }
  EXPECT_EQ(calls, 1);
  PLACELAB_CUDA_CHECK(fail_once());  // succeeds now
  EXPECT_EQ(calls, 2);
  EXPECT_THROW(PLACELAB_CUDA_CHECK(CUBLAS_STATUS_ALLOC_FAILED), Error);
  EXPECT_THROW(PLACELAB_CUDA_CHECK(CUDNN_STATUS_BAD_PARAM), Error);
  EXPECT_THROW(PLACELAB_CUPTI_CHECK(CUPTI_ERROR_INVALID_PARAMETER), Error);
  PLACELAB_CUPTI_CHECK(CUPTI_SUCCESS);
  if (true) PLACELAB_CUDA_CHECK(cudaSuccess);  // a single statement, safe under an unbraced if
  else FAIL();
}

Machine machine_with_gpus(int gpus) {
  Machine m;
  m.name = "test";
  m.devices.push_back({.name = "cpu:0", .kind = DeviceKind::kCpu, .peak_flops_per_s = 1e11, .memory_bandwidth_Bps = 2e10,
                       .memory_bytes = int64_t{8} << 30, .streams = 1});
  // GPUs meet the host at a switch: devices never relay traffic.
  m.switches = {"root"};
  m.links.push_back({.a = "cpu:0", .b = "root", .kind = LinkKind::kMemory, .bandwidth_Bps = 2e10});
  for (int i = 0; i < gpus; ++i) {
    m.devices.push_back({.name = "gpu:" + std::to_string(i), .kind = DeviceKind::kGpu, .peak_flops_per_s = 1e13,
                         .memory_bandwidth_Bps = 5e11, .memory_bytes = int64_t{16} << 30, .streams = 1});
    m.links.push_back({.a = "root", .b = "gpu:" + std::to_string(i), .kind = LinkKind::kPcie, .bandwidth_Bps = 12e9,
                       .latency_s = 1e-5});
  }
  m.finalize();
  return m;
}

TEST(CudaExecutor, MapsMachineGpusToCudaDevices) {
  const Machine m = machine_with_gpus(2);
  EXPECT_EQ(cuda_device_map(m, {}), (std::vector<int>{-1, 0, 1}));
  CudaExecutorOptions o;
  o.cuda_devices = {3, 1};
  EXPECT_EQ(cuda_device_map(m, o), (std::vector<int>{-1, 3, 1}));
  o.cuda_devices = {0};
  EXPECT_THROW(cuda_device_map(m, o), InputError);
  EXPECT_THROW(cuda_device_map(machine_with_gpus(0), {}), InputError);
  o = {};
  o.steps = 1;
  EXPECT_THROW(cuda_device_map(m, o), InputError);
}

// Without a GPU both entry points refuse with the InputError the CLI turns into exit status 2.
TEST(NoDevice, EntryPointsThrowInputErrorWithTheReason) {
  const std::string why = no_device_reason();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is present; this test covers machines without one";
  GpuCalibrationOptions o;
  o.sweep_scale = 0.05;
  try {
    calibrate_cupti(o);
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), why);
  }
  OpGraph g;
  g.add_op({.name = "a", .type = "MatMul", .kernel = KernelSignature::gemm(8, 8, 8)});
  const Machine m = machine_with_gpus(1);
  try {
    CudaExecutor exec(g, m);
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), why);
  }
}

// ---------------------------------------------------------------------------------------------
// With a GPU

std::vector<float> download(const gpu::DeviceBuffer& b) {
  std::vector<float> v(static_cast<std::size_t>(b.bytes / 4));
  PLACELAB_CUDA_CHECK(cudaMemcpy(v.data(), b.ptr, static_cast<size_t>(b.bytes), cudaMemcpyDeviceToHost));
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const std::string& what) {
  ASSERT_GE(got.size(), want.size()) << what;
  double scale = 0;
  for (float w : want) scale = std::max(scale, std::abs(static_cast<double>(w)));
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * std::max(scale, 1.0)) << what << " at " << i;
}

class GpuKernelTest : public ::testing::TestWithParam<KernelSignature> {};

// Each kernel against the CPU backend's reference routine on the same inputs (downloaded).
// cuDNN may use TF32 tensor cores on Ampere and newer: 1e-2 of the output's scale.
TEST_P(GpuKernelTest, MatchesTheCpuReference) {
  REQUIRE_GPU();
  const KernelSignature sig = GetParam();
  gpu::DeviceContext ctx(0);
  cudaStream_t s = nullptr;
  PLACELAB_CUDA_CHECK(cudaStreamCreate(&s));
  gpu::GpuKernel k(sig, ctx, int64_t{1} << 30, s);
  k.launch(s);
  PLACELAB_CUDA_CHECK(cudaStreamSynchronize(s));
  PLACELAB_CUDA_CHECK(cudaStreamDestroy(s));
  const auto in = k.inputs();
  const std::vector<float> out = download(k.output());
  const auto& d = sig.dims;
  std::vector<float> want;
  switch (sig.cls) {
    case KernelClass::kGemm: {
      const auto a = download(*in[0]), b = download(*in[1]);
      want.assign(static_cast<std::size_t>(d[0] * d[1] * std::max<int64_t>(d[3], 1)), 0);
      cpu::gemm(d[0], d[1], d[2], std::max<int64_t>(d[3], 1), a.data(), b.data(), want.data());
      break;
    }
    case KernelClass::kConv2D: {
      const cpu::ConvShape c = cpu::ConvShape::from(sig);
      const auto x = download(*in[0]), f = download(*in[1]);
      want.assign(static_cast<std::size_t>(c.output_size()), 0);
      cpu::conv2d_direct(c, x.data(), f.data(), want.data());
      break;
    }
    case KernelClass::kConv2DBackpropInput: {
      const cpu::ConvShape c = cpu::ConvShape::from(sig);
      const auto dy = download(*in[0]), f = download(*in[1]);
      std::vector<float> cols(static_cast<std::size_t>(c.cols_size()));
      want.assign(static_cast<std::size_t>(c.input_size()), 0);
      cpu::conv2d_backprop_input(c, dy.data(), f.data(), want.data(), cols.data());
      break;
    }
    case KernelClass::kConv2DBackpropFilter: {
      const cpu::ConvShape c = cpu::ConvShape::from(sig);
      const auto x = download(*in[0]), dy = download(*in[1]);
      std::vector<float> cols(static_cast<std::size_t>(c.cols_size()));
      want.assign(static_cast<std::size_t>(c.filter_size()), 0);
      cpu::conv2d_backprop_filter(c, x.data(), dy.data(), want.data(), cols.data());
      break;
    }
    case KernelClass::kElementwise: {
      const auto x = download(*in[0]);
      want.assign(static_cast<std::size_t>(d[0]), 0);
      cpu::elementwise(d[0], d[1], x.data(), cpu::elementwise_distinct_inputs(d[0], d[1]), want.data());
      break;
    }
    case KernelClass::kReduction: {
      const auto x = download(*in[0]);
      want.assign(static_cast<std::size_t>(d[1]), 0);
      cpu::reduction(d[0], d[1], x.data(), want.data());
      break;
    }
    case KernelClass::kEmbedding: {
      const auto table = download(*in[0]);
      std::vector<int32_t> index(static_cast<std::size_t>(d[2]));
      PLACELAB_CUDA_CHECK(cudaMemcpy(index.data(), in[1]->ptr, index.size() * 4, cudaMemcpyDeviceToHost));
      want.assign(static_cast<std::size_t>(d[1] * d[2]), 0);
      cpu::embedding(d[1], d[2], table.data(), index.data(), want.data());
      break;
    }
    case KernelClass::kSoftmax: {
      const auto x = download(*in[0]);
      want.assign(static_cast<std::size_t>(d[0] * d[1]), 0);
      cpu::softmax(d[0], d[1], x.data(), want.data());
      break;
    }
    case KernelClass::kCopy: {
      std::vector<unsigned char> a(static_cast<std::size_t>(d[0])), b(a.size());
      PLACELAB_CUDA_CHECK(cudaMemcpy(a.data(), in[0]->ptr, a.size(), cudaMemcpyDeviceToHost));
      PLACELAB_CUDA_CHECK(cudaMemcpy(b.data(), k.output().ptr, b.size(), cudaMemcpyDeviceToHost));
      EXPECT_EQ(a, b);
      return;
    }
    case KernelClass::kNoop: return;
  }
  expect_close(out, want, 1e-2, to_string(sig));
}

INSTANTIATE_TEST_SUITE_P(
    TinySizes, GpuKernelTest,
    ::testing::Values(KernelSignature::gemm(7, 5, 3), KernelSignature::gemm(16, 8, 32, 3),
                      KernelSignature::conv2d(KernelClass::kConv2D, 2, 3, 8, 8, 4, 3, 3, 1, 1),
                      KernelSignature::conv2d(KernelClass::kConv2D, 1, 2, 9, 9, 3, 3, 3, 2, 0),
                      KernelSignature::conv2d(KernelClass::kConv2DBackpropInput, 2, 3, 8, 8, 4, 3, 3, 1, 1),
                      KernelSignature::conv2d(KernelClass::kConv2DBackpropFilter, 2, 3, 8, 8, 4, 3, 3, 1, 1),
                      KernelSignature::elementwise(1000, 3), KernelSignature::reduction(1000, 7),
                      KernelSignature::embedding(50, 16, 33), KernelSignature::softmax(5, 300),
                      KernelSignature::copy(4096)),
    // Readable test names ("gemm_m7_n5_k3_batch1") instead of the parameter's bytes.
    [](const ::testing::TestParamInfo<KernelSignature>& param_info) {
      std::string name(kernel_class_name(param_info.param.cls));
      auto fields = kernel_fields(param_info.param.cls);
      for (std::size_t f = 0; f < fields.size(); ++f) {
        name += '_';  // appended piecewise: gcc 12 warns falsely (-Wrestrict) on "_" + std::string
        name += fields[f];
        name += std::to_string(param_info.param.dims[f]);
      }
      return name;
    });

TEST(Cupti, RecordsKernelAndCopyDurations) {
  REQUIRE_GPU();
  gpu::DeviceContext ctx(0);
  cudaStream_t s = nullptr;
  PLACELAB_CUDA_CHECK(cudaStreamCreate(&s));
  gpu::GpuKernel k(KernelSignature::gemm(256, 256, 256), ctx, int64_t{1} << 30, s);
  gpu::GpuKernel c(KernelSignature::copy(int64_t{1} << 20), ctx, int64_t{1} << 30, s);
  PLACELAB_CUDA_CHECK(cudaStreamSynchronize(s));
  gpu::ActivityCollector cupti;
  cupti.take();
  for (uint64_t id = 1; id <= 3; ++id) {
    cupti.push(id);
    (id == 3 ? c : k).launch(s);
    cupti.pop();
  }
  PLACELAB_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<ActivityRecord> r = cupti.take();
  const std::vector<double> t = repetition_times_s(r, 1, 3);
  for (double x : t) {
    EXPECT_GT(x, 0);
    EXPECT_LT(x, 0.1);
  }
  bool memcpy_seen = false;
  for (const ActivityRecord& a : r) memcpy_seen |= a.kind == ActivityRecord::Kind::kMemcpy && a.bytes == (1u << 20);
  EXPECT_TRUE(memcpy_seen);
  EXPECT_EQ(cupti.dropped(), 0u);
  PLACELAB_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST(Cupti, SmallCalibrationGivesTimesFitsAndAMachine) {
  REQUIRE_GPU();
  GpuCalibrationOptions o;
  o.devices = {0};
  o.sweep = false;
  o.signatures = {KernelSignature::gemm(128, 128, 128), KernelSignature::gemm(512, 512, 512),
                  KernelSignature::elementwise(1 << 20, 2)};
  o.copy_bytes = {1 << 16, 1 << 20, 1 << 24};
  o.repeats = 3;
  CalibrationResult r = calibrate_cupti(o);
  ASSERT_EQ(r.calibration.devices.size(), 1u);
  const DeviceCalibration& d = r.calibration.devices[0];
  // The three signatures plus the two probes for peak FLOP/s and bandwidth.
  EXPECT_EQ(d.kernel_times_s.size(), 5u);
  EXPECT_LT(d.kernel_times_s.at(o.signatures[0]), d.kernel_times_s.at(o.signatures[1]));
  ASSERT_NE(r.calibration.find_copy("cpu:0", "gpu:0"), nullptr);
  EXPECT_GT(r.calibration.find_copy("cpu:0", "gpu:0")->fit.bandwidth_Bps, 1e8);
  EXPECT_TRUE(r.machine.find_device("gpu:0").has_value());
  EXPECT_GT(r.machine.devices[1].peak_flops_per_s, 0);
}

TEST(CudaExecutor, RunsAPlacedGraphAcrossCpuAndGpu) {
  REQUIRE_GPU();
  OpGraph g;
  const OpId a = g.add_op({.name = "a", .type = "MatMul", .kernel = KernelSignature::gemm(256, 256, 256)});
  const OpId b = g.add_op({.name = "b", .type = "Relu", .kernel = KernelSignature::elementwise(65536, 1)});
  const OpId c = g.add_op({.name = "c", .type = "Add", .kernel = KernelSignature::elementwise(65536, 2)});
  g.add_edge(a, b, {.bytes = 262144});
  g.add_edge(a, c, {.bytes = 262144});
  g.add_edge(b, c, {.bytes = 262144});
  const Machine m = machine_with_gpus(1);
  CudaExecutor exec(g, m, {.steps = 4});
  for (const Placement& p : {Placement{1, 1, 1}, Placement{1, 0, 1}, Placement{0, 1, 0}}) {
    const ExecutionResult r = exec.run(p);
    ASSERT_FALSE(r.oom);
    ASSERT_EQ(r.step_times_s.size(), 4u);
    EXPECT_GT(r.step_time_s, 0);
    // Crossing tensors: b's input from a and c's input from b, once each per destination.
    EXPECT_EQ(r.copies_per_step, (p == Placement{1, 1, 1} ? 0 : 2));
    // A step takes at least the work of its busiest device.
    for (double busy : r.device_busy_s) EXPECT_GE(r.step_time_s * 1.05, busy);
  }
}

}  // namespace
}  // namespace placelab
