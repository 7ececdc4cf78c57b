#include "placelab/profiler/cpu_executor.h"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "placelab/profiler/cpu_device.h"
#include "placelab/profiler/cpu_kernels.h"
#include "placelab/profiler/executor_buffers.h"
#include "placelab/profiler/gpu_backend.h"
#include "placelab/profiler/verify.h"
#include "test_machines.h"

namespace placelab {
namespace {

// A small training-step-like graph: a diamond of real kernels plus a control edge.
//   x(gemm) → a(conv) → c(elementwise) → d(softmax)
//           ↘ b(reduction) ↗             ↑ control from b
OpGraph diamond() {
  OpGraph g;
  OpId x = g.add_op({.name = "x", .type = "MatMul", .kernel = KernelSignature::gemm(96, 96, 96)});
  OpId a = g.add_op({.name = "a", .type = "Conv2D",
                     .kernel = KernelSignature::conv2d(KernelClass::kConv2D, 2, 8, 16, 16, 8, 3, 3, 1, 1)});
  OpId b = g.add_op({.name = "b", .type = "Sum", .kernel = KernelSignature::reduction(1 << 16, 64)});
  OpId c = g.add_op({.name = "c", .type = "Add", .kernel = KernelSignature::elementwise(1 << 16, 2)});
  OpId d = g.add_op({.name = "d", .type = "Softmax", .kernel = KernelSignature::softmax(64, 1000)});
  OpId e = g.add_op({.name = "e", .type = "NoOp"});
  g.add_edge(x, a, {.bytes = 96 * 96 * 4});
  g.add_edge(x, b, {.bytes = 96 * 96 * 4});
  g.add_edge(a, c, {.bytes = 1 << 18});
  g.add_edge(b, c, {.bytes = 256});
  g.add_edge(c, d, {.bytes = 1 << 18});
  g.add_edge(b, d, {.control = true});
  g.add_edge(d, e, {.bytes = 4});
  return g;
}

void expect_dependencies_respected(const OpGraph& g, const ExecutionResult& r) {
  for (OpId u = 0; u < g.num_ops(); ++u) {
    EXPECT_LE(r.op_start_s[u], r.op_end_s[u]);
    g.for_each_out_edge(u, [&](OpId v, const Tensor&) {
      EXPECT_GE(r.op_start_s[v], r.op_end_s[u]) << g.op(u).name << " -> " << g.op(v).name;
    });
  }
}

TEST(CpuExecutor, RunsAGraphOnOneDeviceInDependencyOrder) {
  OpGraph g = diamond();
  Machine m = cpus(1);
  CpuExecutor exec(g, m, {.steps = 4, .measure_cpu_time = true});
  ExecutionResult r = exec.run(Placement(g.num_ops(), 0));
  ASSERT_FALSE(r.oom);
  // A thread's CPU time never exceeds the wall time it spans.
  ASSERT_EQ(r.device_busy_cpu_s.size(), 1u);
  EXPECT_GT(r.device_busy_cpu_s[0], 0);
  EXPECT_LE(r.device_busy_cpu_s[0], r.device_busy_s[0] * 1.01 + 1e-5);
  EXPECT_GT(r.step_time_s, 0);
  ASSERT_EQ(r.step_times_s.size(), 4u);
  EXPECT_EQ(r.copies_per_step, 0);
  // One stream: kernels never overlap, so the step is at least the busy time.
  EXPECT_GT(r.device_busy_s[0], 0);
  EXPECT_GE(r.step_time_s * 1.0001, r.device_busy_s[0]);
  expect_dependencies_respected(g, r);
}

TEST(CpuExecutor, CopiesTensorsThatCrossDevicesOncePerProducerAndDevice) {
  OpGraph g = diamond();
  Machine m = cpus(2);
  CpuExecutor exec(g, m, {.steps = 3});
  // x on cpu:0; a, b on cpu:1 (one copy of x's output, though two consumers); c on cpu:0 (copies
  // of a and b — the control edge b → d adds none); d, e on cpu:0.
  Placement p = {0, 1, 1, 0, 0, 0};
  ExecutionResult r = exec.run(p);
  EXPECT_EQ(r.copies_per_step, 3);
  EXPECT_EQ(r.copy_bytes_per_step, 96 * 96 * 4 + (1 << 18) + 256);
  EXPECT_GT(r.device_busy_s[0], 0);
  EXPECT_GT(r.device_busy_s[1], 0);
  EXPECT_GT(r.device_copy_s[0] + r.device_copy_s[1], 0);
  expect_dependencies_respected(g, r);

  CpuExecutorEnvironment env(g, m, {.steps = 2});
  std::vector<Placement> batch = {Placement(g.num_ops(), 1), p};
  std::vector<Measurement> out = env.evaluate(batch);
  ASSERT_EQ(out.size(), 2u);
  for (const Measurement& meas : out) {
    EXPECT_TRUE(meas.source.starts_with("cpu")) << meas.source;  // "cpu, UNRELIABLE: …" beside busy tests
    EXPECT_FALSE(meas.oom);
    EXPECT_GT(meas.step_time_s, 0);
  }
  EXPECT_EQ(env.last_result().copies_per_step, 3);
}

TEST(CpuExecutor, InterleavedRoundsTakeTheMedianAndSkipOomPlacements) {
  OpGraph g = diamond();
  Machine m = cpus(2);
  m.devices[1].memory_bytes = 1 << 20;  // too small for the whole graph
  CpuExecutor exec(g, m, {.steps = 3, .device_cores = cpu::default_device_cores(2)});
  const std::vector<Placement> ps = {Placement(g.num_ops(), 0), Placement(g.num_ops(), 1)};
  std::vector<std::pair<int, std::size_t>> order;
  constexpr std::size_t kBefore = 99;  // marks a before_round call in `order`
  std::vector<ExecutionResult> r = measure_interleaved(
      exec, ps, 3, [&](int round, std::size_t i) { order.emplace_back(round, i); },
      [&](int round) { order.emplace_back(round, kBefore); });
  // Round by round, before_round first, then every placement in turn; the OOM one only in the
  // first round.
  EXPECT_EQ(order, (std::vector<std::pair<int, std::size_t>>{
                       {0, kBefore}, {0, 0}, {0, 1}, {1, kBefore}, {1, 0}, {2, kBefore}, {2, 0}}));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[1].oom);
  ASSERT_FALSE(r[0].oom);
  ASSERT_EQ(r[0].step_times_s.size(), 9u);  // three rounds of three steps, each round's warm-up first
  std::vector<double> means;
  for (int k = 0; k < 3; ++k) means.push_back((r[0].step_times_s[3 * k + 1] + r[0].step_times_s[3 * k + 2]) / 2);
  std::sort(means.begin(), means.end());
  EXPECT_DOUBLE_EQ(r[0].step_time_s, means[1]);
  EXPECT_THROW(measure_interleaved(exec, ps, 0), InputError);
}

TEST(CpuExecutor, ReportsOomAndRejectsAbsurdSizes) {
  OpGraph g = diamond();
  Machine small = cpus(1, 1 << 20);
  ExecutionResult r = CpuExecutor(g, small, {.steps = 2}).run(Placement(g.num_ops(), 0));
  EXPECT_TRUE(r.oom);
  EXPECT_NE(r.oom_message.find("cpu:0"), std::string::npos);

  OpGraph huge;
  huge.add_op({.name = "big", .type = "MatMul", .kernel = KernelSignature::gemm(1 << 20, 1 << 20, 1 << 10)});
  Machine m = cpus(1);
  try {
    CpuExecutor(huge, m, {.steps = 2}).run(Placement{0});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("op big"), std::string::npos) << e.what();
  }
  EXPECT_THROW(CpuExecutor(g, m, {.steps = 1}), InputError);
  EXPECT_THROW(CpuExecutor(g, m, {.device_cores = {{0}, {1}}}), InputError);
  EXPECT_THROW(CpuExecutor(g, m).run(Placement{0, 0}), InputError);
  Machine gpu = cpus(1);
  gpu.devices[0].kind = DeviceKind::kGpu;
  EXPECT_THROW(CpuExecutor(g, gpu), InputError);
}

// The buffer rule both executors (CPU and CUDA) apply before they allocate: each kernel's buffers
// on its device, each copy at both ends, and the first device over its memory named with the excess.
TEST(ExecutorBuffers, KernelsOnTheirDevicesAndCopiesAtBothEnds) {
  const OpGraph g = diamond();
  const Placement p = {0, 1, 0, 1, 1, 1};
  const std::vector<BufferCopy> copies = {{0, 1, 1000}, {1, 0, 24}};
  const std::vector<double> bytes = executor_buffer_bytes(g, p, copies, 2, int64_t{1} << 40, "Options::limit");
  ASSERT_EQ(bytes.size(), 2u);
  double kernels[2] = {0, 0};
  for (OpId op = 0; op < g.num_ops(); ++op) kernels[p[op]] += static_cast<double>(cpu::CpuKernel::required_bytes(g.op(op).kernel));
  EXPECT_EQ(bytes[0], kernels[0] + 1024);
  EXPECT_EQ(bytes[1], kernels[1] + 1024);

  Machine m = cpus(2, 1 << 30);
  EXPECT_FALSE(buffers_oom_message(m, bytes).has_value());
  m.devices[0].memory_bytes = 1;
  EXPECT_EQ(buffers_oom_message(m, std::vector<double>{2e9, 3e9}).value_or(""),
            "cpu:0 needs 2 GB of buffers, 2 GB more than its memory");
  try {
    executor_buffer_bytes(g, p, copies, 2, 100, "Options::limit");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("op x: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("above the executor's limit of 1e-07 GB (Options::limit)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace placelab

// The GPU commands' message on a machine without a usable GPU: what was looked for and what
// answered, in words first, CUDA's own words after (the CUDA module builds it the same way).
TEST(NoGpuMessage, SaysWhatWasLookedForAndWhy) {
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(placelab::no_gpu_message(35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version", 0),
            "no GPU found: looked for CUDA devices with cudaGetDeviceCount: no NVIDIA driver is loaded, or it is older "
            "than this CUDA runtime (cudaErrorInsufficientDriver, 35: CUDA driver version is insufficient for CUDA "
            "runtime version)");
  EXPECT_EQ(placelab::no_gpu_message(0, "cudaSuccess", "", 0),
            "no GPU found: looked for CUDA devices with cudaGetDeviceCount: the driver reports 0 CUDA devices");
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_NE(placelab::no_gpu_message(100, "cudaErrorNoDevice", "no CUDA-capable device is detected", 0)
                .find("(CUDA_VISIBLE_DEVICES=\"\"): the driver sees no CUDA-capable device"),
            std::string::npos);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
}
