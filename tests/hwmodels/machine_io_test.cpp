#include "placelab/hwmodels/machine_io.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "placelab/hwmodels/calibration.h"

namespace placelab {
namespace {

// A valid machine; the tests below break one line at a time. Line numbers are in the comments.
const char* const kToy =
    "name: toy\n"                           // 1
    "devices:\n"                            // 2
    "  - name: cpu:0\n"                     // 3
    "    kind: cpu\n"                       // 4
    "    peak_flops: 1e11\n"                // 5
    "    memory_bandwidth_Bps: 10 GB/s\n"   // 6
    "    memory_bytes: 8 GiB\n"             // 7
    "    streams: 2\n"                      // 8
    "    launch_overhead_s: 3 us\n"         // 9
    "  - name: gpu:0\n"                     // 10
    "    kind: gpu\n"                       // 11
    "    peak_flops: 4.37 TFLOP/s\n"        // 12
    "    memory_bandwidth_Bps: 240e9\n"     // 13
    "    memory_bytes: 12 GB\n"             // 14
    "    streams: 1\n"                      // 15
    "    launch_overhead_s: 5e-6\n"         // 16
    "switches: [rc:0]\n"                    // 17
    "links:\n"                              // 18
    "  - a: cpu:0\n"                        // 19
    "    b: rc:0\n"                         // 20
    "    kind: memory\n"                    // 21
    "    bandwidth_Bps: 50 GB/s\n"          // 22
    "    latency_s: 0\n"                    // 23
    "  - a: rc:0\n"                         // 24
    "    b: gpu:0\n"                        // 25
    "    kind: pcie\n"                      // 26
    "    bandwidth_Bps: 11.3 GB/s\n"        // 27
    "    latency_s: 5 us\n"                 // 28
    "    reverse_bandwidth_Bps: 12 GB/s\n"; // 29

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}
std::string text_of(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}
// kToy with 1-based line `n` replaced by `replacement`.
std::string with_line(int n, const std::string& replacement) {
  auto lines = lines_of(kToy);
  lines.at(static_cast<std::size_t>(n - 1)) = replacement;
  return text_of(lines);
}
// kToy without lines first..last (1-based, inclusive).
std::string without_lines(int first, int last) {
  auto lines = lines_of(kToy);
  lines.erase(lines.begin() + (first - 1), lines.begin() + last);
  return text_of(lines);
}

std::string load_error(const std::string& text) {
  try {
    parse_machine_yaml(text, "t.yaml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(MachineYaml, ParsesPlainNumbersAndHumanUnits) {
  Machine m = parse_machine_yaml(kToy, "t.yaml");
  EXPECT_EQ(m.name, "toy");
  ASSERT_EQ(m.num_devices(), 2u);
  const Device& c = m.devices[0];
  EXPECT_EQ(c.kind, DeviceKind::kCpu);
  EXPECT_DOUBLE_EQ(c.peak_flops_per_s, 1e11);
  EXPECT_DOUBLE_EQ(c.memory_bandwidth_Bps, 10e9);
  EXPECT_EQ(c.memory_bytes, int64_t{8} << 30);
  EXPECT_EQ(c.streams, 2);
  EXPECT_EQ(c.full_speed_ops, 1);  // the default: ops in flight share the device
  EXPECT_EQ(c.parallel_capacity(), 1);
  EXPECT_DOUBLE_EQ(c.launch_overhead_s, 3e-6);
  const Device& g = m.devices[1];
  EXPECT_EQ(g.kind, DeviceKind::kGpu);
  EXPECT_DOUBLE_EQ(g.peak_flops_per_s, 4.37e12);
  EXPECT_DOUBLE_EQ(g.memory_bandwidth_Bps, 240e9);
  EXPECT_EQ(g.memory_bytes, 12'000'000'000);
  EXPECT_DOUBLE_EQ(g.launch_overhead_s, 5e-6);
  EXPECT_TRUE(c.copy_engine);  // the default
  EXPECT_FALSE(parse_machine_yaml(with_line(9, "    launch_overhead_s: 3 us\n    copy_engine: false"), "t.yaml")
                   .devices[0]
                   .copy_engine);
  EXPECT_EQ(m.switches, std::vector<std::string>{"rc:0"});
  ASSERT_EQ(m.links.size(), 2u);
  EXPECT_EQ(m.links[0].kind, LinkKind::kMemory);
  EXPECT_DOUBLE_EQ(m.links[1].bandwidth_Bps, 11.3e9);
  EXPECT_DOUBLE_EQ(m.links[1].latency_s, 5e-6);
  EXPECT_EQ(m.links[1].reverse_bandwidth_Bps, 12e9);
  EXPECT_FALSE(m.links[1].reverse_latency_s);
  // Finalised on load: routes exist.
  EXPECT_DOUBLE_EQ(m.route(1, 0).bandwidth_Bps, 12e9);
  EXPECT_DOUBLE_EQ(m.route(0, 1).latency_s, 5e-6);
}

TEST(MachineYaml, EveryUnitOfTheTable) {
  struct Case {
    int line;
    std::string text;
    double expected;
  };
  // Each value replaces one field of kToy and is read back through the machine.
  const std::vector<Case> cases = {
      {12, "    peak_flops: 9.3 TFLOPS", 9.3e12},    {12, "    peak_flops: 845 GFLOP/s", 845e9},
      {12, "    peak_flops: 2 PFLOP/s", 2e15},       {12, "    peak_flops: 5MFLOP/s", 5e6},
      {13, "    memory_bandwidth_Bps: 1 TB/s", 1e12}, {13, "    memory_bandwidth_Bps: 2 GiB/s", 2.0 * (1 << 30)},
      {13, "    memory_bandwidth_Bps: 3 MiB/s", 3.0 * (1 << 20)}, {13, "    memory_bandwidth_Bps: 7 kB/s", 7e3},
      {14, "    memory_bytes: 1.5 KiB", 1536},       {14, "    memory_bytes: 16 MB", 16e6},
      {14, "    memory_bytes: 2 TiB", 2.0 * (int64_t{1} << 40)}, {14, "    memory_bytes: 300 B", 300},
      {16, "    launch_overhead_s: 5 µs", 5e-6},      {16, "    launch_overhead_s: 250 ns", 250e-9},
      {16, "    launch_overhead_s: 0.1 ms", 1e-4},    {16, "    launch_overhead_s: 0.002 s", 2e-3},
  };
  for (const Case& c : cases) {
    Machine m = parse_machine_yaml(with_line(c.line, c.text), "t.yaml");
    const Device& g = m.devices[1];
    double got = c.line == 12 ? g.peak_flops_per_s
                 : c.line == 13 ? g.memory_bandwidth_Bps
                 : c.line == 14 ? static_cast<double>(g.memory_bytes)
                                : g.launch_overhead_s;
    EXPECT_DOUBLE_EQ(got, c.expected) << c.text;
  }
}

TEST(MachineYaml, FieldErrorsNameFileLineFieldValueAndRule) {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {with_line(7, "    memory_bytes: -4"), "t.yaml:7: devices[0].memory_bytes = -4: must be > 0"},
      {with_line(7, "    memory_bytes: 0 GiB"), "t.yaml:7: devices[0].memory_bytes = 0 GiB: must be > 0"},
      {with_line(12, "    peak_flops: 0"), "t.yaml:12: devices[1].peak_flops = 0: must be > 0"},
      {with_line(28, "    latency_s: -1 us"), "t.yaml:28: links[1].latency_s = -1 us: must be >= 0"},
      {with_line(27, "    bandwidth_Bps: 0"), "t.yaml:27: links[1].bandwidth_Bps = 0: must be > 0"},
      {with_line(29, "    reverse_bandwidth_Bps: -12 GB/s"),
       "t.yaml:29: links[1].reverse_bandwidth_Bps = -12 GB/s: must be > 0"},
      // Positive and finite, but outside any machine: a denormal rate's reciprocal is infinite.
      {with_line(12, "    peak_flops: 1e-320"), "t.yaml:12: devices[1].peak_flops = 1e-320: must be in [1e3, 1e19] FLOP/s"},
      {with_line(27, "    bandwidth_Bps: 1e30 GB/s"),
       "t.yaml:27: links[1].bandwidth_Bps = 1e30 GB/s: must be in [1e3, 1e16] bytes/s"},
      {with_line(16, "    launch_overhead_s: 1e9 s"),
       "t.yaml:16: devices[1].launch_overhead_s = 1e9 s: must be in [0, 1e4] seconds"},
      {with_line(8, "    streams: two"), "t.yaml:8: devices[0].streams = two: must be an integer in 1..256"},
      {with_line(8, "    streams: 2.5"), "t.yaml:8: devices[0].streams = 2.5: must be an integer in 1..256"},
      {with_line(8, "    streams: 0"), "t.yaml:8: devices[0].streams = 0: must be an integer in 1..256"},
      {with_line(8, "    streams: 2\n    full_speed_ops: 3"),
       "t.yaml:9: devices[0].full_speed_ops = 3: must be an integer in 1..streams (2)"},
      {with_line(8, "    streams: 2\n    full_speed_ops: 0"),
       "t.yaml:9: devices[0].full_speed_ops = 0: must be an integer in 1..streams (2)"},
      {with_line(8, "    streams: 2\n    full_speed_ops: all"),
       "t.yaml:9: devices[0].full_speed_ops = all: must be an integer in 1..streams (2)"},
      {with_line(8, "    streams: [1, 2]"),
       "t.yaml:8: devices[0].streams = <a sequence>: must be an integer in 1..256"},
      {with_line(12, "    peak_flops: 4.37 TB/s"),
       "t.yaml:12: devices[1].peak_flops = 4.37 TB/s: must be a number of FLOP/s, e.g. 4.37e12 or \"4.37 TFLOP/s\""},
      {with_line(13, "    memory_bandwidth_Bps: 240 GB"),
       "t.yaml:13: devices[1].memory_bandwidth_Bps = 240 GB: must be a number of bytes/s, e.g. 11.3e9 or "
       "\"11.3 GB/s\""},
      {with_line(14, "    memory_bytes: twelve"),
       "t.yaml:14: devices[1].memory_bytes = twelve: must be a number of bytes, e.g. 12884901888 or \"12 GiB\""},
      {with_line(16, "    launch_overhead_s: 5 usec"),
       "t.yaml:16: devices[1].launch_overhead_s = 5 usec: must be a number of seconds, e.g. 5e-6 or \"5 us\""},
      {with_line(16, "    launch_overhead_s: .inf"),
       "t.yaml:16: devices[1].launch_overhead_s = .inf: must be a number of seconds, e.g. 5e-6 or \"5 us\""},
      {with_line(16, "    launch_overhead_s:"),
       "t.yaml:16: devices[1].launch_overhead_s = <empty>: must be a number of seconds, e.g. 5e-6 or \"5 us\""},
      {with_line(4, "    kind: tpu"), "t.yaml:4: devices[0].kind = tpu: must be cpu or gpu"},
      {with_line(26, "    kind: infiniband"),
       "t.yaml:26: links[1].kind = infiniband: must be one of pcie, nvlink, qpi, network, memory"},
      {with_line(1, "name: [a, b]"), "t.yaml:1: name = <a sequence>: must be a string"},
      {"name: toy\ndevices:\n  - just a string\n",
       "t.yaml:3: devices[0] = just a string: must be a mapping with keys name, kind, model, peak_flops, "
       "memory_bandwidth_Bps, memory_bytes, streams, launch_overhead_s, full_speed_ops, dispatch_s, copy_engine, "
            "efficiency"},
      {with_line(9, "    launch_overhead_s: 3 us\n    copy_engine: no"),
       "t.yaml:10: devices[0].copy_engine = no: must be true or false"},
      {with_line(17, "switches: rc:0"), "t.yaml:17: switches = rc:0: must be a sequence of names"},
      {with_line(17, "switches: [[rc:0]]"), "t.yaml:17: switches[0] = <a sequence>: must be a name"},
      {"name: toy\ndevices: []\n", "t.yaml:2: devices = <a sequence>: must be a non-empty sequence of devices"},
      {"? [a, b]\n: 1\nname: toy\n", "t.yaml:1: (document): keys must be plain names, not <a sequence>"},
      {"- a\n- b\n",
       "t.yaml:1: (document) = <a sequence>: must be a mapping with keys name, description, devices, switches, links, "
       "route_figures, cluster"},
      {"", "t.yaml:1: (document) = <empty>: must be a mapping with keys name, description, devices, switches, links, "
           "route_figures, cluster"},
  };
  for (const Case& c : cases) EXPECT_EQ(load_error(c.text), c.message) << c.text;
}

TEST(MachineYaml, UnknownDuplicateAndMissingKeys) {
  EXPECT_EQ(load_error(with_line(5, "    peek_flops: 1e11")),
            "t.yaml:5: devices[0].peek_flops: unknown key; expected one of name, kind, model, peak_flops, "
            "memory_bandwidth_Bps, memory_bytes, streams, launch_overhead_s, full_speed_ops, dispatch_s, copy_engine, "
            "efficiency");
  EXPECT_EQ(load_error(with_line(1, "nam: toy")),
            "t.yaml:1: nam: unknown key; expected one of name, description, devices, switches, links, "
            "route_figures, cluster");
  EXPECT_EQ(load_error(with_line(23, "    latency: 0")),
            "t.yaml:23: links[0].latency: unknown key; expected one of a, b, kind, bandwidth_Bps, latency_s, "
            "reverse_bandwidth_Bps, reverse_latency_s");
  EXPECT_EQ(load_error(with_line(6, "    peak_flops: 2e11")), "t.yaml:6: devices[0].peak_flops: duplicate key");
  // A missing field points at the entry that lacks it.
  EXPECT_EQ(load_error(without_lines(13, 13)), "t.yaml:10: devices[1].memory_bandwidth_Bps: missing (required)");
  EXPECT_EQ(load_error(without_lines(28, 28)), "t.yaml:24: links[1].latency_s: missing (required)");
  EXPECT_EQ(load_error(without_lines(1, 1)), "t.yaml:1: name: missing (required)");
  EXPECT_EQ(load_error("name: toy\n"), "t.yaml:1: devices: missing (required unless the machine is a `cluster`)");
}

TEST(MachineYaml, EfficiencyNamesABuiltInProfileOrSpellsOneOut) {
  // Without the key a device has no profile (the cost model's flat per-kind defaults).
  EXPECT_FALSE(parse_machine_yaml(kToy, "t.yaml").devices[1].efficiency.has_value());
  Machine named = parse_machine_yaml(with_line(16, "    launch_overhead_s: 5e-6\n    efficiency: k80"), "t.yaml");
  ASSERT_TRUE(named.devices[1].efficiency.has_value());
  EXPECT_EQ(named.devices[1].efficiency->name, "k80");
  EXPECT_DOUBLE_EQ(named.devices[1].efficiency->curve(KernelClass::kGemm).compute_max, 0.66);

  Machine custom = parse_machine_yaml(with_line(16,
                                                "    launch_overhead_s: 5e-6\n"
                                                "    efficiency:\n"
                                                "      base: k80\n"
                                                "      host_op_s: 1 us\n"
                                                "      conv2d: {compute_max: 0.3, compute_half_flops: 1e9}\n"
                                                "      elementwise: {memory_half_bytes: 2 MB}"),
                                      "t.yaml");
  const EfficiencyProfile& p = *custom.devices[1].efficiency;
  EXPECT_EQ(p.name, "custom");
  EXPECT_DOUBLE_EQ(p.curve(KernelClass::kConv2D).compute_max, 0.3);
  EXPECT_DOUBLE_EQ(p.curve(KernelClass::kConv2D).compute_half_flops, 1e9);
  EXPECT_DOUBLE_EQ(p.curve(KernelClass::kConv2D).memory_max, 0.7);  // from the base
  EXPECT_DOUBLE_EQ(p.curve(KernelClass::kElementwise).memory_half_bytes, 2e6);
  EXPECT_DOUBLE_EQ(p.host_op_s.value(), 1e-6);
  EXPECT_DOUBLE_EQ(p.winograd_speedup, 2.0);

  EXPECT_EQ(load_error(with_line(16, "    launch_overhead_s: 5e-6\n    efficiency: k81")),
            "t.yaml:17: devices[1].efficiency = k81: not a built-in efficiency profile; profiles: k80, p100, v100");
  EXPECT_EQ(load_error(with_line(16, "    launch_overhead_s: 5e-6\n    efficiency:\n      conv: {}")),
            "t.yaml:18: devices[1].efficiency.conv: unknown key; expected one of base, winograd_speedup, host_op_s, "
            "gemm, conv2d, conv2d_backprop_input, conv2d_backprop_filter, elementwise, reduction, embedding, "
            "softmax, copy");
  EXPECT_EQ(load_error(with_line(16, "    launch_overhead_s: 5e-6\n    efficiency:\n      gemm:\n        peak: 1")),
            "t.yaml:19: devices[1].efficiency.gemm.peak: unknown key; expected one of compute_max, "
            "compute_half_flops, memory_max, memory_half_bytes");
  EXPECT_EQ(load_error(with_line(16, "    launch_overhead_s: 5e-6\n    efficiency:\n      gemm:\n        compute_max: 1.5")),
            "t.yaml:19: devices[1].efficiency.gemm.compute_max = 1.5: must be in (0, 1]");
  EXPECT_EQ(load_error(with_line(16, "    launch_overhead_s: 5e-6\n    efficiency:\n      winograd_speedup: 9")),
            "t.yaml:18: devices[1].efficiency.winograd_speedup = 9: must be in [1, 4]");
}

TEST(MachineYaml, FinalizeErrorsPointAtTheOffendingEntry) {
  EXPECT_EQ(load_error(with_line(25, "    b: gpu:9")), "t.yaml:25: links[1].b = gpu:9: not a device or switch name");
  EXPECT_EQ(load_error(with_line(19, "  - a: cpu:7")), "t.yaml:19: links[0].a = cpu:7: not a device or switch name");
  EXPECT_EQ(load_error(with_line(25, "    b: rc:0")),
            "t.yaml:25: links[1].b = rc:0: must differ from a (a link joins two nodes)");
  EXPECT_EQ(load_error(with_line(10, "  - name: cpu:0")), "t.yaml:10: devices[1].name = cpu:0: duplicate name");
  EXPECT_EQ(load_error(with_line(17, "switches: [rc:0, gpu:0]")),
            "t.yaml:17: switches[1] = gpu:0: duplicate name (already a device or switch)");
  // Without the second link gpu:0 is unreachable; the message points at its device entry.
  EXPECT_EQ(load_error(without_lines(24, 29)),
            "t.yaml:10: devices[1] = gpu:0: no route from cpu:0 (devices never relay traffic: link both to a "
            "common switch or to each other)");
}

// kToy with measured figures of its two host routes, one named alone and one in a list.
const std::string kToyWithFigures = std::string(kToy) +
                                    "route_figures:\n"                // 30
                                    "  - from: gpu:0\n"               // 31
                                    "    to: [cpu:0]\n"               // 32
                                    "    bandwidth_Bps: 2.54 GB/s\n"  // 33
                                    "  - from: [cpu:0]\n"             // 34
                                    "    to: gpu:0\n"                 // 35
                                    "    latency_s: 9.5 us\n";        // 36

std::string figures_error(int n, const std::string& replacement) {
  auto lines = lines_of(kToyWithFigures);
  lines.at(static_cast<std::size_t>(n - 1)) = replacement;
  return load_error(text_of(lines));
}

TEST(MachineYaml, RouteFiguresGiveWholeRoutesTheirMeasuredFigures) {
  const Machine m = parse_machine_yaml(kToyWithFigures, "t.yaml");
  ASSERT_EQ(m.route_figures.size(), 2u);
  EXPECT_EQ(m.route_figures[0].from, std::vector<std::string>{"gpu:0"});
  EXPECT_DOUBLE_EQ(m.route(1, 0).bandwidth_Bps, 2.54e9);
  EXPECT_DOUBLE_EQ(m.route(1, 0).latency_s, 5e-6);  // the hops' sum: the entry gives no latency
  EXPECT_DOUBLE_EQ(m.route(0, 1).latency_s, 9.5e-6);
  EXPECT_DOUBLE_EQ(m.route(0, 1).bandwidth_Bps, 11.3e9);
  // Written back (a calibrated machine file's block) and read again: the same figures.
  const Machine again = parse_machine_yaml(machine_yaml(m, false), "again.yaml");
  EXPECT_DOUBLE_EQ(again.route(1, 0).bandwidth_Bps, 2.54e9);
  EXPECT_DOUBLE_EQ(again.route(0, 1).latency_s, 9.5e-6);
}

TEST(MachineYaml, RouteFigureErrorsNameFileLineFieldValueAndRule) {
  EXPECT_EQ(figures_error(32, "    to: [cpu:0, rc:0]"), "t.yaml:32: route_figures[0].to[1] = rc:0: not a device name");
  EXPECT_EQ(figures_error(31, "  - from: gpu:7"), "t.yaml:31: route_figures[0].from[0] = gpu:7: not a device name");
  EXPECT_EQ(figures_error(33, "    latency: 1 us"),
            "t.yaml:33: route_figures[0].latency: unknown key; expected one of from, to, bandwidth_Bps, latency_s");
  EXPECT_EQ(figures_error(33, "    bandwidth_Bps: 0"), "t.yaml:33: route_figures[0].bandwidth_Bps = 0: must be > 0");
  EXPECT_EQ(figures_error(36, "    latency_s: soon"),
            "t.yaml:36: route_figures[1].latency_s = soon: must be a number of seconds, e.g. 5e-6 or \"5 us\"");
  EXPECT_EQ(figures_error(33, "    to: cpu:0"), "t.yaml:33: route_figures[0].to: duplicate key");
  EXPECT_EQ(figures_error(32, "    too: [cpu:0]").rfind("t.yaml:32: route_figures[0].too: unknown key", 0), 0u);
  EXPECT_EQ(figures_error(32, "    to: {a: b}"),
            "t.yaml:32: route_figures[0].to = <a mapping>: must be a device name or a non-empty sequence of device "
            "names");
  EXPECT_EQ(figures_error(32, "    to: []"),
            "t.yaml:32: route_figures[0].to = <a sequence>: must be a device name or a non-empty sequence of device "
            "names");
  EXPECT_EQ(figures_error(33, "    kind: pcie").rfind("t.yaml:33: route_figures[0].kind: unknown key", 0), 0u);
  EXPECT_EQ(figures_error(33, ""), "t.yaml:31: route_figures[0]: must give bandwidth_Bps, latency_s or both");
  EXPECT_EQ(figures_error(35, "    to: cpu:0"), "t.yaml:34: route_figures[1]: names no pair of two different devices");
  EXPECT_EQ(load_error(kToyWithFigures + "  - from: gpu:0\n    to: cpu:0\n    latency_s: 1 us\n"),
            "t.yaml:37: route_figures[2] = gpu:0 -> cpu:0: already given by route_figures[0]");
  EXPECT_EQ(load_error(std::string(kToy) + "route_figures: 3\n"),
            "t.yaml:30: route_figures = 3: must be a sequence of route figures");
}

TEST(MachineYaml, SyntaxErrorsCarryTheLine) {
  std::string error = load_error(with_line(20, "    b: [rc:0"));
  EXPECT_EQ(error.rfind("t.yaml:21: YAML syntax error: ", 0), 0u) << error;
  error = load_error(with_line(11, "    kind: gpu: x"));
  EXPECT_EQ(error.rfind("t.yaml:11: YAML syntax error: ", 0), 0u) << error;
  error = load_error(with_line(23, "\tlatency_s: 0"));
  EXPECT_EQ(error.rfind("t.yaml:23: YAML syntax error: ", 0), 0u) << error;
}

TEST(MachineYaml, ReadsFilesAndNamesMissingOnes) {
  auto dir = std::filesystem::temp_directory_path() / ("placelab_hw_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  auto path = dir / "toy.yaml";
  {
    std::ofstream out(path);
    out << with_line(7, "    memory_bytes: -4");
  }
  try {
    read_machine_yaml(path);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ":7: devices[0].memory_bytes = -4: must be > 0");
  }
  {
    std::ofstream out(path);
    out << kToy;
  }
  EXPECT_EQ(load_machine(path.string()).name, "toy");
  EXPECT_EQ(read_machine_yaml(path).num_devices(), 2u);
  std::filesystem::remove_all(dir);
  try {
    read_machine_yaml(path);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ": cannot open machine file");
  }
}

// A cluster of toy nodes; line numbers in the comments.
const char* const kCluster =
    "name: toys\n"                                   // 1
    "description: four toys\n"                       // 2
    "cluster:\n"                                     // 3
    "  node: toy.yaml\n"                             // 4
    "  nodes: 4\n"                                   // 5
    "  network:\n"                                   // 6
    "    bandwidth_Bps: 12.5 GB/s\n"                 // 7
    "    latency_s: 1.5 us\n"                        // 8
    "    nics: [rc:0, [gpu:0, cpu:0]]\n";            // 9

// kCluster with line `n` replaced, parsed as dir/c.yaml beside dir/toy.yaml (kToy); the error.
class ClusterYaml : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("placelab_cluster_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "toy.yaml") << kToy;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string origin() const { return (dir_ / "c.yaml").string(); }
  std::string text(int n = 0, const std::string& replacement = "") const {
    std::vector<std::string> lines = lines_of(kCluster);
    if (n > 0) lines.at(static_cast<std::size_t>(n - 1)) = replacement;
    return text_of(lines);
  }
  // The error for kCluster with line n replaced, the origin written as "c.yaml".
  std::string error(int n, const std::string& replacement) const {
    try {
      parse_machine_yaml(text(n, replacement), origin());
    } catch (const InputError& e) {
      std::string message = e.what();
      for (std::size_t at; (at = message.find(dir_.string() + "/")) != std::string::npos;)
        message.erase(at, dir_.string().size() + 1);
      return message;
    }
    return "no error";
  }
  std::filesystem::path dir_;
};

TEST_F(ClusterYaml, ComposesTheNodeFileRelativeToTheClusterFile) {
  const Machine m = parse_machine_yaml(text(), origin());
  EXPECT_EQ(m.name, "toys");
  EXPECT_EQ(m.description, "four toys");
  ASSERT_EQ(m.num_devices(), 8u);
  EXPECT_EQ(m.devices[6].name, "node3/cpu:0");
  EXPECT_EQ(m.switches.back(), "fabric");
  EXPECT_EQ(std::count_if(m.switches.begin(), m.switches.end(), [](const std::string& s) { return s.find("/nic") != std::string::npos; }), 8);
  const Route r = m.route(*m.find_device("node0/gpu:0"), *m.find_device("node2/gpu:0"));
  EXPECT_DOUBLE_EQ(r.latency_s, 1.5e-6);
  EXPECT_DOUBLE_EQ(r.bandwidth_Bps, 12e9);  // the NIC–gpu:0 link: gpu:0's widest PCIe direction
  // The written form is a plain machine that loads to the same routes.
  const Machine again = parse_machine_yaml(machine_yaml(m, false), "w.yaml");
  EXPECT_EQ(again.route(7, 0).latency_s, m.route(7, 0).latency_s);
  EXPECT_EQ(again.route(7, 0).hops.size(), m.route(7, 0).hops.size());
  // A preset as the node.
  EXPECT_EQ(parse_machine_yaml(text(4, "  node: k80x4"), origin()).num_devices(), 20u);
}

// Sizes are bounded before any route is searched, and a value is echoed in at most 60 bytes: a file
// that is one long scalar is named, not printed back.
TEST(MachineYaml, DeviceCountIsBoundedAndLongValuesAreCut) {
  std::string big = "name: big\ndevices:\n";
  for (int i = 0; i < 5000; ++i)
    big += "  - {name: gpu:" + std::to_string(i) + ", kind: gpu, peak_flops: 1e13, memory_bandwidth_Bps: 1e11, memory_bytes: 1e9}\n";
  try {
    parse_machine_yaml(big, "big.yaml");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "big.yaml:3: devices = 5000 devices: a machine may hold at most 4096 devices");
  }
  try {
    parse_machine_yaml(std::string(100000, 'a'), "scalar.yaml");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u) << e.what();
    EXPECT_NE(std::string(e.what()).find("... (100000 bytes)"), std::string::npos) << e.what();
  }
}

TEST_F(ClusterYaml, ErrorsNameFileLineFieldValueAndRule) {
  EXPECT_EQ(error(4, "  node: nosuch"),
            "c.yaml:4: cluster.node = nosuch: not a preset or a machine file; presets: " + [] {
              std::string list;
              for (const std::string& p : preset_names()) list += (list.empty() ? "" : ", ") + p;
              return list;
            }());
  EXPECT_EQ(error(4, "  node: gone.yaml"), "c.yaml:4: cluster.node = gone.yaml: gone.yaml: cannot open machine file");
  EXPECT_EQ(error(4, "  node: /dev/zero"), "c.yaml:4: cluster.node = /dev/zero: not a regular file");
  EXPECT_EQ(error(5, "  nodes: 0"), "c.yaml:5: cluster.nodes = 0: must be an integer in 1..4096");
  EXPECT_EQ(error(5, "  nodes: 5000"), "c.yaml:5: cluster.nodes = 5000: must be an integer in 1..4096");
  EXPECT_EQ(error(5, "  nodes: 2.5"), "c.yaml:5: cluster.nodes = 2.5: must be an integer in 1..4096");
  EXPECT_EQ(error(5, "  nodes: 4000"),
            "c.yaml:5: cluster.nodes = 4000: 4000 nodes of 2 devices (toy) make 8000; a cluster may hold at most "
            "4096 devices");
  EXPECT_EQ(error(9, "    nics: [rc:0, [gpu:0, plx:9]]"),
            "c.yaml:9: cluster.network.nics[1][1] = plx:9: not a device or switch of node node0 (machine toy)");
  EXPECT_EQ(error(9, "    nics:\n      - rc:0\n      - rc:1"),
            "c.yaml:11: cluster.network.nics[1] = rc:1: not a device or switch of node node0 (machine toy)");
  EXPECT_EQ(error(9, "    nics: [rc:0, {a: b}]"),
            "c.yaml:9: cluster.network.nics[1] = <a mapping>: must be a sequence of attach points, each a switch or "
            "device name of the node or a sequence of them (one NIC each)");
  EXPECT_EQ(error(9, "    nics: []"),
            "c.yaml:9: cluster.network.nics = <a sequence>: must be a sequence of attach points, each a switch or "
            "device name of the node or a sequence of them (one NIC each)");
  EXPECT_EQ(error(7, "    bandwidth_Bps: 0"), "c.yaml:7: cluster.network.bandwidth_Bps = 0: must be > 0");
  EXPECT_EQ(error(8, "    latency: 1 us"),
            "c.yaml:8: cluster.network.latency: unknown key; expected one of bandwidth_Bps, latency_s, nics, "
            "attach_bandwidth_Bps");
  EXPECT_EQ(error(6, "  net:"), "c.yaml:6: cluster.net: unknown key; expected one of node, nodes, network");
  EXPECT_EQ(error(2, "devices: []"),
            "c.yaml:2: devices: not allowed beside `cluster` (a cluster's devices come from its node)");
  // The node file's own errors keep its line, after the cluster's.
  std::ofstream(dir_ / "toy.yaml") << with_line(7, "    memory_bytes: -4");
  EXPECT_EQ(error(0, ""), "c.yaml:4: cluster.node = toy.yaml: toy.yaml:7: devices[0].memory_bytes = -4: must be > 0");
  // Clusters do not nest.
  std::ofstream(dir_ / "toy.yaml") << text();
  EXPECT_EQ(error(0, ""),
            "c.yaml:4: cluster.node = toy.yaml: toy.yaml:4: cluster: a cluster's node must be a single-node "
            "machine, not a cluster");
  std::ofstream(dir_ / "c.yaml") << text(4, "  node: c.yaml");
  EXPECT_EQ(error(4, "  node: c.yaml"),
            "c.yaml:4: cluster: a cluster's node must be a single-node machine, not a cluster");
}

}  // namespace
}  // namespace placelab
