// The calibration format, fits and CalibratedCostModel (hwmodels/calibration.h).
#include "placelab/hwmodels/calibration.h"

#include <cmath>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>
#include <unistd.h>

#include "placelab/core/error.h"
#include "placelab/profiler/verify.h"

namespace placelab {
namespace {

Machine two_cpus() {
  Machine m;
  m.name = "two";
  for (int i = 0; i < 2; ++i)
    m.devices.push_back({.name = "cpu:" + std::to_string(i), .kind = DeviceKind::kCpu, .peak_flops_per_s = 1e11,
                         .memory_bandwidth_Bps = 2e10, .memory_bytes = int64_t{1} << 33, .streams = 1,
                         .launch_overhead_s = 1e-6});
  m.links.push_back({.a = "cpu:0", .b = "cpu:1", .kind = LinkKind::kMemory, .bandwidth_Bps = 5e9, .latency_s = 2e-6});
  m.finalize();
  return m;
}

TEST(Fit, LinearFitRecoversKnownCoefficients) {
  const double a = 3e-6, b = 1.0 / 5e10, c = 1.0 / 2e10;
  std::mt19937 rng(11);
  // Log-uniform sizes, so that some samples are latency-bound and the intercept is identifiable.
  std::uniform_real_distribution<double> f(3, 9), by(3, 8), noise(-0.01, 0.01);
  std::vector<FitSample> samples;
  for (int i = 0; i < 40; ++i) {
    double fl = std::pow(10.0, f(rng)), bytes = std::pow(10.0, by(rng));
    samples.push_back({fl, bytes, (a + b * fl + c * bytes) * (1 + noise(rng))});
  }
  FitSegment s = fit_linear(samples);
  EXPECT_NEAR(s.a_s, a, 0.1 * a);
  EXPECT_NEAR(s.s_per_flop, b, 0.03 * b);
  EXPECT_NEAR(s.s_per_byte, c, 0.03 * c);
}

TEST(Fit, CoefficientsStayNonNegative) {
  // Times that *fall* with bytes would need a negative byte coefficient; NNLS clamps it at 0.
  std::vector<FitSample> samples;
  for (int i = 1; i <= 10; ++i) samples.push_back({1e6 * i, 1e6 * (11 - i), 1e-5 * i});
  FitSegment s = fit_linear(samples);
  EXPECT_GE(s.a_s, 0);
  EXPECT_GE(s.s_per_flop, 0);
  EXPECT_EQ(s.s_per_byte, 0);
  EXPECT_NEAR(s.s_per_flop, 1e-11, 1e-13);
  EXPECT_THROW(fit_linear({}), Error);
  std::vector<FitSample> bad = {{1, 1, 0}};
  EXPECT_THROW(fit_linear(bad), Error);
}

TEST(Fit, PiecewiseFitSeparatesLatencyBoundSmallSizes) {
  // Below 1 MB: 20 µs flat (latency-bound); above: 1 ns per byte.
  std::vector<FitSample> samples;
  for (double bytes = 1e3; bytes < 1e9; bytes *= 2) samples.push_back({0, bytes, bytes < 1e6 ? 2e-5 : bytes * 1e-9});
  ClassFit one = fit_class(samples, {.max_segments = 1});
  ClassFit two = fit_class(samples, {.max_segments = 3});
  ASSERT_EQ(one.segments.size(), 1u);
  ASSERT_GE(two.segments.size(), 2u);
  EXPECT_LT(two.rms_relative_error, 0.05);
  EXPECT_GT(one.rms_relative_error, two.rms_relative_error);
  EXPECT_NEAR(two.time_s(0, 4e3), 2e-5, 1e-6);
  EXPECT_NEAR(two.time_s(0, 4e8), 0.4, 0.01);
  EXPECT_TRUE(std::isinf(two.segments.back().upto_bytes));
  EXPECT_THROW(fit_class(samples, {.max_segments = 0}), InputError);
}

TEST(Fit, CopyFitGivesLatencyAndBandwidth) {
  std::vector<FitSample> samples;
  for (double bytes = 1024; bytes <= 64e6; bytes *= 4) samples.push_back({0, bytes, 5e-6 + bytes / 8e9});
  CopyFit fit = fit_copy(samples);
  EXPECT_NEAR(fit.latency_s, 5e-6, 1e-7);
  EXPECT_NEAR(fit.bandwidth_Bps, 8e9, 8e7);
  std::vector<FitSample> flat = {{0, 1e3, 1e-5}, {0, 1e6, 1e-5}};
  EXPECT_THROW(fit_copy(flat), Error);
}

Calibration sample_calibration() {
  Calibration c;
  c.backend = "cpu";
  c.host = "testhost";
  c.created = "2026-01-01T00:00:00Z";
  DeviceCalibration d;
  d.device = "cpu:0";
  d.cores = {0};
  d.probe_s = 1.25e-3;
  for (int64_t n : {64, 128, 256, 512})
    d.kernel_times_s[KernelSignature::gemm(n, n, n)] = 1e-6 + kernel_flops(KernelSignature::gemm(n, n, n)) / 5e10;
  d.kernel_times_s[KernelSignature::softmax(8, 1000)] = 4e-5;
  c.devices.push_back(d);
  c.devices.push_back({.device = "cpu:1"});
  c.copies.push_back({.src = "cpu:0", .dst = "cpu:1", .fit = {3e-6, 6e9}, .samples = {{0, 1024, 3.2e-6}, {0, 1 << 20, 1.8e-4}}});
  c.refit();
  return c;
}

TEST(CalibrationYaml, RoundTripsEveryField) {
  Calibration c = sample_calibration();
  c.dispatch_s = 4.1e-5;
  c.dispatch_s_by_type = {{"Conv2D", 5.175e-5}, {"Relu", 1.775e-5}};
  Calibration back = parse_calibration_yaml(calibration_yaml(c), "rt.yaml");
  EXPECT_EQ(back.backend, "cpu");
  EXPECT_EQ(back.host, "testhost");
  EXPECT_EQ(back.created, c.created);
  EXPECT_EQ(back.dispatch_s, 4.1e-5);
  EXPECT_EQ(back.dispatch_s_by_type, c.dispatch_s_by_type);
  ASSERT_EQ(back.devices.size(), 2u);
  EXPECT_EQ(back.devices[0].cores, std::vector<int>{0});
  EXPECT_DOUBLE_EQ(back.devices[0].probe_s, 1.25e-3);
  EXPECT_EQ(back.devices[1].probe_s, 0);  // not measured: not written, read back as 0
  ASSERT_EQ(back.devices[0].kernel_times_s.size(), c.devices[0].kernel_times_s.size());
  for (const auto& [sig, t] : c.devices[0].kernel_times_s) EXPECT_NEAR(back.devices[0].kernel_times_s.at(sig), t, 1e-9 * t);
  ASSERT_EQ(back.devices[0].fits.size(), 2u);
  const ClassFit& f0 = c.devices[0].fits.at(KernelClass::kGemm);
  const ClassFit& f1 = back.devices[0].fits.at(KernelClass::kGemm);
  ASSERT_EQ(f0.segments.size(), f1.segments.size());
  EXPECT_EQ(f1.num_samples, 4);
  for (std::size_t i = 0; i < f0.segments.size(); ++i) {
    EXPECT_NEAR(f1.segments[i].a_s, f0.segments[i].a_s, 1e-9 * f0.segments[i].a_s + 1e-20);
    EXPECT_NEAR(f1.segments[i].s_per_flop, f0.segments[i].s_per_flop, 1e-9 * f0.segments[i].s_per_flop + 1e-30);
  }
  ASSERT_EQ(back.copies.size(), 1u);
  EXPECT_DOUBLE_EQ(back.copies[0].fit.bandwidth_Bps, 6e9);
  EXPECT_EQ(back.copies[0].samples.size(), 2u);
  EXPECT_TRUE(back.devices[1].kernel_times_s.empty());
}

std::string error_of(const std::string& text) {
  try {
    parse_calibration_yaml(text, "cal.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(CalibrationYaml, ErrorsNameFileLineFieldAndRule) {
  EXPECT_EQ(error_of("calibration:\n"
                     "  backend: cpu\n"
                     "  devices:\n"
                     "    - device: cpu:0\n"
                     "      kernels:\n"
                     "        \"gemm{m=1,n=1,k=1,batch=1}\": -3\n"),
            "cal.yaml:6: calibration.devices[0].kernels[\"gemm{m=1,n=1,k=1,batch=1}\"] = -3: must be > 0 and finite");
  EXPECT_EQ(error_of("calibration:\n"
                     "  backend: cpu\n"
                     "  devices:\n"
                     "    - device: cpu:0\n"
                     "      kernels:\n"
                     "        \"gemm{m=1}\": 1e-3\n"),
            "cal.yaml:6: calibration.devices[0].kernels[\"gemm{m=1}\"]: not a kernel signature (e.g. gemm{m=64,n=64,k=64,batch=1})");
  EXPECT_EQ(error_of("calibration:\n"
                     "  backend: cpu\n"
                     "  devices: []\n"
                     "  copies:\n"
                     "    - src: cpu:0\n"
                     "      dst: cpu:1\n"
                     "      latency_s: 1e-6\n"
                     "      bandwith_Bps: 1e9\n"),
            "cal.yaml:8: calibration.copies[0].bandwith_Bps: unknown key; expected one of src, dst, latency_s, bandwidth_Bps, samples");
  EXPECT_EQ(error_of("calibration:\n"
                     "  devices: []\n"),
            "cal.yaml:2: calibration.backend: missing required field");
  EXPECT_EQ(error_of("calibration:\n"
                     "  backend: cpu\n"
                     "  devices:\n"
                     "    - device: cpu:0\n"
                     "      fits:\n"
                     "        gemm:\n"
                     "          segments:\n"
                     "            - {upto_bytes: 100, a_s: 0, s_per_flop: 1e-11, s_per_byte: 0}\n"
                     "            - {upto_bytes: 50, a_s: 0, s_per_flop: 1e-11, s_per_byte: 0}\n"
                     "            - {a_s: 0, s_per_flop: 1e-11, s_per_byte: 0}\n"),
            "cal.yaml:9: calibration.devices[0].fits.gemm.segments[1].upto_bytes = 50: must be greater than the previous segment's");
  EXPECT_EQ(error_of("calibration:\n"
                     "  backend: cpu\n"
                     "  devices:\n"
                     "    - device: cpu:0\n"
                     "      probe_s: 0\n"),
            "cal.yaml:5: calibration.devices[0].probe_s = 0: must be > 0 and finite");
  EXPECT_EQ(error_of("calibration:\n"
                     "  backend: trace\n"
                     "  devices:\n"
                     "    - device: gpu:0\n"
                     "      family_fits:\n"
                     "        \"conv2d{r=3}\":\n"
                     "          segments:\n"
                     "            - {a_s: 0, s_per_flop: 1e-11, s_per_byte: 0}\n"),
            "cal.yaml:6: calibration.devices[0].family_fits[\"conv2d{r=3}\"]: not a shape family (e.g. "
            "conv2d{r=3,s=3,stride=1}, elementwise{inputs=2})");
  EXPECT_NE(error_of("calibration: [1, 2\n").find("cal.yaml:"), std::string::npos);
  EXPECT_EQ(error_of("machine: {}\n"), "cal.yaml:1: calibration: missing top-level block");
}

// Found by fuzz/calibration_yaml_fuzz: a list or map as a key escaped as yaml-cpp's bad conversion.
TEST(CalibrationYaml, ListsAndMapsAsKeysAreInputErrors) {
  const std::string device = "calibration:\n  backend: cpu\n  devices:\n    - device: cpu:0\n";
  EXPECT_EQ(error_of(device + "      kernels:\n        ? [a, b]\n        : 1e-3\n"),
            "cal.yaml:6: calibration.devices[0].kernels: keys must be plain names, not a list, map or null");
  EXPECT_EQ(error_of(device + "      fits:\n        ? {a: b}\n        : {}\n"),
            "cal.yaml:6: calibration.devices[0].fits: keys must be plain names, not a list, map or null");
  EXPECT_EQ(error_of(device + "      family_fits:\n        ? [1]\n        : {}\n"),
            "cal.yaml:6: calibration.devices[0].family_fits: keys must be plain names, not a list, map or null");
  EXPECT_EQ(error_of("calibration:\n  ? [backend]\n  : cpu\n"),
            "cal.yaml:2: calibration: keys must be plain names, not a list, map or null");
  // The fuzzer's own input: a map as a top-level key of a calibrated machine file.
  try {
    parse_calibrated_machine_yaml("? m\372chi:\n  nalmei", "m.yaml");
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "m.yaml:1: (top level): keys must be plain names, not a list, map or null");
  }
}

// Found by the option audit: a key or a kernel class given twice was read twice, the last one
// kept; core numbers were read as numbers ("1.5" failed, "1e0" and "0x1p0" passed), and every
// number as strtod reads it (hex floats, leading spaces).
TEST(CalibrationYaml, DuplicatesAndNumbersOfAnotherFormAreRefused) {
  const std::string device = "calibration:\n  backend: cpu\n  devices:\n    - device: cpu:0\n";
  const std::string fit = "{segments: [{a_s: 0, s_per_flop: 1e-11, s_per_byte: 0}]}";
  EXPECT_EQ(error_of(device + "      probe_s: 1\n      probe_s: 2\n"),
            "cal.yaml:6: calibration.devices[0].probe_s: duplicate key");
  EXPECT_EQ(error_of(device + "      fits:\n        gemm: " + fit + "\n        gemm: " + fit + "\n"),
            "cal.yaml:7: calibration.devices[0].fits.gemm: duplicate kernel class");
  EXPECT_EQ(error_of(device + "      fits:\n        gemm: " + fit + "\n        \"gemm\": " + fit + "\n"),
            "cal.yaml:7: calibration.devices[0].fits.gemm: duplicate kernel class");
  for (const char* core : {"1.5", "1e0", "0x1p0", "01x", "\" 1\"", "-1"})
    EXPECT_EQ(error_of(device + "      cores: [" + core + "]\n"),
              "cal.yaml:5: calibration.devices[0].cores[0] = " + std::string(core[0] == '"' ? " 1" : core) +
                  ": must be an integer in 0..1048576")
        << core;
  EXPECT_EQ(error_of(device + "      probe_s: 0x1p-3\n"), "cal.yaml:5: calibration.devices[0].probe_s = 0x1p-3: must be a number");
}

TEST(CalibratedMachineFile, WritesAtomicallyAndLoadsMachineAndCalibration) {
  Machine m = two_cpus();
  Calibration c = sample_calibration();
  auto dir = std::filesystem::temp_directory_path() / ("placelab_cal_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / "localhost.yaml";
  write_calibrated_machine(path, m, c);
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename(), "localhost.yaml") << "temporary file left behind";
  CalibratedMachine back = load_calibrated_machine(path);
  EXPECT_EQ(back.machine.name, "two");
  ASSERT_EQ(back.machine.num_devices(), 2u);
  EXPECT_DOUBLE_EQ(back.machine.devices[1].peak_flops_per_s, 1e11);
  EXPECT_DOUBLE_EQ(back.machine.route(0, 1).bandwidth_Bps, 5e9);
  EXPECT_EQ(back.calibration.devices.size(), 2u);
  std::filesystem::remove_all(dir);
  EXPECT_THROW(load_calibrated_machine(dir / "missing.yaml"), InputError);
}

TEST(CalibratedMachineFile, ErrorsInTheMachineBlockKeepTheirFileLine) {
  std::string text = machine_yaml(two_cpus(), true) + calibration_yaml(sample_calibration());
  const std::string key = "    memory_bytes: 8589934592\n";
  auto pos = text.find(key);
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, key.size(), "    memory_bytes: -4\n");
  const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
  try {
    parse_calibrated_machine_yaml(text, "m.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("m.yaml:" + std::to_string(line) + ": devices[0].memory_bytes", 0), 0u) << e.what();
  }
  // A calibrated device the machine lacks.
  Calibration c = sample_calibration();
  c.devices[1].device = "cpu:7";
  std::string bad = machine_yaml(two_cpus(), true) + calibration_yaml(c);
  try {
    parse_calibrated_machine_yaml(bad, "m.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("calibration.devices[1].device = cpu:7: not a device of the machine"), std::string::npos)
        << e.what();
  }
}

TEST(CalibratedCostModel, PrefersMeasuredThenFitThenAnalyticAndSaysWhich) {
  Machine m = two_cpus();
  Calibration c = sample_calibration();
  CalibratedCostModel cost(m, c);
  AnalyticCostModel analytic(m);
  const double overhead = m.devices[0].launch_overhead_s;

  const KernelSignature measured = KernelSignature::gemm(256, 256, 256);
  CostLookup l = cost.lookup(measured, 0);
  EXPECT_EQ(l.source, CostSource::kMeasured);
  EXPECT_DOUBLE_EQ(l.time_s, overhead + c.devices[0].kernel_times_s.at(measured));

  const KernelSignature held_out = KernelSignature::gemm(384, 384, 384);
  l = cost.lookup(held_out, 0);
  EXPECT_EQ(l.source, CostSource::kClassFit);
  const double truth = 1e-6 + kernel_flops(held_out) / 5e10;
  EXPECT_NEAR(l.time_s - overhead, truth, 0.02 * truth);

  const KernelSignature conv = KernelSignature::conv2d(KernelClass::kConv2D, 8, 3, 32, 32, 16, 3, 3, 1, 1);
  Op op{.name = "conv", .type = "Conv2D", .kernel = conv};
  l = cost.lookup(op, 0);
  EXPECT_EQ(l.source, CostSource::kAnalytic);
  EXPECT_DOUBLE_EQ(l.time_s, analytic.op_time_s(op, 0));
  // A noop costs the measured dispatch overhead on a calibrated device.
  Op nop{.name = "read", .type = "Identity"};
  EXPECT_EQ(cost.lookup(nop, 0).source, CostSource::kMeasured);
  EXPECT_DOUBLE_EQ(cost.lookup(nop, 0).time_s, overhead);
  // cpu:1 is in the calibration without measurements: its own (empty) entry, not cpu:0's.
  EXPECT_EQ(cost.lookup(measured, 1).source, CostSource::kAnalytic);
  EXPECT_EQ(cost.measured_on(1), DeviceId{1});
  EXPECT_EQ(cost_source_name(CostSource::kClassFit), "fit");
  // The graph's own measured time comes first: over the exact kernel time and a noop's overhead.
  const Op mine{.name = "mine", .type = "MatMul", .kernel = measured, .measured_s = {{"cpu", 0.002}, {"cpu:0", 0.001}}};
  EXPECT_EQ(cost.lookup(measured, 0).source, CostSource::kMeasured);  // the same kernel, without the op's time
  EXPECT_EQ(cost.lookup(mine, 0).source, CostSource::kGraph);
  EXPECT_EQ(cost.lookup(mine, 0).time_s, 0.001);
  EXPECT_EQ(cost.op_time_s(mine, 1), 0.002);
  nop.measured_s = {{"cpu", 0.0005}};
  EXPECT_EQ(cost.lookup(nop, 0).source, CostSource::kGraph);
  EXPECT_EQ(cost.lookup(nop, 0).time_s, 0.0005);

  // Transfers: the measured pair fit one way, the machine's route the other.
  EXPECT_DOUBLE_EQ(cost.transfer_time_s(6000, 0, 1), 3e-6 + 6000 / 6e9);
  EXPECT_DOUBLE_EQ(cost.transfer_time_s(5000, 1, 0), 2e-6 + 5000 / 5e9);
  EXPECT_EQ(cost.transfer_time_s(5000, 1, 1), 0);
  EXPECT_NE(cost.describe().find("testhost"), std::string::npos);
}

// A calibration covers identical devices (docs/calibration.md, "Identical devices"): the same
// kind, peaks, launch overhead and efficiency profile; anything else stays analytic.
TEST(CalibratedCostModel, MeasurementsPriceIdenticalDevicesOnly) {
  const KernelSignature measured = KernelSignature::gemm(256, 256, 256);
  Calibration c = sample_calibration();
  c.devices.resize(1);
  c.devices[0].device = "cpu:1";  // measured on the second device only: the first takes its times too
  Machine m = two_cpus();
  {
    CalibratedCostModel cost(m, c);
    EXPECT_EQ(cost.measured_on(0), DeviceId{1});
    EXPECT_EQ(cost.lookup(measured, 0).time_s, cost.lookup(measured, 1).time_s);
    EXPECT_EQ(cost.op_time_representative(1), DeviceId{0});  // one class, named by its smallest id
  }
  m.devices[0].model = "socket 0";  // free text: not compared
  m.devices[1].model = "socket 1";
  m.finalize();
  EXPECT_EQ(CalibratedCostModel(m, c).measured_on(0), DeviceId{1});
  m.devices[1].peak_flops_per_s *= 2;  // another type
  m.finalize();
  CalibratedCostModel cost(m, c);
  EXPECT_EQ(cost.lookup(measured, 0).source, CostSource::kAnalytic);
  EXPECT_EQ(cost.lookup(measured, 1).source, CostSource::kMeasured);
}

// The per-type summary behind `simulate --cost-sources`: every op once, on its own device, through
// the model's lookup (the base class answers "analytic" for models that measure nothing).
TEST(CalibratedCostModel, SummarizesCostSourcesByOpType) {
  Machine m = two_cpus();
  Calibration c = sample_calibration();
  CalibratedCostModel cost(m, c);
  OpGraph g;
  g.add_op({.name = "a", .type = "MatMul", .kernel = KernelSignature::gemm(256, 256, 256)});  // measured on cpu:0
  g.add_op({.name = "b", .type = "MatMul", .kernel = KernelSignature::gemm(384, 384, 384)});  // fit on cpu:0
  g.add_op({.name = "c", .type = "MatMul", .kernel = KernelSignature::gemm(256, 256, 256)});  // cpu:1: analytic
  g.add_op({.name = "d", .type = "Conv2D",
            .kernel = KernelSignature::conv2d(KernelClass::kConv2D, 8, 3, 32, 32, 16, 3, 3, 1, 1)});
  const Placement on{0, 0, 1, 0};
  const CostSourceSummary s = summarize_cost_sources(g, cost, on);
  ASSERT_EQ(s.per_op.size(), 4u);
  EXPECT_EQ(s.per_op[0].source, CostSource::kMeasured);
  EXPECT_EQ(s.per_op[1].source, CostSource::kClassFit);
  EXPECT_EQ(s.per_op[2].source, CostSource::kAnalytic);
  EXPECT_EQ(s.total.ops, (std::array<int64_t, 4>{0, 1, 1, 2}));
  ASSERT_EQ(s.by_type.size(), 2u);
  const CostSourceRow& mm = s.by_type[0].op_type == "MatMul" ? s.by_type[0] : s.by_type[1];
  EXPECT_EQ(mm.ops, (std::array<int64_t, 4>{0, 1, 1, 1}));
  double sum = 0;
  for (OpId v = 0; v < 4; ++v) sum += cost.op_time_s(g.op(v), on[v]);
  EXPECT_DOUBLE_EQ(s.total.total_time_s(), sum);
  EXPECT_GE(s.by_type[0].total_time_s(), s.by_type[1].total_time_s());

  AnalyticCostModel analytic(m);
  const CostSourceSummary a = summarize_cost_sources(g, analytic, on);
  EXPECT_EQ(a.total.ops, (std::array<int64_t, 4>{0, 0, 0, 4}));
}

// The leave-some-out check predicts held-out signatures from a fit of the others: exact for times
// that follow the fit's law, off by the planted deviation for one that does not.
TEST(Calibration, HoldOutCheckPredictsSignaturesTheFitDidNotSee) {
  Calibration c;
  c.backend = "trace";
  DeviceCalibration d;
  d.device = "cpu:0";
  for (int64_t m = 64; m <= 64 * 12; m += 64) {
    const KernelSignature sig = KernelSignature::gemm(m, 256, 256);
    d.kernel_times_s[sig] = 2e-6 + kernel_flops(sig) / 1e10;  // 10 GFLOP/s + 2 us
  }
  const KernelSignature odd = KernelSignature::gemm(128, 256, 256);  // index 1: held out
  d.kernel_times_s[odd] *= 1.5;
  c.devices.push_back(d);
  const HoldOutReport r = hold_out_check(c, 3, FitOptions{.max_segments = 1});
  ASSERT_EQ(r.classes.size(), 1u);
  EXPECT_EQ(r.classes[0].held_out, 4);  // indices 1, 4, 7, 10 of 12
  EXPECT_EQ(r.classes[0].fitted, 8);
  ASSERT_EQ(r.predictions.size(), 4u);
  EXPECT_EQ(r.predictions[0].signature, odd);
  EXPECT_NEAR(r.predictions[0].relative_error(), 1 / 1.5 - 1, 1e-6);
  for (std::size_t i = 1; i < r.predictions.size(); ++i) EXPECT_NEAR(r.predictions[i].relative_error(), 0, 1e-6);
  EXPECT_NEAR(r.median_abs_error, 0, 1e-6);
  EXPECT_NEAR(r.classes[0].max_abs_error, 1 - 1 / 1.5, 1e-6);
  // Too few signatures for the class: nothing to check.
  c.devices[0].kernel_times_s.erase(KernelSignature::gemm(64, 256, 256));
  EXPECT_TRUE(hold_out_check(c, 8).classes.empty());
}

// Shape families: a backend's algorithm follows the filter size, so a signature is priced by its
// family's fit before its class's. Here 1x1 convolutions run at a quarter of the 3x3 ones' speed
// per FLOP; the class line would be wrong for both, the family lines are exact.
TEST(Calibration, FamilyFitsPriceBeforeTheClassFitAndRoundTrip) {
  EXPECT_EQ(kernel_family(KernelSignature::conv2d(KernelClass::kConv2DBackpropInput, 8, 16, 14, 14, 32, 3, 3, 2, 1)),
            "conv2d_backprop_input{r=3,s=3,stride=2}");
  EXPECT_EQ(kernel_family(KernelSignature::elementwise(100, 3)), "elementwise{inputs=3}");
  EXPECT_EQ(kernel_family(KernelSignature::gemm(4, 4, 4)), "");
  Calibration c;
  c.backend = "trace";
  DeviceCalibration d;
  d.device = "gpu:0";
  auto conv = [](int64_t channels, int64_t r) {
    return KernelSignature::conv2d(KernelClass::kConv2D, 32, channels, 28, 28, 128, r, r, 1, r / 2);
  };
  for (int64_t ch : {64, 128, 192, 256, 320, 384, 448}) {
    d.kernel_times_s[conv(ch, 3)] = 5e-6 + kernel_flops(conv(ch, 3)) / 1.2e13;
    d.kernel_times_s[conv(ch, 1)] = 5e-6 + kernel_flops(conv(ch, 1)) / 3e12;
  }
  c.devices.push_back(d);
  c.refit(FitOptions{.max_segments = 1});
  ASSERT_EQ(c.devices[0].family_fits.size(), 2u);
  const KernelSignature unseen = conv(288, 1);
  const double truth = 5e-6 + kernel_flops(unseen) / 3e12;
  EXPECT_NEAR(*fitted_time_s(c.devices[0], unseen), truth, 1e-3 * truth);
  // Without the family, the class line misses it.
  DeviceCalibration class_only = c.devices[0];
  class_only.family_fits.clear();
  EXPECT_GT(std::fabs(*fitted_time_s(class_only, unseen) / truth - 1), 0.2);
  // A family with too few signatures is not fitted: 7x7 falls back to the class.
  EXPECT_FALSE(c.devices[0].family_fits.contains(kernel_family(conv(64, 7))));
  EXPECT_TRUE(fitted_time_s(c.devices[0], conv(64, 7)).has_value());
  EXPECT_FALSE(fitted_time_s(c.devices[0], KernelSignature::gemm(4, 4, 4)).has_value());

  Calibration back = parse_calibration_yaml(calibration_yaml(c), "rt.yaml");
  ASSERT_EQ(back.devices[0].family_fits.size(), 2u);
  EXPECT_NEAR(*fitted_time_s(back.devices[0], unseen), truth, 1e-3 * truth);
  // The leave-some-out check uses the family fits as the cost model does.
  EXPECT_LT(hold_out_check(c, 3, FitOptions{.max_segments = 1}).median_abs_error, 1e-3);
}

TEST(Verify, SpearmanAndSummary) {
  std::vector<double> a = {1, 2, 3, 4, 5}, b = {10, 20, 30, 50, 40}, c = {5, 4, 3, 2, 1};
  EXPECT_DOUBLE_EQ(spearman_correlation(a, a), 1.0);
  EXPECT_DOUBLE_EQ(spearman_correlation(a, c), -1.0);
  EXPECT_NEAR(spearman_correlation(a, b), 0.9, 1e-12);  // one swap: 1 − 6·2/(5·24)
  std::vector<double> tied = {1, 1, 2};
  std::vector<double> other = {3, 3, 4};
  EXPECT_DOUBLE_EQ(spearman_correlation(tied, other), 1.0);
  std::vector<VerifyReport> reports = {{.predicted_s = 1.1, .measured_s = 1, .error = 0.1},
                                       {.predicted_s = 1.8, .measured_s = 2, .error = -0.1},
                                       {.predicted_s = 3.9, .measured_s = 3, .error = 0.3},
                                       {.predicted_s = 9, .measured_s = 1, .error = 8, .oom = true}};
  VerifySummary s = summarize(reports);
  EXPECT_EQ(s.placements, 3);
  EXPECT_NEAR(s.median_abs_error, 0.1, 1e-12);
  EXPECT_NEAR(s.worst_abs_error, 0.3, 1e-12);
  EXPECT_DOUBLE_EQ(s.spearman, 1.0);
}


}  // namespace
}  // namespace placelab
