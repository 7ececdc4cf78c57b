// `placelab simulate`: one placement of one graph on one machine, simulated; a console report or
// JSON, and optionally the Chrome trace of the step.
#include <iostream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "cost_sources.h"
#include "inputs.h"
#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/core/units.h"
#include "placelab/hwmodels/calibration.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/learners/registry.h"
#include "placelab/sim/allocator.h"
#include "placelab/sim/bounds.h"
#include "placelab/sim/critical_path.h"
#include "placelab/sim/simulator.h"
#include "placelab/sim/trace.h"

namespace placelab::cli {
namespace {

struct SimulateArgs {
  std::string graph;
  std::string model;
  std::string machine = "k80x4";
  std::string placement = "single_gpu";
  std::string trace;
  bool json = false;
  bool fragmentation = false;
  bool cost_sources = false;
  bool critical_path = false;
  std::string execution;  // "" = the graph's own
};

// One GPU's BFC replay, for --fragmentation (CPU memory is not TensorFlow's BFC allocator).
struct BfcRow {
  DeviceId device;
  BfcOutcome outcome;
};

std::vector<BfcRow> replay_gpus(const SimResult& r, const Machine& m, const OpGraph& graph) {
  std::vector<BfcRow> rows;
  for (std::size_t d = 0; d < m.devices.size(); ++d)
    if (m.devices[d].kind == DeviceKind::kGpu && r.devices[d].num_ops > 0)
      rows.push_back({static_cast<DeviceId>(d), replay_bfc(graph, r, static_cast<DeviceId>(d), m.devices[d].memory_bytes)});
  return rows;
}

// What failed to allocate, in words.
std::string failed_buffer_name(const BfcOutcome& o, const OpGraph& graph) {
  if (o.failed_buffer == MemorySample::kPersistent) return "a variable or optimizer slot";
  if (o.failed_buffer < graph.num_ops()) return "the output of " + graph.op(o.failed_buffer).name;
  return "a tensor received from another device";
}

nlohmann::json result_json(const SimResult& r, const Machine& m, const GraphSource& g, const SimulateArgs& a,
                           const std::vector<BfcRow>& bfc, const CostSourceSummary* sources,
                           const Placement& placement, const StepLowerBound& bound) {
  nlohmann::json j;
  j["graph"] = g.label;
  j["ops"] = g.graph.num_ops();
  j["machine"] = m.name;
  j["placement"] = a.placement;
  j["execution"] = std::string(execution_name(g.graph.execution()));
  j["step_time_s"] = r.step_time_s;
  if (g.graph.execution() == Execution::kEager) j["host_busy_s"] = r.host_busy_s;
  j["oom"] = r.oom;
  if (r.oom) {
    j["oom_device"] = m.devices[r.oom_device].name;
    j["oom_excess_bytes"] = r.oom_excess_bytes;
  }
  j["transfers"] = r.transfers;
  for (std::size_t d = 0; d < m.devices.size(); ++d) {
    const DeviceStats& s = r.devices[d];
    j["devices"].push_back({{"name", m.devices[d].name},
                            {"ops", s.num_ops},
                            {"busy_s", s.busy_s},
                            {"utilization", r.step_time_s > 0 ? s.busy_s / r.step_time_s : 0.0},
                            {"peak_memory_bytes", s.peak_memory_bytes},
                            {"persistent_bytes", s.persistent_bytes},
                            {"capacity_bytes", m.devices[d].memory_bytes}});
  }
  j["links"] = nlohmann::json::array();
  for (std::size_t l = 0; l < r.links.size(); ++l)
    if (r.links[l].bytes > 0 || r.links[l].busy_s > 0)
      j["links"].push_back({{"name", m.link_direction_name(static_cast<LinkDirection>(l))},
                            {"bytes", r.links[l].bytes},
                            {"busy_s", r.links[l].busy_s}});
  if (a.fragmentation) {
    j["bfc"] = nlohmann::json::array();
    for (const BfcRow& row : bfc) {
      nlohmann::json b = {{"device", m.devices[row.device].name},
                          {"peak_bytes", row.outcome.peak_bytes},
                          {"liveness_peak_bytes", r.devices[row.device].peak_memory_bytes},
                          {"capacity_bytes", m.devices[row.device].memory_bytes},
                          {"fits", row.outcome.fits}};
      if (!row.outcome.fits) {
        b["failed_at_s"] = row.outcome.failed_at_s;
        b["failed_request"] = failed_buffer_name(row.outcome, g.graph);
        b["failed_request_bytes"] = row.outcome.failed_request_bytes;
        b["free_bytes"] = row.outcome.free_bytes;
        b["largest_free_chunk_bytes"] = row.outcome.largest_free_chunk;
      }
      j["bfc"].push_back(std::move(b));
    }
  }
  if (sources) j["cost_sources"] = cost_sources_json(*sources, g.graph, m, placement);
  j["lower_bound"] = {{"step_s", bound.step_s},
                      {"critical_path_s", bound.critical_path_s},
                      {"work_s", bound.work_s},
                      {"slots", bound.slots},
                      {"memory_feasible", bound.memory_feasible},
                      {"gap", r.oom ? nlohmann::json() : nlohmann::json(r.step_time_s / bound.step_s - 1)}};
  return j;
}

void print_report(const SimResult& r, const Machine& m, const GraphSource& g, const SimulateArgs& a,
                  const std::string& cost_description, const std::vector<BfcRow>& bfc, const StepLowerBound& bound) {
  fmt::print("graph      {}: {} ops, {} edges, {}, {} persistent\n", g.label, g.graph.num_ops(), g.graph.num_edges(),
             format_flops(g.graph.total_flops()), format_bytes(g.graph.total_persistent_bytes()));
  fmt::print("machine    {}: {} devices, {} links\n", m.name, m.num_devices(), m.links.size());
  fmt::print("cost model {}\n", cost_description);
  fmt::print("placement  {}\n", a.placement);
  if (g.graph.execution() == Execution::kEager)
    fmt::print("execution  eager, as PyTorch runs it: host threads busy {} (docs/simulator.md)\n",
               format_seconds(r.host_busy_s));
  fmt::print("step time  {}{}\n", format_seconds(r.step_time_s), r.oom ? "  (OUT OF MEMORY: see below)" : "");
  fmt::print("bound      {}{}: no placement is faster (critical path {}, work over {} full-speed slots {}){}\n\n",
             format_seconds(bound.step_s),
             r.oom ? "" : fmt::format(", this placement {:+.1f} %", 100 * (r.step_time_s / bound.step_s - 1)),
             format_seconds(bound.critical_path_s), bound.slots, format_seconds(bound.work_s),
             bound.memory_feasible ? "" : "; the variables alone exceed all devices' memory");
  fmt::print("{:<10} {:>6} {:>12} {:>6}  {:>11} / {:<11}\n", "device", "ops", "busy", "util", "peak memory",
             "capacity");
  for (std::size_t d = 0; d < m.devices.size(); ++d) {
    const DeviceStats& s = r.devices[d];
    double util = r.step_time_s > 0 ? 100 * s.busy_s / r.step_time_s : 0;
    fmt::print("{:<10} {:>6} {:>12} {:>5.1f}%  {:>11} / {:<11}{}\n", m.devices[d].name, s.num_ops,
               format_seconds(s.busy_s), util, format_bytes(s.peak_memory_bytes),
               format_bytes(m.devices[d].memory_bytes), s.peak_memory_bytes > m.devices[d].memory_bytes ? "  OOM" : "");
  }
  bool any_link = false;
  for (std::size_t l = 0; l < r.links.size(); ++l) {
    if (r.links[l].bytes == 0 && r.links[l].busy_s == 0) continue;
    if (!any_link) fmt::print("\n{:<36} {:>11} {:>12} {:>6}\n", "link", "bytes", "busy", "util");
    any_link = true;
    double util = r.step_time_s > 0 ? 100 * r.links[l].busy_s / r.step_time_s : 0;
    fmt::print("{:<36} {:>11} {:>12} {:>5.1f}%\n", m.link_direction_name(static_cast<LinkDirection>(l)),
               format_bytes(r.links[l].bytes), format_seconds(r.links[l].busy_s), util);
  }
  if (!any_link) fmt::print("\nno cross-device transfers\n");
  else fmt::print("{} transfers\n", r.transfers);
  if (r.oom)
    fmt::print("\nOOM: {} needs {} more than its {}\n", m.devices[r.oom_device].name, format_bytes(r.oom_excess_bytes),
               format_bytes(m.devices[r.oom_device].memory_bytes));
  if (!a.fragmentation) return;
  fmt::print("\nTensorFlow's BFC allocator replayed (one region of the capacity; docs/simulator.md):\n");
  fmt::print("{:<10} {:>13} {:>13} / {:<11}\n", "device", "live peak", "chunk peak", "capacity");
  for (const BfcRow& row : bfc) {
    const BfcOutcome& o = row.outcome;
    const int64_t capacity = m.devices[row.device].memory_bytes;
    fmt::print("{:<10} {:>13} {:>13} / {:<11}  {}\n", m.devices[row.device].name,
               format_bytes(r.devices[row.device].peak_memory_bytes), o.fits ? format_bytes(o.peak_bytes) : "-",
               format_bytes(capacity),
               o.fits ? fmt::format("fits, {} to spare", format_bytes(capacity - o.peak_bytes))
                      : fmt::format("OOM at {}: a request of {} for {}, {} free, largest free chunk {}",
                                    format_seconds(o.failed_at_s), format_bytes(o.failed_request_bytes),
                                    failed_buffer_name(o, g.graph), format_bytes(o.free_bytes),
                                    format_bytes(o.largest_free_chunk)));
  }
  if (bfc.empty()) fmt::print("(no GPU ran an op)\n");
}

const char* wait_name(CriticalLink::Wait w) {
  switch (w) {
    case CriticalLink::Wait::kStart: return "start";
    case CriticalLink::Wait::kInput: return "input";
    case CriticalLink::Wait::kDevice: return "device";
    case CriticalLink::Wait::kLink: return "link";
  }
  return "?";
}

nlohmann::json critical_path_json(const std::vector<CriticalLink>& path, const SimResult& r, const Machine& m,
                                  const OpGraph& graph) {
  nlohmann::json out = nlohmann::json::array();
  for (const CriticalLink& c : path) {
    const TimelineEvent& e = r.timeline[c.event];
    nlohmann::json j = {{"kind", e.kind == TimelineEvent::Kind::kOp ? "op" : "copy"},
                        {"op", graph.op(e.op).name},
                        {"device", m.devices[e.device].name},
                        {"start_s", e.start_s},
                        {"end_s", e.end_s},
                        {"wait", wait_name(c.wait)},
                        {"waited_s", c.waited_s}};
    if (e.kind == TimelineEvent::Kind::kTransfer) {
      j["from"] = m.devices[e.src_device].name;
      j["bytes"] = e.bytes;
    }
    out.push_back(std::move(j));
  }
  return out;
}

// The path as runs of consecutive ops on one device (a run ends at a copy or a change of device),
// with the time the step spent computing and copying along it and what the runs waited for.
void print_critical_path(const std::vector<CriticalLink>& path, const SimResult& r, const Machine& m,
                         const OpGraph& graph) {
  double compute = 0, copy = 0;
  for (const CriticalLink& c : path) {
    const TimelineEvent& e = r.timeline[c.event];
    (e.kind == TimelineEvent::Kind::kOp ? compute : copy) += e.end_s - e.start_s;
  }
  fmt::print("\ncritical path: {} events, {} computing and {} copying\n", path.size(), format_seconds(compute),
             format_seconds(copy));
  fmt::print("{:>12} {:>12}  {:<10} {:<44} {}\n", "start", "length", "device", "what", "first … last op");
  for (std::size_t i = 0; i < path.size();) {
    const TimelineEvent& e = r.timeline[path[i].event];
    if (e.kind == TimelineEvent::Kind::kTransfer) {
      const bool queued = path[i].wait == CriticalLink::Wait::kLink;
      fmt::print("{:>12} {:>12}  {:<10} {:<44} {}\n", format_seconds(e.start_s), format_seconds(e.end_s - e.start_s),
                 m.devices[e.device].name,
                 fmt::format("copy of {} from {}{}", format_bytes(e.bytes), m.devices[e.src_device].name,
                             queued ? fmt::format(", {} behind a copy", format_seconds(path[i].waited_s)) : ""),
                 graph.op(e.op).name);
      ++i;
      continue;
    }
    std::size_t j = i + 1, behind = 0;
    while (j < path.size() && r.timeline[path[j].event].kind == TimelineEvent::Kind::kOp &&
           r.timeline[path[j].event].device == e.device) {
      behind += path[j].wait == CriticalLink::Wait::kDevice;
      ++j;
    }
    const TimelineEvent& last = r.timeline[path[j - 1].event];
    const std::string what = fmt::format("{} op{}{}", j - i, j - i == 1 ? "" : "s",
                                         behind > 0 ? fmt::format(", {} behind the one before", behind) : "");
    fmt::print("{:>12} {:>12}  {:<10} {:<44} {}{}\n", format_seconds(e.start_s), format_seconds(last.end_s - e.start_s),
               m.devices[e.device].name, what, graph.op(e.op).name, j - i > 1 ? " … " + graph.op(last.op).name : "");
    i = j;
  }
}

void run_simulate(const SimulateArgs& a) {
  GraphSource g = load_graph_source(a.graph, a.model);
  if (!a.execution.empty()) g.graph.set_execution(*execution_from_name(a.execution));
  auto ms = load_machine_source(a.machine);
  const Machine& machine = ms->machine;
  Placement placement = resolve_placement(a.placement, g, *ms);
  Simulator sim(g.graph, *ms->cost);
  SimOptions opts;
  opts.record_timeline = !a.trace.empty() || a.fragmentation || a.critical_path;
  SimResult r = sim.simulate(placement, opts);
  const std::vector<BfcRow> bfc = a.fragmentation ? replay_gpus(r, machine, g.graph) : std::vector<BfcRow>{};
  if (!a.trace.empty()) {
    std::ostringstream trace;
    write_chrome_trace(r, g.graph, machine, trace);
    write_file_atomically(a.trace, trace.str());
  }
  const StepLowerBound bound = step_lower_bound(g.graph, sim);
  std::optional<CostSourceSummary> sources;
  if (a.cost_sources) sources = summarize_cost_sources(g.graph, *ms->cost, placement);
  const std::vector<CriticalLink> path = a.critical_path ? critical_path(g.graph, sim, r) : std::vector<CriticalLink>{};
  if (a.json) {
    nlohmann::json j = result_json(r, machine, g, a, bfc, sources ? &*sources : nullptr, placement, bound);
    if (a.critical_path) j["critical_path"] = critical_path_json(path, r, machine, g.graph);
    std::cout << j.dump(2) << "\n";
  } else {
    print_report(r, machine, g, a, ms->cost->describe(), bfc, bound);
    if (sources) {
      fmt::print("\nwhere each op's time comes from (every op once, on its device; launch overhead included):\n");
      print_cost_sources(*sources);
      // A calibration covers identical devices: say which devices another's measurements price.
      if (const auto* calibrated = dynamic_cast<const CalibratedCostModel*>(ms->cost.get()))
        for (DeviceId d = 0; d < machine.num_devices(); ++d)
          if (auto on = calibrated->measured_on(d); on && *on != d)
            fmt::print("{} is priced by the measurements of {} (an identical device)\n", machine.devices[d].name,
                       machine.devices[*on].name);
    }
    if (a.critical_path) print_critical_path(path, r, machine, g.graph);
  }
  if (!a.trace.empty() && !a.json) fmt::print("\ntrace written to {} (open it in https://ui.perfetto.dev)\n", a.trace);
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  auto* cmd = app.add_subcommand("simulate", "Predict one training step of a graph under a placement on a machine");
  cmd->add_option("--graph,-g", args->graph, "Graph JSON file (docs/formats.md)");
  cmd->add_option("--model", args->model, "Zoo model instead of --graph: name[:key=value,...] (see `placelab models`)");
  cmd->add_option("--machine,-m", args->machine, "Machine preset (see `placelab machines`) or YAML file")
      ->capture_default_str();
  cmd->add_option("--placement,-p", args->placement, placement_rules_help())->capture_default_str();
  cmd->add_option("--trace", args->trace, "Write the step's Chrome trace JSON here (open in Perfetto)");
  cmd->add_flag("--json", args->json, "Print the result as JSON instead of a table");
  cmd->add_option("--execution", args->execution,
                  "Run the graph as 'eager' (PyTorch: one host thread issues the ops in program order) or "
                  "'dataflow' (TensorFlow 1.x's executor) instead of as the graph says (docs/simulator.md)")
      ->check(CLI::IsMember({"eager", "dataflow"}));
  cmd->add_flag("--cost-sources", args->cost_sources,
                "Per op type, how many ops and seconds were priced from exact measurements, class fits or the "
                "analytic roofline (with --json: also per op)");
  cmd->add_flag("--critical-path", args->critical_path,
                "Also print the step's critical path: the ops, copies and waits for a slot or a link that set its "
                "length (with --json: every event)");
  cmd->add_flag("--fragmentation", args->fragmentation,
                "Also replay each GPU's allocations through TensorFlow's BFC allocator: the chunk peak, and "
                "OOM from fragmentation (docs/simulator.md)");
  cmd->footer(
      "Examples:\n"
      "  placelab simulate --graph scenarios/graphs/quickstart.json --machine k80x4 --placement single_gpu\n"
      "  placelab simulate -g g.json -m dgx1 -p random:3 --trace step.json\n"
      "  placelab simulate --model nmt:layers=4,batch=64 --machine k80x4 --placement expert\n"
      "  placelab simulate --model nmt:layers=2,batch=64 --machine k80x2 --fragmentation\n"
      "  placelab simulate -g g.json -m my-machine.yaml -p placement.json --json");
  cmd->callback([args] { run_simulate(*args); });
}

}  // namespace placelab::cli
