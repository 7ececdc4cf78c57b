#include "placelab/profiler/cpu_calibrator.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <unistd.h>

#include "placelab/core/error.h"
#include "placelab/profiler/cpu_device.h"
#include "placelab/profiler/cpu_executor.h"
#include "placelab/profiler/verify.h"

namespace placelab {
namespace {

// Quick settings: a shrunken sweep, short timing. Numbers are noisy; the tests check structure.
CpuCalibrationOptions quick_options() {
  CpuCalibrationOptions o;
  std::vector<int> cores = cpu::available_cores();
  o.device_cores = cpu::split_cores(cores, 1, 2);
  o.sweep_scale = 0.01;
  o.timing = {.warmup_s = 0.001, .target_s = 0.003, .min_repeats = 3, .max_repeats = 20};
  o.copy_bytes = {4096, 1 << 16, 1 << 20, 1 << 22};
  return o;
}

TEST(CpuSweep, CoversEveryClassAndShrinksWithScale) {
  std::vector<KernelSignature> full = default_cpu_sweep(1.0), small = default_cpu_sweep(0.01);
  EXPECT_LT(small.size(), full.size());
  for (KernelClass cls : {KernelClass::kGemm, KernelClass::kConv2D, KernelClass::kConv2DBackpropInput,
                          KernelClass::kConv2DBackpropFilter, KernelClass::kElementwise, KernelClass::kReduction,
                          KernelClass::kEmbedding, KernelClass::kSoftmax, KernelClass::kCopy}) {
    int n = 0;
    for (const KernelSignature& s : full) n += s.cls == cls;
    EXPECT_GE(n, 4) << kernel_class_name(cls);
  }
  EXPECT_THROW(default_cpu_sweep(0), InputError);
}

TEST(CpuCalibration, ValidatesOptions) {
  CpuCalibrationOptions o;
  o.device_cores = {{0}, {0}};
  EXPECT_THROW(o.validate(), InputError);
  o.device_cores = {{0}};
  o.copy_bytes = {0};
  EXPECT_THROW(o.validate(), InputError);
  o.copy_bytes = {};
  o.timing.min_repeats = 0;
  EXPECT_THROW(o.validate(), InputError);
}

TEST(CpuTiming, MemoryBoundClassesAreTimedWithTheLastLevelCacheFlushed) {
  for (KernelClass c : {KernelClass::kElementwise, KernelClass::kReduction, KernelClass::kEmbedding,
                        KernelClass::kSoftmax, KernelClass::kCopy})
    EXPECT_TRUE(is_memory_bound(c)) << kernel_class_name(c);
  for (KernelClass c : {KernelClass::kGemm, KernelClass::kConv2D, KernelClass::kConv2DBackpropInput,
                        KernelClass::kConv2DBackpropFilter, KernelClass::kNoop})
    EXPECT_FALSE(is_memory_bound(c)) << kernel_class_name(c);
  // The last level is the largest cache, so its flush covers at least the L2 flush.
  EXPECT_GE(last_level_cache_flush_bytes(), cache_flush_bytes());
  KernelTimingOptions bad;
  bad.flush_bytes = -1;
  EXPECT_THROW(bad.validate(), InputError);
  KernelTimingOptions bad_repeats;
  bad_repeats.cold_max_repeats = 0;
  EXPECT_THROW(bad_repeats.validate(), InputError);
  // An explicit flush size is honoured: a tiny kernel still times (flush 1 MiB, 3 repeats).
  cpu::CpuKernel k(KernelSignature::elementwise(1024, 2), int64_t{1} << 30);
  KernelTimingOptions o;
  o.warmup_s = 0;
  o.min_repeats = 3;
  o.max_repeats = 3;
  o.flush_bytes = 1 << 20;
  KernelTiming t = time_kernel(k, o);
  EXPECT_EQ(t.repeats, 3);
  EXPECT_GT(t.median_s, 0);
}

TEST(CpuCalibration, MeasuresDevicesAndCopiesAndDerivesALoadableMachine) {
  CpuCalibrationOptions o = quick_options();
  OpGraph g;
  const KernelSignature extra = KernelSignature::gemm(40, 24, 56);
  g.add_op({.name = "mm", .type = "MatMul", .kernel = extra});
  g.add_op({.name = "nop", .type = "NoOp"});
  o.signatures = graph_signatures(g);
  ASSERT_EQ(o.signatures.size(), 1u);
  int calls = 0;
  CalibrationResult r = calibrate_cpu(o, [&](const CalibrationProgress& p) {
    ++calls;
    EXPECT_LE(p.done, p.total);
  });
  const std::size_t nd = o.device_cores.size();
  EXPECT_GT(calls, 10);
  ASSERT_EQ(r.machine.num_devices(), nd);
  ASSERT_EQ(r.calibration.devices.size(), nd);
  EXPECT_EQ(r.calibration.backend, "cpu");
  for (std::size_t d = 0; d < nd; ++d) {
    const Device& dev = r.machine.devices[d];
    EXPECT_EQ(dev.kind, DeviceKind::kCpu);
    EXPECT_GT(dev.peak_flops_per_s, 1e8);
    EXPECT_GT(dev.memory_bandwidth_Bps, 1e8);
    EXPECT_GT(dev.launch_overhead_s, 0);
    EXPECT_LT(dev.launch_overhead_s, 1e-3);
    EXPECT_FALSE(dev.copy_engine);  // the executor's destination worker does the memcpy
    EXPECT_EQ(dev.full_speed_ops, dev.streams);  // and runs each op on a core of its own
    const DeviceCalibration& dc = r.calibration.devices[d];
    EXPECT_EQ(dc.device, dev.name);
    EXPECT_EQ(dc.cores, o.device_cores[d]);
    EXPECT_TRUE(dc.kernel_times_s.count(extra));
    EXPECT_TRUE(dc.fits.count(KernelClass::kGemm));
    EXPECT_TRUE(dc.fits.count(KernelClass::kElementwise));
  }
  EXPECT_EQ(r.calibration.copies.size(), nd * (nd - 1));
  for (const CopyCalibration& c : r.calibration.copies) {
    EXPECT_GT(c.fit.bandwidth_Bps, 1e8);
    EXPECT_EQ(c.samples.size(), 4u);
  }

  // Written and read back through hwmodels, it gives a cost model that uses the measurements.
  auto path = std::filesystem::temp_directory_path() / ("placelab_localhost_" + std::to_string(::getpid()) + ".yaml");
  write_calibrated_machine(path, r.machine, r.calibration);
  CalibratedMachine cm = load_calibrated_machine(path);
  std::filesystem::remove(path);
  EXPECT_EQ(cm.machine.name, "localhost");
  EXPECT_EQ(device_cores(cm), o.device_cores);
  for (const Device& dev : cm.machine.devices) {
    EXPECT_FALSE(dev.copy_engine);
    EXPECT_EQ(dev.full_speed_ops, dev.streams);  // written and read back
  }
  CalibratedCostModel cost(cm.machine, cm.calibration);
  CostLookup l = cost.lookup(extra, 0);
  EXPECT_EQ(l.source, CostSource::kMeasured);
  EXPECT_NEAR(l.time_s, cm.machine.devices[0].launch_overhead_s + r.calibration.devices[0].kernel_times_s.at(extra),
              1e-9 * l.time_s);
  EXPECT_EQ(cost.lookup(KernelSignature::gemm(41, 24, 56), 0).source, CostSource::kClassFit);
  if (nd > 1) {
    EXPECT_GT(cost.transfer_time_s(1 << 20, 0, 1), 0);
  }

  // Verify: predicted and measured time of a small placed graph, side by side.
  OpGraph chain;
  OpId a = chain.add_op({.name = "a", .type = "MatMul", .kernel = KernelSignature::gemm(64, 64, 64)});
  OpId b = chain.add_op({.name = "b", .type = "Add", .kernel = KernelSignature::elementwise(1 << 14, 2)});
  chain.add_edge(a, b, {.bytes = 64 * 64 * 4});
  CpuExecutor exec(chain, cm.machine, {.steps = 3, .device_cores = device_cores(cm)});
  Placement p = {0, static_cast<DeviceId>(nd - 1)};
  VerifyReport v = verify_placement(chain, p, cost, exec);
  EXPECT_GT(v.predicted_s, 0);
  EXPECT_GT(v.measured_s, 0);
  EXPECT_DOUBLE_EQ(v.error, (v.predicted_s - v.measured_s) / v.measured_s);
  ASSERT_EQ(v.devices.size(), nd);
  EXPECT_EQ(v.measured_steps_s.size(), 3u);
}

// In-situ calibration replaces exactly the graph's signatures on every device with times taken
// inside executor steps (positive, no larger than a step), leaves the sweep's other signatures
// alone and refits.
TEST(CpuCalibration, InSituTimesTheGraphsSignaturesInsideExecutorSteps) {
  CpuCalibrationOptions o = quick_options();
  OpGraph g;
  OpId a = g.add_op({.name = "a", .type = "MatMul", .kernel = KernelSignature::gemm(64, 64, 64)});
  OpId b = g.add_op({.name = "b", .type = "Add", .kernel = KernelSignature::elementwise(1 << 14, 2)});
  OpId c = g.add_op({.name = "c", .type = "Add", .kernel = KernelSignature::elementwise(1 << 14, 2)});
  OpId n = g.add_op({.name = "n", .type = "NoOp"});
  g.add_edge(a, b, {.bytes = 64 * 64 * 4});
  g.add_edge(b, c, {.bytes = 1 << 16});
  g.add_edge(c, n, {.control = true});
  // No sweep and warm caches: only the graph's signatures and one more, quickly.
  o.sweep = false;
  o.timing.cold_cache = false;
  const KernelSignature sweep_only = KernelSignature::gemm(40, 24, 56);
  o.signatures = graph_signatures(g);
  o.signatures.push_back(sweep_only);
  CalibrationResult r = calibrate_cpu(o);
  const std::size_t nd = r.machine.num_devices();
  const double sweep_only_time = r.calibration.devices[0].kernel_times_s.at(sweep_only);

  InSituReport rep = calibrate_in_situ(g, r, {.steps = 3, .rounds = 2});
  EXPECT_EQ(rep.signatures, static_cast<int>(2 * nd));  // gemm and elementwise, per device
  ASSERT_EQ(rep.step_time_s.size(), nd);
  for (std::size_t d = 0; d < nd; ++d) {
    EXPECT_GT(rep.step_time_s[d], 0);
    for (OpId op : {a, b}) {
      const double t = r.calibration.devices[d].kernel_times_s.at(g.op(op).kernel);
      EXPECT_GT(t, 0);
      EXPECT_LT(t, rep.step_time_s[d] * 2);  // one op of a step (mean of rounds, hence the slack)
    }
    EXPECT_FALSE(r.calibration.devices[d].fits.empty());
  }
  EXPECT_EQ(r.calibration.devices[0].kernel_times_s.at(sweep_only), sweep_only_time);

  // One device at a time (the default runs all devices' copies at once).
  EXPECT_EQ(calibrate_in_situ(g, r, {.steps = 2, .rounds = 1, .co_run = false}).signatures, static_cast<int>(2 * nd));

  EXPECT_THROW(calibrate_in_situ(g, r, {.steps = 1}), InputError);
  EXPECT_THROW(calibrate_in_situ(g, r, {.steps = 3, .rounds = 0}), InputError);

  // The scenario's in-situ verify environment: measured and predicted step of each placement, the
  // prediction from kernel times re-timed during the measurement. How close they are is
  // accuracy_test's job (run alone): these microsecond kernels, timed while other tests share the
  // cores, can be off by any factor.
  CpuExecutorOptions eo{.steps = 3};
  for (const DeviceCalibration& dc : r.calibration.devices) eo.device_cores.push_back(dc.cores);
  InSituVerifyEnvironment env(g, r.machine, r.calibration, eo, 2);
  const std::vector<Placement> ps = {Placement(g.num_ops(), 0), Placement(g.num_ops(), static_cast<DeviceId>(nd - 1))};
  const std::vector<Measurement> ms = env.evaluate(ps);
  ASSERT_EQ(ms.size(), 2u);
  for (const Measurement& m : ms) {
    EXPECT_FALSE(m.oom);
    EXPECT_TRUE(m.source.starts_with("cpu")) << m.source;  // "cpu, UNRELIABLE: …" beside busy tests
    EXPECT_GT(m.step_time_s, 0);
    ASSERT_TRUE(m.predicted_s.has_value());
    EXPECT_GT(*m.predicted_s, 0);
    EXPECT_TRUE(std::isfinite(*m.predicted_s));
  }
  EXPECT_THROW(InSituVerifyEnvironment(g, r.machine, r.calibration, eo, 0), InputError);
  Calibration no_cores = r.calibration;
  no_cores.devices[0].cores.clear();
  EXPECT_THROW(InSituVerifyEnvironment(g, r.machine, no_cores, eo, 1), InputError);
}

// Held-out signature: calibrate a GEMM sweep on one core, then predict a size that is not in the
// sweep from the class fit and measure it. The bound is 15 %; on a shared CI machine the
// timings are noisy, so the strict bound runs only with PLACELAB_ACCURACY_TESTS=1 (a quiet
// machine) and the default run checks a loose 50 %.
TEST(CpuCalibration, DriftProbeTimesAFixedGemm) {
  EXPECT_EQ(drift_probe_signature(), KernelSignature::gemm(256, 256, 256));
  const std::vector<int> cores = {cpu::available_cores().front()};
  const double t = time_drift_probe(cores);
  // 33.6 MFLOP: between 1 TFLOP/s and 10 MFLOP/s on any CPU this runs on.
  EXPECT_GT(t, 3.3e-5);
  EXPECT_LT(t, 3.4);
}

TEST(CpuCalibration, PredictsAHeldOutSignatureFromTheClassFit) {
  const bool strict = std::getenv("PLACELAB_ACCURACY_TESTS") != nullptr;
  CpuCalibrationOptions o;
  o.device_cores = {{cpu::available_cores().front()}};
  o.sweep = false;
  for (int64_t d : {128, 160, 192, 256, 320, 448, 512, 576, 640, 768}) o.signatures.push_back(KernelSignature::gemm(d, d, d));
  for (auto [m, n, k] : std::initializer_list<std::array<int64_t, 3>>{{64, 512, 512}, {256, 1024, 256}, {512, 256, 1024}})
    o.signatures.push_back(KernelSignature::gemm(m, n, k));
  // Thread CPU time in the loose run: other processes on a busy machine then inflate neither the
  // calibration nor the check (their cache traffic still does, hence the loose bound).
  o.timing = {.clock = strict ? TimingClock::kWall : TimingClock::kThreadCpu,
              .warmup_s = 0.02, .target_s = strict ? 0.3 : 0.05, .min_repeats = 5, .max_repeats = 200};
  CalibrationResult r = calibrate_cpu(o);
  CalibratedCostModel cost(r.machine, r.calibration);

  for (const KernelSignature& held_out : {KernelSignature::gemm(384, 384, 384), KernelSignature::gemm(256, 512, 384)}) {
    ASSERT_FALSE(r.calibration.devices[0].kernel_times_s.count(held_out));
    CostLookup predicted = cost.lookup(held_out, 0);
    ASSERT_EQ(predicted.source, CostSource::kClassFit);
    KernelTiming measured;
    cpu::run_pinned(o.device_cores[0], [&] {
      cpu::CpuKernel k(held_out);
      measured = time_kernel(k, o.timing);
    });
    const double err = (predicted.time_s - measured.median_s) / measured.median_s;
    RecordProperty("heldout_error_" + std::to_string(held_out.dims[0]) + "_" + std::to_string(held_out.dims[1]),
                   std::to_string(err));
    std::printf("held-out %s: predicted %.4g s, measured %.4g s, error %+.1f%%\n", to_string(held_out).c_str(),
                predicted.time_s, measured.median_s, 100 * err);
    EXPECT_LT(std::abs(err), strict ? 0.15 : 0.5) << to_string(held_out);
  }
}

}  // namespace
}  // namespace placelab
