// `placelab calibrate` (cpu | cupti | trace) and `placelab verify`: measured costs into a
// calibrated machine file, and a simulated step checked against a real one.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "distributed.h"
#include "inputs.h"
#include "placelab/core/error.h"
#include "placelab/core/keys.h"
#include "placelab/core/numbers.h"
#include "placelab/core/units.h"
#include "placelab/hwmodels/calibration.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/learners/registry.h"
#include "placelab/profiler/activity.h"
#include "placelab/profiler/cpu_calibrator.h"
#include "placelab/profiler/cpu_executor.h"
#include "scenario.h"
#include "placelab/profiler/gpu_backend.h"
#include "placelab/profiler/trace_import.h"
#include "placelab/profiler/verify.h"
#include "placelab/sim/simulator.h"
#include "torch_backend.h"

namespace placelab::cli {
namespace {

namespace fs = std::filesystem;

struct CalibrateArgs {
  std::string backend = "cpu";
  std::string out;
  std::vector<std::string> graphs, models;
  std::string trace, machine;
  std::string step_marker = "ProfilerStep#";  // trace: the annotation text that marks a step
  std::string trace_steps;                    // trace: "FIRST:LAST", the steps calibrated on ("" = all)
  int64_t max_trace_mb = kMaxTraceBytes >> 20;  // trace: the largest (decompressed) trace read
  bool no_sweep = false;
  double sweep_scale = 1.0;
  int cores_per_device = 1;
  int max_devices = 0;
  std::string clock = "wall";
  int in_situ_steps = 6;
  bool in_situ_alone = false;
  bool json = false;  // trace: the import report as JSON instead of text
};

// Every --graph and --model, loaded once: their signatures are measured and, for the CPU
// backend, the graphs themselves run in situ.
std::vector<GraphSource> requested_graphs(const CalibrateArgs& a) {
  std::vector<GraphSource> out;
  for (const auto& g : a.graphs) out.push_back(load_graph_source(g, ""));
  for (const auto& m : a.models) out.push_back(load_graph_source("", m));
  return out;
}

// The distinct kernel signatures of `sources`, in order of first appearance.
std::vector<KernelSignature> requested_signatures(const std::vector<GraphSource>& sources) {
  std::vector<KernelSignature> out;
  for (const GraphSource& src : sources)
    for (const KernelSignature& sig : graph_signatures(src.graph))
      if (std::find(out.begin(), out.end(), sig) == out.end()) out.push_back(sig);
  return out;
}

void print_calibration(const Machine& m, const Calibration& c) {
  fmt::print("\n{:<8} {:>8} {:>10} {:>12} {:>12}  fits (class: rms relative error)\n", "device", "kernels", "TFLOP/s",
             "mem BW", "launch");
  for (const DeviceCalibration& d : c.devices) {
    auto id = m.find_device(d.device);
    std::string fits;
    for (const auto& [cls, fit] : d.fits)
      fits += fmt::format("{}{}: {:.0f} %", fits.empty() ? "" : ", ", kernel_class_name(cls), 100 * fit.rms_relative_error);
    fmt::print("{:<8} {:>8} {:>10.3f} {:>12} {:>12}  {}\n", d.device, d.kernel_times_s.size(),
               id ? m.devices[*id].peak_flops_per_s / 1e12 : 0.0, id ? format_rate(m.devices[*id].memory_bandwidth_Bps) : "",
               id ? format_seconds(m.devices[*id].launch_overhead_s) : "", fits);
  }
  for (const CopyCalibration& cc : c.copies)
    fmt::print("copy {} -> {}: {} + bytes / {}\n", cc.src, cc.dst, format_seconds(cc.fit.latency_s),
               format_rate(cc.fit.bandwidth_Bps));
}

// The trace import report as JSON: totals, steps, and per op type what was used and what was
// dropped, with the reason and kernel seconds per step.
nlohmann::json trace_report_json(const ImportReport& r, const std::string& out) {
  nlohmann::json usage = nlohmann::json::array();
  for (const TraceOpUsage& u : r.usage) {
    nlohmann::json row = {{"op", u.op},
                          {"phase", phase_name(u.phase)},
                          {"used", !u.dropped.has_value()},
                          {"instances", u.instances},
                          {"kernel_s_per_step", u.kernel_s_per_step}};
    if (!u.graph_type.empty()) row["graph_type"] = u.graph_type;
    if (!u.kernel_class.empty()) row["kernel_class"] = u.kernel_class;
    if (u.dropped) row["dropped"] = trace_drop_reason_text(*u.dropped);
    if (!u.detail.empty()) row["detail"] = u.detail;
    usage.push_back(std::move(row));
  }
  return {{"trace", r.origin},
          {"format", trace_format_name(r.format)},
          {"gpu", r.gpu_name},
          {"kernels", r.kernels},
          {"unattributed_kernels", r.unattributed_kernels},
          {"steps", r.steps},
          {"step_kernel_s", r.step_kernel_s},
          {"kernel_time_per_step_s", r.kernel_time_per_step_s},
          {"launch_gap_s", r.launch_gap_s},
          {"used_kernel_s_per_step", r.used_kernel_s_per_step},
          {"dropped_kernel_s_per_step", r.dropped_kernel_s_per_step},
          {"signatures", r.signatures},
          {"usage", std::move(usage)},
          {"written", out}};
}

// The leave-some-out check of the class fits (hold_out_check): how well a fit predicts kernel
// signatures it did not see — the error to expect for the ops of a graph that the calibration
// did not measure exactly.
void print_hold_out(const HoldOutReport& h) {
  if (h.classes.empty()) {
    fmt::print("\nheld-out check: no class has enough signatures (every third one is held out)\n");
    return;
  }
  fmt::print("\nheld-out check (every third signature by work predicted from a fit of the others):\n");
  fmt::print("{:<8} {:<24} {:>7} {:>9} {:>14} {:>11}\n", "device", "class", "fitted", "held out", "median |error|",
             "max |error|");
  for (const HoldOutClass& c : h.classes)
    fmt::print("{:<8} {:<24} {:>7} {:>9} {:>13.1f}% {:>10.1f}%\n", c.device, kernel_class_name(c.cls), c.fitted,
               c.held_out, 100 * c.median_abs_error, 100 * c.max_abs_error);
  fmt::print("median |error| over all {} held-out signatures: {:.1f}%\n", h.predictions.size(), 100 * h.median_abs_error);
}

nlohmann::json hold_out_json(const HoldOutReport& h) {
  nlohmann::json classes = nlohmann::json::array();
  for (const HoldOutClass& c : h.classes)
    classes.push_back({{"device", c.device},
                       {"class", kernel_class_name(c.cls)},
                       {"fitted", c.fitted},
                       {"held_out", c.held_out},
                       {"median_abs_error", c.median_abs_error},
                       {"max_abs_error", c.max_abs_error}});
  nlohmann::json predictions = nlohmann::json::array();
  for (const HoldOutPrediction& p : h.predictions)
    predictions.push_back({{"device", p.device},
                           {"signature", to_string(p.signature)},
                           {"measured_s", p.measured_s},
                           {"predicted_s", p.predicted_s}});
  return {{"median_abs_error", h.median_abs_error}, {"classes", std::move(classes)}, {"predictions", std::move(predictions)}};
}

// Where a calibration of this machine goes when --out is not given: the path the README and the
// scenarios use (hwmodels/calibrated/, created if missing). A trace describes another machine, so
// it has no default.
std::string default_out(const std::string& backend) {
  if ((backend == "cpu" || backend == "cupti") && under_mpi_launcher()) return "hwmodels/calibrated/cluster.yaml";
  if (backend == "cpu") return "hwmodels/calibrated/localhost.yaml";
  if (backend == "cupti") {
    std::array<char, 256> host{};
    if (gethostname(host.data(), host.size() - 1) != 0 || host[0] == '\0') return "hwmodels/calibrated/gpu-node.yaml";
    return "hwmodels/calibrated/" + std::string(host.data()) + ".yaml";
  }
  return {};
}

// Measures this machine with the cpu or cupti backend: its devices and their costs, with the
// progress on standard error and a one-line result on standard output.
CalibratedMachine calibrate_this_node(const CalibrateArgs& a) {
  if (a.backend == "cupti") {
#if PLACELAB_HAVE_CUDA
    GpuCalibrationOptions o;
    o.sweep = !a.no_sweep;
    o.sweep_scale = a.sweep_scale;
    o.signatures = requested_signatures(requested_graphs(a));
    CalibrationResult r = calibrate_gpu(o);
    fmt::print("calibrated {} device(s) in {:.1f} s\n", r.machine.num_devices(), r.elapsed_s);
    return {std::move(r.machine), std::move(r.calibration)};
#else
    throw InputError("--backend cupti: this placelab was built without CUDA (configure with the CUDA toolkit present)");
#endif
  }
  CpuCalibrationOptions o;
  o.cores_per_device = a.cores_per_device;
  o.max_devices = a.max_devices;
  o.sweep = !a.no_sweep;
  o.sweep_scale = a.sweep_scale;
  const std::vector<GraphSource> sources = requested_graphs(a);
  o.signatures = requested_signatures(sources);
  if (a.clock == "thread") o.timing.clock = TimingClock::kThreadCpu;
  else if (a.clock != "wall") throw InputError("--clock " + a.clock + ": must be wall or thread");
  const bool tty = isatty(fileno(stderr)) != 0;
  std::string last_stage;
  const ActivityMeter meter;
  CalibrationResult r = calibrate_cpu(o, [&](const CalibrationProgress& p) {
    if (tty)
      fmt::print(stderr, "\r{:<9} {:>5}/{:<5} {:<70.70}", p.stage, p.done, p.total, p.item);
    else if (p.stage != last_stage || p.done == p.total)
      fmt::print(stderr, "{:<9} {:>5}/{:<5}\n", p.stage, p.done, p.total);
    last_stage = p.stage;
  });
  if (tty) fmt::print(stderr, "\n");
  if (a.in_situ_steps >= 2) {
    for (const GraphSource& src : sources) {
      fmt::print(stderr, "in situ   {} on each device, {} steps\n", src.label, a.in_situ_steps);
      InSituReport rep = calibrate_in_situ(src.graph, r, {.steps = a.in_situ_steps, .co_run = !a.in_situ_alone, .fit = o.fit});
      fmt::print("in situ: {} signature times of {} measured inside executor steps\n", rep.signatures, src.label);
    }
  }
  for (DeviceCalibration& dc : r.calibration.devices)  // last, so it dates from the calibration's end
    if (!dc.cores.empty()) dc.probe_s = time_drift_probe(dc.cores);
  fmt::print("calibrated {} CPU device(s) of this machine in {:.1f} s{}\n", r.machine.num_devices(), r.elapsed_s,
             r.pinned ? "" : " (WARNING: some threads could not be pinned to their cores)");
  // The calibration is written either way (it took minutes); a busy machine is said, loudly.
  if (const MachineActivity act = meter.stop(); !act.reliable())
    fmt::print(stderr, "WARNING: {}: these kernel times measure the neighbours too; calibrate again on a quiet machine\n",
               act.describe());
  return {std::move(r.machine), std::move(r.calibration)};
}

void run_calibrate(CalibrateArgs a) {
  if (a.out.empty()) a.out = default_out(a.backend);
  if (a.out.empty()) throw InputError("--out: required (the calibrated machine file to write)");
  if (const fs::path dir = fs::path(a.out).parent_path(); !dir.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw InputError("--out " + a.out + ": cannot create " + dir.string() + ": " + ec.message());
  }
  if (a.backend == "cpu" || a.backend == "cupti") {
    if (a.backend == "cpu" && a.in_situ_steps != 0) check_measured_steps(a.in_situ_steps, "--in-situ-steps");  // 0: off
    if (under_mpi_launcher() && mpi_world().size > 1) {
      // One rank per node: each measures its own, rank 0 adds the network and writes the file.
      const std::optional<CalibratedMachine> cluster = calibrate_cluster([&] { return calibrate_this_node(a); }, a.out);
      if (!cluster) return;
      print_calibration(cluster->machine, cluster->calibration);
      fmt::print("\nwritten: {} — use it as --machine {}; `placelab machines {}` shows its nodes\n", a.out, a.out, a.out);
      return;
    }
    const CalibratedMachine r = calibrate_this_node(a);
    write_calibrated_machine(a.out, r.machine, r.calibration);
    print_calibration(r.machine, r.calibration);
    fmt::print("\nwritten: {} — use it as --machine {}\n", a.out, a.out);
    return;
  }
  if (a.backend == "trace") {
    if (a.trace.empty()) throw InputError("--trace: required with --backend trace (a Kineto or TensorFlow trace JSON)");
    if (a.machine.empty())
      throw InputError("--machine: the trace backend needs the machine the trace was taken on (a preset or YAML), "
                       "whose device names the calibration uses (gpu:0, cpu:0)");
    auto ms = load_machine_source(a.machine);
    GraphSource g;
    TraceImportOptions o;
    if (a.graphs.size() + a.models.size() > 1) throw InputError("--backend trace takes at most one --graph or --model");
    if (!a.graphs.empty() || !a.models.empty()) {
      g = load_graph_source(a.graphs.empty() ? "" : a.graphs[0], a.models.empty() ? "" : a.models[0]);
      o.graph = &g.graph;
    }
    o.step_marker = a.step_marker;
    if (!a.trace_steps.empty()) {
      const auto colon = a.trace_steps.find(':');
      const auto first = parse_number<int>(a.trace_steps.substr(0, colon));
      const auto last = colon == std::string::npos ? first : parse_number<int>(a.trace_steps.substr(colon + 1));
      if (!first || !last || *first < 0 || *last < *first)
        throw InputError("--trace-steps " + a.trace_steps + ": must be FIRST:LAST, 0-based step indices, FIRST <= LAST");
      o.first_step = *first;
      o.last_step = *last;
    }
    if (a.max_trace_mb < 1 || a.max_trace_mb > (int64_t{1} << 20))
      throw InputError("--max-trace-mb " + std::to_string(a.max_trace_mb) + ": must be between 1 and 1048576");
    o.max_bytes = a.max_trace_mb << 20;
    TraceImport t = import_trace(a.trace, o);
    for (const DeviceCalibration& d : t.calibration.devices)
      if (!ms->machine.find_device(d.device))
        throw InputError("--machine " + a.machine + ": has no device " + d.device + " that the trace uses");
    for (const CopyCalibration& c : t.calibration.copies)
      if (!ms->machine.find_device(c.src) || !ms->machine.find_device(c.dst))
        throw InputError("--machine " + a.machine + ": has no device pair " + c.src + " -> " + c.dst + " that the trace uses");
    // The trace measured how long its GPU sat idle per op: that, not the preset's guess, is the
    // launch overhead of the machine the calibration describes — of the measured GPU and of every
    // GPU identical to it that the trace did not measure (docs/calibration.md, "Identical devices").
    Machine machine = ms->machine;
    for (const auto& [device, gap] : t.report.launch_gap_s)
      if (auto id = ms->machine.find_device(device))
        for (std::size_t d = 0; d < machine.num_devices(); ++d)
          if (d == *id || (identical_devices(ms->machine.devices[d], ms->machine.devices[*id]) &&
                           !t.report.launch_gap_s.count(machine.devices[d].name)))
            machine.devices[d].launch_overhead_s = gap;
    write_calibrated_machine(a.out, machine, t.calibration);
    const HoldOutReport held = hold_out_check(t.calibration);
    if (a.json) {
      nlohmann::json j = trace_report_json(t.report, a.out);
      j["hold_out"] = hold_out_json(held);
      fmt::print("{}\n", j.dump(2));
      return;
    }
    fmt::print("{}\nkernel time per step by op type (what fed the calibration, what did not and why):\n{}",
               t.report.brief(), t.report.usage_table());
    print_calibration(machine, t.calibration);
    print_hold_out(held);
    fmt::print("\nwritten: {}\n", a.out);
    return;
  }
  throw InputError("--backend " + a.backend + ": must be cpu, cupti or trace");
}

struct VerifyArgs {
  std::string graph, model, machine, backend = "cpu";
  std::string torch_model, torch_args;  // --backend torch: the model placelab.torch builds, and its flags
  std::string cpu_machine;              // --backend torch without the GPUs: the machine whose CPU predicts the one-device step
  bool allow_unreliable = false;        // report the figures of a measurement on a busy machine
  std::vector<std::string> placements;  // empty: single_cpu
  int steps = 11;
  int rounds = 1;
  bool json = false;
  bool by_type = false;
  bool in_situ = false;
};

// Predicted vs measured kernel time per op type in the last measured step: where a cost model
// is wrong, op by op, rather than only in the step total.
struct TypeTally {
  int64_t ops = 0;
  double predicted_s = 0, measured_s = 0;
};
// The cross-device copies are one more row, "(cross-device copies)": the simulator's transfer time
// (the links' busy time; a device without a copy engine runs the same durations on its slots)
// against the executor's measured memcpy time (mean per step).
std::map<std::string, TypeTally> tally_by_type(const OpGraph& g, const Simulator& sim, std::span<const DeviceId> p,
                                               const SimResult& predicted, const ExecutionResult& measured) {
  std::map<std::string, TypeTally> out;
  if (measured.op_end_s.size() != g.num_ops()) return out;
  for (OpId v = 0; v < g.num_ops(); ++v) {
    TypeTally& t = out[g.op(v).type];
    ++t.ops;
    t.predicted_s += sim.op_time_s(v, sim.effective_device(v, p[v]));
    t.measured_s += measured.op_end_s[v] - measured.op_start_s[v];
  }
  TypeTally copies{.ops = static_cast<int64_t>(predicted.transfers)};
  for (const LinkStats& l : predicted.links) copies.predicted_s += l.busy_s;
  for (double c : measured.device_copy_s) copies.measured_s += c;
  if (copies.ops > 0) out["(cross-device copies)"] = copies;
  return out;
}

// How much the machine's speed moved since calibration: the drift probe on each device, timed
// before and after the measurement, against its time at calibration. Diagnostic only.
struct ProbeDrift {
  const DeviceCalibration* device = nullptr;  // with probe_s > 0 and its cores
  double before_s = 0, after_s = 0;
  double now_s() const { return 0.5 * (before_s + after_s); }
  double slowdown() const { return now_s() / device->probe_s; }
};

// Times the probe on every device whose calibration has one (before the runs).
std::vector<ProbeDrift> probe_devices(const Calibration& cal) {
  std::vector<ProbeDrift> out;
  for (const DeviceCalibration& dc : cal.devices)
    if (dc.probe_s > 0 && !dc.cores.empty()) out.push_back({&dc, time_drift_probe(dc.cores)});
  return out;
}

void print_drift(const std::vector<ProbeDrift>& drift) {
  if (drift.empty()) return;
  fmt::print("\nmachine speed vs calibration (GEMM 256^3 probe before and after the runs):");
  for (const ProbeDrift& d : drift)
    fmt::print("  {} {:.2f}x {}", d.device->device, d.slowdown() >= 1 ? d.slowdown() : 1 / d.slowdown(),
               d.slowdown() >= 1 ? "slower" : "faster");
  fmt::print("\n");
}

nlohmann::json drift_json(const std::vector<ProbeDrift>& drift) {
  nlohmann::json j = nlohmann::json::array();
  for (const ProbeDrift& d : drift)
    j.push_back({{"device", d.device->device}, {"probe_calibrated_s", d.device->probe_s}, {"probe_now_s", d.now_s()},
                 {"slowdown", d.slowdown()}});
  return j;
}

nlohmann::json report_json(const VerifyReport& r, const std::string& placement) {
  nlohmann::json j = {{"placement", placement}, {"predicted_s", r.predicted_s}, {"measured_s", r.measured_s},
                      {"error", r.error},         {"oom", r.oom},                 {"measured_steps_s", r.measured_steps_s}};
  for (const VerifyDevice& d : r.devices)
    j["devices"].push_back({{"name", d.device}, {"predicted_busy_s", d.predicted_busy_s}, {"measured_busy_s", d.measured_busy_s}});
  return j;
}

// Several placements: measured in interleaved rounds, a table and the summary the learners care
// about (median and worst |error|, Spearman rank correlation).
// `file_reports` (with --in-situ): the same measurements against the prediction from the machine
// file's own kernel times, summarised beside the in-situ one.
void print_verify_table(const VerifyArgs& a, const std::vector<VerifyReport>& reports, const nlohmann::json& header,
                        const std::vector<ProbeDrift>& drift, const std::vector<VerifyReport>& file_reports) {
  const VerifySummary sum = summarize(reports);
  const VerifySummary file_sum = summarize(file_reports);
  const auto summary_json = [](const VerifySummary& s) {
    return nlohmann::json{{"placements", s.placements},
                          {"median_abs_error", s.median_abs_error},
                          {"worst_abs_error", s.worst_abs_error},
                          {"spearman", s.spearman}};
  };
  if (a.json) {
    nlohmann::json j = header;
    for (std::size_t i = 0; i < reports.size(); ++i) {
      j["placements"].push_back(report_json(reports[i], a.placements[i]));
      if (i < file_reports.size()) j["placements"].back()["predicted_with_file_s"] = file_reports[i].predicted_s;
    }
    j["summary"] = summary_json(sum);
    if (!file_reports.empty()) j["summary_with_file"] = summary_json(file_sum);
    if (!drift.empty()) j["drift"] = drift_json(drift);
    std::cout << j.dump(2) << "\n";
    return;
  }
  fmt::print("{:<36} {:>12} {:>12} {:>8}\n", "placement", "predicted", "measured", "error");
  for (std::size_t i = 0; i < reports.size(); ++i) {
    const VerifyReport& r = reports[i];
    if (r.oom) {
      fmt::print("{:<36} {:>12} {:>12} {:>8}\n", a.placements[i], format_seconds(r.predicted_s), "OOM", "");
      continue;
    }
    fmt::print("{:<36} {:>12} {:>12} {:>+7.1f}%\n", a.placements[i], format_seconds(r.predicted_s),
               format_seconds(r.measured_s), 100 * r.error);
  }
  fmt::print("\n{} placements measured (median over {} interleaved round(s) of {} steps after the first): median "
             "|error| {:.1f} %, worst {:.1f} %, Spearman {:.3f}\n",
             sum.placements, a.rounds, a.steps - 1, 100 * sum.median_abs_error, 100 * sum.worst_abs_error, sum.spearman);
  if (!file_reports.empty())
    fmt::print("with the machine file's kernel times instead of the in-situ ones: median |error| {:.1f} %, worst {:.1f} %, "
               "Spearman {:.3f}\n",
               100 * file_sum.median_abs_error, 100 * file_sum.worst_abs_error, file_sum.spearman);
  print_drift(drift);
}

// --backend torch: the placement as PyTorch runs it (placelab.torch.place), through `python3 -m
// placelab.torch measure`. Where this host has the placement's GPUs, the measured step against the
// prediction. Where it lacks them, each missing device runs on the CPU: then the check is numerical
// (the placed step's loss and gradients against the unplaced model's) and the timing is the
// one-device step — the whole model on the CPU against the simulator's prediction on the CPU of
// --cpu-machine (default --machine): `python3 -m placelab.torch profile` writes one from a profile
// of this model, with the graph's measured op times (docs/pytorch.md).
void run_verify_torch(const VerifyArgs& a) {
  if (a.graph.empty()) throw InputError("--backend torch: needs --graph, the graph placelab.torch.capture wrote");
  if (a.placements.size() != 1) throw InputError("--backend torch: measures one placement (--placement)");
  if (a.in_situ || a.rounds != 1 || a.by_type) throw InputError("--backend torch: --in-situ, --rounds and --by-type are cpu's");
  GraphSource g = load_graph_source(a.graph, a.model);
  auto ms = load_machine_source(a.machine);
  const Placement p = resolve_placement(a.placements[0], g, *ms);
  TorchModelSpec spec{.model = a.torch_model, .args = split_words(a.torch_args), .steps = a.steps};
  const TorchRunner runner(g.graph, ms->machine, spec);
  Simulator sim(g.graph, *ms->cost);
  const TorchRun placed = runner.run(p, /*check=*/true);
  const double numerics = std::max(placed.loss_rel_error.value_or(0), placed.max_grad_rel_error.value_or(0));
  const bool same = numerics <= kTorchNumericsTolerance;
  nlohmann::json j = {{"graph", g.label}, {"machine", ms->machine.name}, {"cost_model", ms->cost->describe()},
                      {"placement", a.placements[0]}, {"torch_devices", placed.devices}, {"mapped", placed.mapped},
                      {"moves", placed.moves}, {"loss_rel_error", placed.loss_rel_error.value_or(0)},
                      {"max_grad_rel_error", placed.max_grad_rel_error.value_or(0)},
                      {"worst_parameter", placed.worst_parameter}, {"numerics_equal", same}};
  // What is timed: the placement itself where it ran on its devices, else the one-device step.
  const bool mapped = !placed.mapped.empty();
  if (!a.cpu_machine.empty() && !mapped)
    throw InputError("--cpu-machine: only where this host lacks the placement's GPUs (the placement itself ran here)");
  std::unique_ptr<MachineSource> cpu_ms = a.cpu_machine.empty() ? nullptr : load_machine_source(a.cpu_machine);
  const MachineSource& one = cpu_ms ? *cpu_ms : *ms;
  std::optional<DeviceId> cpu = one.machine.default_cpu();
  if (mapped && !cpu) throw InputError("--backend torch: " + one.machine.name + " has no CPU to predict the one-device step on");
  const TorchRun timed = mapped ? runner.run_all_on("cpu") : placed;
  const SimResult predicted = mapped ? Simulator(g.graph, *one.cost).simulate(Placement(g.graph.num_ops(), *cpu))
                                     : sim.simulate(p);
  if (mapped) j["cpu_machine"] = one.machine.name;
  const double error = (predicted.step_time_s - timed.median_s) / timed.median_s;
  j["timed"] = mapped ? "one-device step on the CPU (this host lacks the placement's devices)" : "the placement";
  j["predicted_s"] = predicted.step_time_s;
  j["measured_s"] = timed.median_s;
  j["steps_s"] = timed.steps_s;
  j["error"] = error;
  if (a.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    fmt::print("graph      {} ({} ops)\nmachine    {} [{}]\nplacement  {}\n\n", g.label, g.graph.num_ops(),
               ms->machine.name, ms->cost->describe(), a.placements[0]);
    fmt::print("ran on     {}{}; {} value(s) moved between devices per forward\n", join_names(placed.devices),
               mapped ? " (this host lacks the placement's GPUs: each ran on the CPU)" : "", placed.moves);
    fmt::print("numerics   loss rel. error {:.1e}, largest gradient rel. error {:.1e} ({}): {}\n",
               placed.loss_rel_error.value_or(0), placed.max_grad_rel_error.value_or(0), placed.worst_parameter,
               same ? "the same training step as the unplaced model" : "NOT the unplaced model's step");
    fmt::print("\n{}\npredicted  {}\nmeasured   {}  (median of {} steps after the first)\nerror      {:+.1f} %\n",
               mapped ? fmt::format("the one-device step (the whole model on the CPU; predicted on {}'s {} [{}]):",
                                    one.machine.name, one.machine.devices[*cpu].name, one.cost->describe())
                      : std::string("the placement's step:"),
               format_seconds(predicted.step_time_s), format_seconds(timed.median_s), timed.steps_s.size(), 100 * error);
  }
  if (!same) throw QuietExit{3};
}

// A verify run's arguments, checked before anything is loaded: each placement once (a baseline
// in its canonical form, random:03 is random:3; a file by its path: measuring one twice doubled
// the time and counted it twice in the rank correlation), steps and rounds in range.
void check_verify_args(VerifyArgs& a) {
  if (a.placements.empty()) a.placements.push_back("single_cpu");
  std::vector<std::string> seen;
  for (const std::string& spec : a.placements) {
    const std::string key =
        find_baseline(std::string_view(spec).substr(0, spec.find(':'))) ? canonical_baseline(spec, "--placement") : spec;
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      throw InputError("--placement " + excerpt(spec) + ": listed twice");
    seen.push_back(key);
  }
  check_measured_steps(a.steps, "--steps");
  if (a.rounds < 1 || a.rounds > kMaxVerifyRounds)
    throw InputError("--rounds " + std::to_string(a.rounds) + ": must be in [1, " + std::to_string(kMaxVerifyRounds) + "]");
}

// What the backend measured, and what it saw around the measurement.
struct VerifyMeasurement {
  std::vector<ExecutionResult> measured;  // per placement
  std::vector<ProbeDrift> drift;
  std::optional<MachineActivity> activity;  // the CPU backend's: what else ran while it measured
  // --in-situ: the calibration with this graph's kernels re-timed inside steps, interleaved with
  // the placements' rounds; the prediction uses it instead of the file's.
  std::optional<Calibration> in_situ;
  std::unique_ptr<CalibratedCostModel> in_situ_cost;
};

// The placements run on this machine's cores, interleaved over the rounds; refuses (exit 3) a
// measurement among busy neighbours unless --allow-unreliable.
VerifyMeasurement measure_on_cpu(const VerifyArgs& a, const GraphSource& g, const MachineSource& ms,
                                 const std::vector<Placement>& ps) {
  VerifyMeasurement v;
  CpuExecutorOptions eo;
  eo.steps = a.steps;
  if (ms.calibration) eo.device_cores = device_cores(CalibratedMachine{ms.machine, *ms.calibration});
  if (a.in_situ && (!ms.calibration || eo.device_cores.empty()))
    throw InputError("--in-situ: " + a.machine +
                     " has no device cores; give a machine file written by `placelab calibrate --backend cpu`");
  CpuExecutor exec(g.graph, ms.machine, eo);
  if (ms.calibration) v.drift = probe_devices(*ms.calibration);
  const bool progress = isatty(fileno(stderr)) != 0 && (ps.size() * static_cast<std::size_t>(a.rounds) > 1 || a.in_situ);
  const ActivityMeter meter;
  const auto after_run = [&](int round, std::size_t i) {
    if (progress)
      fmt::print(stderr, "\rround {:>3}/{:<3} placement {:>3}/{:<3} {:<40.40}", round + 1, a.rounds, i + 1, ps.size(),
                 a.placements[i]);
  };
  if (a.in_situ) {
    InSituMeasurement m = measure_interleaved_in_situ(g.graph, ms.machine, exec, *ms.calibration, ps, a.rounds,
                                                      after_run, [&](int round) {
                                                        if (progress)
                                                          fmt::print(stderr, "\rround {:>3}/{:<3} in-situ kernel times{:<40}",
                                                                     round + 1, a.rounds, "");
                                                      });
    v.measured = std::move(m.measured);
    v.in_situ = std::move(m.calibration);
    v.in_situ_cost = std::make_unique<CalibratedCostModel>(ms.machine, *v.in_situ);
  } else {
    v.measured = measure_interleaved(exec, ps, a.rounds, after_run);
  }
  if (progress) fmt::print(stderr, "\r{:<80}\r", "");
  for (ProbeDrift& d : v.drift) d.after_s = time_drift_probe(d.device->cores);
  v.activity = meter.stop();
  // A fidelity figure measured among busy neighbours measures them: refused unless asked for.
  if (!v.activity->reliable() && !a.allow_unreliable) {
    fmt::print(stderr,
               "placelab: the measurement is not to be trusted: {}; re-run on a quiet machine, or pass "
               "--allow-unreliable to report it anyway\n",
               v.activity->describe());
    throw QuietExit{3};
  }
  return v;
}

VerifyMeasurement measure_for_verify(const VerifyArgs& a, const GraphSource& g, const MachineSource& ms,
                                     const std::vector<Placement>& ps) {
  if (a.backend == "cpu") return measure_on_cpu(a, g, ms, ps);
  if (a.backend == "cuda") {
#if PLACELAB_HAVE_CUDA
    if (a.in_situ) throw InputError("--in-situ: only with --backend cpu");
    if (a.rounds != 1 || ps.size() != 1) throw InputError("--backend cuda: measures one placement, one round");
    VerifyMeasurement v;
    v.measured.push_back(run_on_gpu(g.graph, ms.machine, ps[0], {.steps = a.steps}));
    return v;
#else
    throw InputError("--backend cuda: this placelab was built without CUDA");
#endif
  }
  throw InputError("--backend " + a.backend + ": must be cpu, cuda or torch");
}

// One placement's last step by op type, largest gap between prediction and measurement first.
void print_verify_by_type(const OpGraph& graph, const Simulator& sim, const Placement& p, const SimResult& predicted,
                          const ExecutionResult& measured) {
  auto types = tally_by_type(graph, sim, p, predicted, measured);
  std::vector<std::pair<std::string, TypeTally>> rows(types.begin(), types.end());
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
    return std::abs(x.second.measured_s - x.second.predicted_s) > std::abs(y.second.measured_s - y.second.predicted_s);
  });
  fmt::print("\nlast step by op type, largest gap first:\n{:<28} {:>6} {:>12} {:>12} {:>8}\n", "op type", "ops", "predicted",
             "measured", "error");
  for (const auto& [type, t] : rows)
    fmt::print("{:<28} {:>6} {:>12} {:>12} {:>+7.1f}%\n", type, t.ops, format_seconds(t.predicted_s),
               format_seconds(t.measured_s), t.measured_s > 0 ? 100 * (t.predicted_s - t.measured_s) / t.measured_s : 0.0);
}

void run_verify(VerifyArgs a) {
  if (a.backend == "torch") return run_verify_torch(a);
  check_verify_args(a);
  GraphSource g = load_graph_source(a.graph, a.model);
  auto ms = load_machine_source(a.machine);
  std::vector<Placement> ps;
  for (const std::string& spec : a.placements) ps.push_back(resolve_placement(spec, g, *ms));
  const VerifyMeasurement v = measure_for_verify(a, g, *ms, ps);
  const std::vector<ExecutionResult>& measured = v.measured;
  const std::vector<ProbeDrift>& drift = v.drift;
  const CostModel& cost = v.in_situ_cost ? *v.in_situ_cost : *ms->cost;
  Simulator sim(g.graph, cost);
  std::vector<SimResult> predicted;
  std::vector<VerifyReport> reports;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    predicted.push_back(sim.simulate(ps[i]));
    reports.push_back(compare_step(predicted.back(), measured[i], ms->machine));
  }
  std::vector<VerifyReport> file_reports;
  if (v.in_situ) {
    Simulator file_sim(g.graph, *ms->cost);
    for (std::size_t i = 0; i < ps.size(); ++i)
      file_reports.push_back(compare_step(file_sim.simulate(ps[i]), measured[i], ms->machine));
  }
  const std::string cost_text = cost.describe() + (v.in_situ ? "; this graph's kernels re-timed in situ, interleaved with the rounds" : "");
  nlohmann::json header = {
      {"graph", g.label}, {"machine", ms->machine.name}, {"cost_model", cost_text}, {"in_situ", v.in_situ.has_value()}};
  if (v.activity && v.activity->known) {
    header["machine_activity"] = {{"others", v.activity->others}, {"steal", v.activity->steal}, {"cpus", v.activity->cpus},
                                  {"reliable", v.activity->reliable()}};
    if (!v.activity->reliable() && !a.json) fmt::print("UNRELIABLE (--allow-unreliable): {}\n\n", v.activity->describe());
  }
  if (ps.size() > 1) {
    if (!a.json)
      fmt::print("graph      {} ({} ops)\nmachine    {} [{}]\n\n", g.label, g.graph.num_ops(), ms->machine.name,
                 cost_text);
    print_verify_table(a, reports, header, drift, file_reports);
    return;
  }
  const VerifyReport& r = reports[0];
  const Placement& p = ps[0];
  if (a.json) {
    nlohmann::json j = header;
    j.update(report_json(r, a.placements[0]));
    if (!file_reports.empty()) j["predicted_with_file_s"] = file_reports[0].predicted_s;
    if (!drift.empty()) j["drift"] = drift_json(drift);
    if (a.by_type)
      for (const auto& [type, t] : tally_by_type(g.graph, sim, p, predicted[0], measured[0]))
        j["by_type"][type] = {{"ops", t.ops}, {"predicted_s", t.predicted_s}, {"measured_s", t.measured_s}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  fmt::print("graph      {} ({} ops)\nmachine    {} [{}]\nplacement  {}\n\n", g.label, g.graph.num_ops(), ms->machine.name,
             cost_text, a.placements[0]);
  if (r.oom) {
    fmt::print("the placement does not fit in memory: nothing was measured\n");
    return;
  }
  const std::string mean = fmt::format("mean of {} steps after the first", a.steps - 1);
  fmt::print("predicted  {}\nmeasured   {}  ({})\nerror      {:+.1f} %\n", format_seconds(r.predicted_s),
             format_seconds(r.measured_s), a.rounds > 1 ? fmt::format("median over {} rounds of the {}", a.rounds, mean) : mean,
             100 * r.error);
  if (!file_reports.empty())
    fmt::print("with the machine file's kernel times: predicted {}, error {:+.1f} %\n", format_seconds(file_reports[0].predicted_s),
               100 * file_reports[0].error);
  fmt::print("\n");
  fmt::print("{:<10} {:>14} {:>14}\n", "device", "predicted busy", "measured busy");
  for (const VerifyDevice& d : r.devices)
    fmt::print("{:<10} {:>14} {:>14}\n", d.device, format_seconds(d.predicted_busy_s), format_seconds(d.measured_busy_s));
  print_drift(drift);
  if (a.by_type) print_verify_by_type(g.graph, sim, p, predicted[0], measured[0]);
}

}  // namespace

void add_calibrate_commands(CLI::App& app) {
  auto ca = std::make_shared<CalibrateArgs>();
  auto* cal = app.add_subcommand("calibrate", "Measure real kernel and copy costs; write a calibrated machine file");
  cal->add_option("--backend", ca->backend, "cpu (this machine's cores), cupti (every visible GPU) or trace")
      ->capture_default_str();
  cal->add_option("--out,-o", ca->out,
                  "Calibrated machine file to write (default: cpu hwmodels/calibrated/localhost.yaml, cupti "
                  "hwmodels/calibrated/<hostname>.yaml; trace: required)");
  cal->add_option("--graph", ca->graphs, "Also measure exactly this graph's kernel signatures (repeatable)");
  cal->add_option("--model", ca->models, "Also measure exactly this zoo model's kernel signatures (repeatable)");
  cal->add_option("--in-situ-steps", ca->in_situ_steps,
                  "cpu: with --graph/--model, also run each graph on the executor (all ops on one device, each "
                  "device in turn) for this many steps (2 to 10,000) and time its signatures inside real steps; 0 = off")
      ->capture_default_str();
  cal->add_flag("--in-situ-alone", ca->in_situ_alone,
               "cpu: time the in-situ runs one device at a time (default: every device runs its copy at "
               "once, so kernel times include the contention of a step that keeps all devices busy)");
  cal->add_flag("--no-sweep", ca->no_sweep, "Measure only the --graph/--model signatures, not the built-in size sweep");
  cal->add_option("--sweep-scale", ca->sweep_scale, "Shrink the built-in sweep (0, 1] for a quick calibration")
      ->capture_default_str();
  cal->add_option("--cores-per-device", ca->cores_per_device, "cpu: cores per localhost device")->capture_default_str();
  cal->add_option("--devices", ca->max_devices, "cpu: at most this many devices (0 = all cores)");
  cal->add_option("--clock", ca->clock, "cpu: wall (default) or thread (CPU time; for busy machines)");
  cal->add_option("--trace", ca->trace, "trace: a Kineto (PyTorch profiler) or TensorFlow timeline JSON, may be .gz");
  cal->add_option("--machine", ca->machine, "trace: the machine the trace was taken on (preset or YAML)");
  cal->add_option("--step-marker", ca->step_marker,
                  "trace (Kineto): annotations whose name contains this text are steps (innermost of nested ones)")
      ->capture_default_str();
  cal->add_option("--trace-steps", ca->trace_steps,
                  "trace (Kineto): calibrate on steps FIRST:LAST only (0-based, inclusive), to check the others");
  cal->add_option("--max-trace-mb", ca->max_trace_mb,
                  "trace: the largest trace, in MiB after decompression, that is read (parsed JSON takes several times "
                  "its text)")
      ->capture_default_str();
  cal->add_flag("--json", ca->json,
                "trace: print the import report as JSON (per op type: used or dropped, why, kernel s per step)");
  cal->footer(
      "Examples:\n"
      "  placelab calibrate --backend cpu --out hwmodels/calibrated/localhost.yaml\n"
      "  placelab calibrate --backend cpu --model cifar10_cnn:batch=8 --out localhost.yaml\n"
      "  placelab calibrate --backend cupti --out hwmodels/calibrated/$(hostname).yaml   # on a GPU node\n"
      "  placelab calibrate --backend trace --trace run.pt.trace.json --machine dgx1 --out my-gpu.yaml\n"
      "  mpirun -n 4 --map-by ppr:1:node placelab calibrate --backend cupti --out cluster.yaml   # 4 nodes + network\n"
      "How to calibrate and what the numbers mean: docs/calibration.md");
  cal->callback([ca] { run_calibrate(*ca); });

  auto va = std::make_shared<VerifyArgs>();
  auto* ver = app.add_subcommand("verify", "Run a placement for real and compare it with the simulator's prediction");
  ver->add_option("--graph,-g", va->graph, "Graph JSON file");
  ver->add_option("--model", va->model, "Zoo model: name[:key=value,...]");
  ver->add_option("--machine,-m", va->machine, "A calibrated machine file (placelab calibrate)")->required();
  ver->add_option("--placement,-p", va->placements,
                  placement_rules_help() + " (default single_cpu; repeat to compare several placements)")
      ->take_all();
  ver->add_option("--steps", va->steps, "Steps to run per round; the first is warm-up and not counted")->capture_default_str();
  ver->add_option("--rounds", va->rounds,
                  "cpu: measure every placement this many times in interleaved rounds and take the median (a "
                  "slow spell of a shared machine then hits every placement alike)")
      ->capture_default_str();
  ver->add_option("--backend", va->backend,
                  "cpu (this machine's executor), cuda (a GPU node) or torch (the placed PyTorch model, "
                  "placelab.torch; needs --torch-model)")
      ->capture_default_str();
  ver->add_option("--torch-model", va->torch_model,
                  "torch: the model placelab.torch builds: torchvision:NAME or module:function (docs/pytorch.md)");
  ver->add_option("--cpu-machine", va->cpu_machine,
                  "torch, on a host without the placement's GPUs: the machine whose CPU predicts the one-device step "
                  "(python3 -m placelab.torch profile --machine-out writes one; default --machine)");
  ver->add_option("--torch-args", va->torch_args,
                  "torch: the model's flags as capture took them, in one string: \"--batch 8 --image 224\"");
  ver->add_flag("--in-situ", va->in_situ,
                "cpu: before each round, run the graph with all ops on each device (every device at once) and "
                "predict with these in-step kernel times instead of the file's, so the machine's drift since "
                "calibration does not count as model error (the step times of the placements are not used)");
  ver->add_flag("--json", va->json, "Print JSON: predicted_s, measured_s, error, per-device busy time");
  ver->add_flag("--allow-unreliable", va->allow_unreliable,
                "cpu: report the figures even when other processes or the hypervisor took more than a quarter of the "
                "CPUs' time while they were measured (refused otherwise, exit status 3)");
  ver->add_flag("--by-type", va->by_type, "Also compare predicted and measured kernel time per op type (last step)");
  ver->footer(
      "Examples:\n  placelab verify --model cifar10_cnn:batch=8 --machine hwmodels/calibrated/localhost.yaml \\\n"
      "                  --placement random:3 --steps 11\n"
      "  placelab verify --model cifar10_cnn:batch=8 --machine localhost.yaml --placement random:1 random:2 random:3 \\\n"
      "                  --steps 6 --rounds 5      # interleaved; prints median |error| and Spearman\n"
      "  placelab verify --backend torch --graph r50.json --machine dgx1 --placement modules.json \\\n"
      "                  --torch-model torchvision:resnet50 --torch-args \"--batch 8\"");
  ver->callback([va] { run_verify(*va); });
}

}  // namespace placelab::cli
