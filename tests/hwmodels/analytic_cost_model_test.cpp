#include <gtest/gtest.h>

#include <string>

#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine_io.h"

namespace placelab {
namespace {

// One GPU (1 TFLOP/s, 100 GB/s, 5 µs launch) and one CPU (100 GFLOP/s, 20 GB/s, 2 µs) on a link.
Machine toy() {
  Machine m;
  m.devices = {{.name = "gpu:0", .kind = DeviceKind::kGpu, .peak_flops_per_s = 1e12, .memory_bandwidth_Bps = 100e9,
                .memory_bytes = 1 << 30, .streams = 1, .launch_overhead_s = 5e-6},
               {.name = "cpu:0", .kind = DeviceKind::kCpu, .peak_flops_per_s = 100e9, .memory_bandwidth_Bps = 20e9,
                .memory_bytes = 1 << 30, .streams = 2, .launch_overhead_s = 2e-6}};
  m.links = {{.a = "cpu:0", .b = "gpu:0", .kind = LinkKind::kPcie, .bandwidth_Bps = 10e9, .latency_s = 1e-6}};
  m.finalize();
  return m;
}

// Round efficiencies so the expected times are easy to compute by hand.
AnalyticCostModel::Options round_options() {
  AnalyticCostModel::Options o;
  for (auto& per_kind : o.efficiency)
    for (ClassEfficiency& e : per_kind) e = {0.5, 0.8};
  // CPU gemm differs, to show the device kind picks the table.
  o.efficiency[AnalyticCostModel::efficiency_index(DeviceKind::kCpu)][static_cast<int>(KernelClass::kGemm)] = {0.25, 0.5};
  return o;
}

Op op_with(KernelSignature kernel, double flops = 0, double bytes = 0) {
  return {.name = "op", .type = "T", .kernel = kernel, .flops = flops, .bytes_accessed = bytes};
}

TEST(AnalyticCostModel, ComputeBoundGemm) {
  Machine m = toy();
  AnalyticCostModel cost(m, round_options());
  // 1000³ gemm: 2e9 flops, 1.2e7 bytes. GPU: compute 2e9 / (1e12·0.5) = 4 ms; memory
  // 1.2e7 / (1e11·0.8) = 0.15 ms.
  Op gemm = op_with(KernelSignature::gemm(1000, 1000, 1000));
  EXPECT_DOUBLE_EQ(cost.op_time_s(gemm, 0), 5e-6 + 4e-3);
  // CPU gemm table (0.25, 0.5): 2e9 / (1e11·0.25) = 80 ms.
  EXPECT_DOUBLE_EQ(cost.op_time_s(gemm, 1), 2e-6 + 80e-3);
}

TEST(AnalyticCostModel, MemoryBoundElementwise) {
  Machine m = toy();
  AnalyticCostModel cost(m, round_options());
  // 1e8 elements, one input: 1e8 flops, 8e8 bytes. Memory 8e8 / (1e11·0.8) = 10 ms beats
  // compute 1e8 / (1e12·0.5) = 0.2 ms.
  Op add = op_with(KernelSignature::elementwise(100'000'000, 1));
  EXPECT_DOUBLE_EQ(cost.op_time_s(add, 0), 5e-6 + 10e-3);
  // CPU: 8e8 / (2e10·0.8) = 50 ms.
  EXPECT_DOUBLE_EQ(cost.op_time_s(add, 1), 2e-6 + 50e-3);
}

TEST(AnalyticCostModel, OpCountsOverrideTheSignature) {
  Machine m = toy();
  AnalyticCostModel cost(m, round_options());
  // Op-level counts win over the signature's: 1e10 flops → 20 ms; 4e8 bytes → 5 ms.
  Op op = op_with(KernelSignature::elementwise(100'000'000, 1), 1e10, 4e8);
  EXPECT_DOUBLE_EQ(cost.op_time_s(op, 0), 5e-6 + 20e-3);
  // Only bytes given: flops fall back to the signature (1e8 → 0.2 ms), bytes 4e9 → 50 ms.
  Op bytes_only = op_with(KernelSignature::elementwise(100'000'000, 1), 0, 4e9);
  EXPECT_DOUBLE_EQ(cost.op_time_s(bytes_only, 0), 5e-6 + 50e-3);
  // Only flops given: 4e11 flops → 0.8 s; bytes fall back to the signature (10 ms).
  Op flops_only = op_with(KernelSignature::elementwise(100'000'000, 1), 4e11, 0);
  EXPECT_DOUBLE_EQ(cost.op_time_s(flops_only, 0), 5e-6 + 0.8);
}

TEST(AnalyticCostModel, NoopCostsTheLaunchOverheadOnly) {
  Machine m = toy();
  AnalyticCostModel cost(m, round_options());
  EXPECT_DOUBLE_EQ(cost.op_time_s(op_with(KernelSignature::noop()), 0), 5e-6);
  EXPECT_DOUBLE_EQ(cost.op_time_s(op_with(KernelSignature::noop(), 1e12, 1e12), 1), 2e-6);
  // A zero-sized kernel of another class also costs just the launch.
  EXPECT_DOUBLE_EQ(cost.op_time_s(op_with(KernelSignature::copy(0)), 0), 5e-6);
}

TEST(AnalyticCostModel, CopyIsReadPlusWrite) {
  Machine m = toy();
  AnalyticCostModel cost(m, round_options());
  // copy{bytes=4e8}: 8e8 bytes moved → 8e8 / (1e11·0.8) = 10 ms.
  EXPECT_DOUBLE_EQ(cost.op_time_s(op_with(KernelSignature::copy(400'000'000)), 0), 5e-6 + 10e-3);
}

TEST(AnalyticCostModel, DefaultSgemmOnAK80DieMatchesTheMeasuredRate) {
  // HARDWARE.md: SGEMM 1536³ reaches ~2.9 TFLOP/s on a K80 die; the default GPU gemm efficiency
  // must reproduce that within 2%.
  Machine m = load_machine("k80x4");
  AnalyticCostModel cost(m);
  DeviceId die = *m.find_device("gpu:0");
  double flops = 2.0 * 1536 * 1536 * 1536;
  double kernel_s = cost.op_time_s(op_with(KernelSignature::gemm(1536, 1536, 1536)), die) -
                    m.devices[die].launch_overhead_s;
  EXPECT_NEAR(flops / kernel_s, 2.9e12, 0.02 * 2.9e12);
}

TEST(AnalyticCostModel, DefaultsValidateAndGpuBeatsCpuOnGemm) {
  AnalyticCostModel::Options defaults;
  EXPECT_NO_THROW(defaults.validate());
  Machine m = load_machine("k80x4");
  AnalyticCostModel cost(m);
  Op gemm = op_with(KernelSignature::gemm(1024, 1024, 1024));
  EXPECT_LT(cost.op_time_s(gemm, *m.find_device("gpu:0")), cost.op_time_s(gemm, *m.find_device("cpu:0")));
  EXPECT_EQ(cost.describe(), "analytic roofline");
}

TEST(AnalyticCostModel, OptionsValidationNamesTheEntry) {
  Machine m = toy();
  AnalyticCostModel::Options o;
  o.efficiency[AnalyticCostModel::efficiency_index(DeviceKind::kGpu)][static_cast<int>(KernelClass::kGemm)].compute = 1.5;
  try {
    AnalyticCostModel cost(m, o);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "efficiency[gpu][gemm].compute = 1.5: must be in (0, 1]");
  }
  AnalyticCostModel::Options zero;
  zero.efficiency[AnalyticCostModel::efficiency_index(DeviceKind::kCpu)][static_cast<int>(KernelClass::kSoftmax)].memory = 0;
  try {
    zero.validate();
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "efficiency[cpu][softmax].memory = 0: must be in (0, 1]");
  }
}

TEST(AnalyticCostModel, EfficiencyProfileCurves) {
  Machine m = toy();
  EfficiencyProfile p;
  p.name = "test";
  for (EfficiencyCurve& c : p.classes) c = {0.5, 0, 0.8, 0};
  // gemm reaches half of 0.5 at 1e9 FLOPs; elementwise half of 0.8 at 1e6 bytes.
  p.curve(KernelClass::kGemm) = {0.5, 1e9, 0.8, 0};
  p.curve(KernelClass::kElementwise) = {0.5, 0, 0.8, 1e6};
  p.winograd_speedup = 2.0;
  p.host_op_s = 1e-6;
  m.devices[0].efficiency = p;
  AnalyticCostModel cost(m, round_options());
  // 1000³ gemm, 2e9 flops: (2e9 + 1e9) / (1e12 · 0.5) = 6 ms (flat: 4 ms).
  EXPECT_DOUBLE_EQ(cost.op_time_s(op_with(KernelSignature::gemm(1000, 1000, 1000)), 0), 5e-6 + 6e-3);
  // 1e6 elements, 8e6 bytes: (8e6 + 1e6) / (1e11 · 0.8) = 112.5 µs.
  EXPECT_DOUBLE_EQ(cost.op_time_s(op_with(KernelSignature::elementwise(1'000'000, 1)), 0), 5e-6 + 112.5e-6);
  // A 3×3 stride-1 convolution runs at twice the rate of a 1×1 one with the same FLOPs.
  Op c3 = op_with(KernelSignature::conv2d(KernelClass::kConv2D, 8, 64, 32, 32, 64, 3, 3, 1, 1), 1e10, 1);
  Op c1 = op_with(KernelSignature::conv2d(KernelClass::kConv2D, 8, 64, 32, 32, 64, 1, 1, 1, 0), 1e10, 1);
  EXPECT_DOUBLE_EQ(cost.op_time_s(c1, 0), 5e-6 + 20e-3);
  EXPECT_DOUBLE_EQ(cost.op_time_s(c3, 0), 5e-6 + 10e-3);
  // Ops without a kernel cost host_op_s instead of the launch overhead.
  EXPECT_DOUBLE_EQ(cost.op_time_s(op_with(KernelSignature::noop()), 0), 1e-6);
  // The CPU has no profile: Options' flat efficiencies still apply (CPU gemm 0.25).
  EXPECT_DOUBLE_EQ(cost.op_time_s(op_with(KernelSignature::gemm(1000, 1000, 1000)), 1), 2e-6 + 80e-3);
}

TEST(AnalyticCostModel, BuiltInProfilesValidate) {
  for (const std::string& name : efficiency_profile_names()) {
    auto p = builtin_efficiency_profile(name);
    ASSERT_TRUE(p.has_value()) << name;
    EXPECT_EQ(validate_efficiency_profile(*p), "") << name;
  }
  EXPECT_FALSE(builtin_efficiency_profile("k81").has_value());
}

}  // namespace
}  // namespace placelab
