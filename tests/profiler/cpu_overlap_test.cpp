// The CPU executor's device threads run at the same time. A test of this machine's cores, so it runs
// alone (the profiler_serial_test executable is RUN_SERIAL): beside another test process on a
// 2-core machine, one device's thread can wait out the other's whole kernel.
#include <gtest/gtest.h>

#include <string>

#include "placelab/profiler/cpu_device.h"
#include "placelab/profiler/cpu_executor.h"
#include "test_machines.h"

namespace placelab {
namespace {

TEST(CpuExecutor, ParallelBranchesOnTwoDevicesOverlap) {
  // Two independent heavy GEMMs (~10 ms each): on two devices they run at the same time — their
  // intervals intersect. A device thread woken late by a busy machine can miss one step's window,
  // so the test asks for one overlapping run in three.
  if (cpu::available_cores().size() < 2) GTEST_SKIP() << "needs two cores to run two devices at once";
  OpGraph g;
  g.add_op({.name = "g0", .type = "MatMul", .kernel = KernelSignature::gemm(768, 768, 768)});
  g.add_op({.name = "g1", .type = "MatMul", .kernel = KernelSignature::gemm(768, 768, 768)});
  Machine m = cpus(2);
  CpuExecutor exec(g, m, {.steps = 3, .device_cores = cpu::default_device_cores(2)});
  std::string runs;
  for (int attempt = 0; attempt < 3; ++attempt) {
    ExecutionResult r = exec.run(Placement{0, 1});
    EXPECT_EQ(r.copies_per_step, 0);
    if (r.op_start_s[1] < r.op_end_s[0] && r.op_start_s[0] < r.op_end_s[1]) return;
    runs += " [" + std::to_string(r.op_start_s[0]) + ", " + std::to_string(r.op_end_s[0]) + "] vs [" +
            std::to_string(r.op_start_s[1]) + ", " + std::to_string(r.op_end_s[1]) + "]";
  }
  ADD_FAILURE() << "the two devices' kernels never overlapped:" << runs;
}

}  // namespace
}  // namespace placelab
