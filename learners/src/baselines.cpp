#include "placelab/learners/baselines.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>


#include "partition.h"
#include "placelab/core/error.h"
#include "placelab/core/numbers.h"
#include "placelab/graph/transfers.h"
#include "placelab/learners/grouping.h"
#include "placelab/sim/eager_schedule.h"
#include "placelab/sim/link_book.h"
#include "placelab/sim/simulator.h"
#include "dataflow_list.h"
#include "list_rules.h"
#include "registry_entries.h"

namespace placelab {

namespace {

// TF soft placement: ops without a GPU kernel go to the first CPU.
void apply_soft_placement(const OpGraph& graph, const Machine& machine, Placement& p) {
  const auto cpu = machine.default_cpu();
  if (!cpu) return;
  for (OpId op = 0; op < graph.num_ops(); ++op)
    if (graph.op(op).cpu_only) p[op] = *cpu;
}

std::vector<DeviceId> default_devices(const Machine& machine, std::vector<DeviceId> devices, const char* who) {
  if (devices.empty()) devices = gpu_devices(machine);
  if (devices.empty())
    for (DeviceId d = 0; d < machine.num_devices(); ++d) devices.push_back(d);
  if (devices.empty()) throw InputError(std::string(who) + ": the machine has no devices");
  for (DeviceId d : devices)
    if (d >= machine.num_devices())
      throw InputError(std::string(who) + ".devices: device id " + std::to_string(d) + ": must be < " +
                       std::to_string(machine.num_devices()));
  return devices;
}

// The colocation groups in the topological order of their first op.
std::vector<GroupId> groups_in_topological_order(const OpGraph& graph, const Grouping& groups) {
  std::vector<GroupId> order;
  std::vector<bool> seen(groups.num_groups(), false);
  for (OpId op : graph.topological_order()) {
    const GroupId g = groups.group_of(op);
    if (!seen[g]) {
      seen[g] = true;
      order.push_back(g);
    }
  }
  return order;
}

}  // namespace

std::vector<DeviceId> gpu_devices(const Machine& machine) {
  std::vector<DeviceId> out;
  for (DeviceId d = 0; d < machine.num_devices(); ++d)
    if (machine.devices[d].kind == DeviceKind::kGpu) out.push_back(d);
  return out;
}

Placement single_gpu_placement(const OpGraph& graph, const Machine& machine, std::optional<DeviceId> gpu) {
  const auto gpus = gpu_devices(machine);
  if (gpus.empty()) throw InputError("single_gpu: machine \"" + machine.name + "\" has no GPU");
  const DeviceId target = gpu.value_or(gpus.front());
  if (std::find(gpus.begin(), gpus.end(), target) == gpus.end())
    throw InputError("single_gpu.gpu = " + std::to_string(target) + ": must be a GPU of machine \"" + machine.name + "\"");
  Placement p(graph.num_ops(), target);
  apply_soft_placement(graph, machine, p);
  return p;
}

Placement single_cpu_placement(const OpGraph& graph, const Machine& machine) {
  const auto cpu = machine.default_cpu();
  if (!cpu) throw InputError("single_cpu: machine \"" + machine.name + "\" has no CPU");
  return Placement(graph.num_ops(), *cpu);
}

Placement random_placement(const OpGraph& graph, const Machine& machine, uint64_t seed, std::vector<DeviceId> devices) {
  devices = default_devices(machine, std::move(devices), "random");
  const Grouping groups = group_by_colocation(graph);
  std::mt19937_64 rng(seed);
  Placement group_devices(groups.num_groups());
  // Modulo bias is below 2^-50 for any realistic device count; keeps the draw platform-independent.
  for (DeviceId& d : group_devices) d = devices[rng() % devices.size()];
  Placement p = groups.expand(group_devices);
  apply_soft_placement(graph, machine, p);
  return p;
}

Placement round_robin_placement(const OpGraph& graph, const Machine& machine, std::vector<DeviceId> devices) {
  devices = default_devices(machine, std::move(devices), "round_robin");
  const Grouping groups = group_by_colocation(graph);
  Placement group_devices(groups.num_groups());
  std::size_t next = 0;
  for (GroupId g : groups_in_topological_order(graph, groups)) group_devices[g] = devices[next++ % devices.size()];
  Placement p = groups.expand(group_devices);
  apply_soft_placement(graph, machine, p);
  return p;
}

// ---- METIS -------------------------------------------------------------------------------------

void MetisPlacementOptions::validate() const {
  if (!(imbalance > 1.0) || imbalance > 10.0)
    throw InputError("metis.imbalance = " + std::to_string(imbalance) + ": must be in (1, 10]");
}

Placement metis_placement(const OpGraph& graph, const Machine& machine, const MetisPlacementOptions& options) {
  options.validate();
  const auto gpus = gpu_devices(machine);
  if (gpus.empty()) throw InputError("metis: machine \"" + machine.name + "\" has no GPU");
  const Grouping units = group_by_colocation(graph);
  const detail::WeightedGraph wg =
      detail::contract_graph(graph, units, [&](OpId op) { return detail::op_flops(graph.op(op)); });
  const auto part = detail::metis_partition(wg, static_cast<int>(gpus.size()), options.seed, options.imbalance);
  Placement group_devices(units.num_groups());
  for (std::size_t g = 0; g < group_devices.size(); ++g) group_devices[g] = gpus[static_cast<std::size_t>(part[g])];
  Placement p = units.expand(group_devices);
  apply_soft_placement(graph, machine, p);
  return p;
}

// ---- Scotch ------------------------------------------------------------------------------------

void ScotchPlacementOptions::validate() const {
  if (seed < 0) throw InputError("scotch.seed = " + std::to_string(seed) + ": must be >= 0");
}

using detail::scotch_check;
using detail::ScotchArch;
using detail::ScotchContext;
using detail::ScotchGraph;
using detail::ScotchStrat;

Placement scotch_placement(const OpGraph& graph, const CostModel& cost, const ScotchPlacementOptions& options) {
  options.validate();
  const Machine& machine = cost.machine();
  std::vector<DeviceId> targets = gpu_devices(machine);
  if (options.include_cpu)
    for (DeviceId d = 0; d < machine.num_devices(); ++d)
      if (machine.devices[d].kind == DeviceKind::kCpu) targets.push_back(d);
  std::sort(targets.begin(), targets.end());
  if (targets.empty())
    throw InputError(std::string(options.include_cpu ? "scotch" : "mincut") + ": machine \"" + machine.name +
                     "\" has no target device");

  // Source graph: colocation groups weighted by compute time on the fastest target.
  const Grouping units = group_by_colocation(graph);
  DeviceId fastest = targets.front();
  for (DeviceId d : targets)
    if (machine.devices[d].peak_flops_per_s > machine.devices[fastest].peak_flops_per_s) fastest = d;
  const detail::WeightedGraph wg =
      detail::contract_graph(graph, units, [&](OpId op) { return cost.op_time_s(graph.op(op), fastest); });

  Placement group_devices(units.num_groups(), targets.front());
  if (targets.size() > 1 && units.num_groups() > 1) {
    const detail::ScotchWeightedGraph source(wg);

    // Target graph: the target devices, fully connected; the cost of edge (a, b) is the time the
    // machine's route a→b (slower direction) takes to move 1 MiB, relative to the fastest pair.
    // Scotch's deco architecture reads target vertex loads as compute power and edge loads as
    // communication cost. Using routes (not raw links) keeps the rule that only switches relay.
    const std::size_t t = targets.size();
    constexpr int64_t kProbeBytes = int64_t{1} << 20;
    std::vector<double> pair_cost(t * t, 0.0);
    double cheapest = std::numeric_limits<double>::infinity();
    for (std::size_t a = 0; a < t; ++a)
      for (std::size_t b = 0; b < t; ++b)
        if (a != b) {
          const double c = std::max(cost.transfer_time_s(kProbeBytes, targets[a], targets[b]),
                                    cost.transfer_time_s(kProbeBytes, targets[b], targets[a]));
          pair_cost[a * t + b] = c;
          cheapest = std::min(cheapest, c);
        }
    double max_flops = 0;
    for (DeviceId d : targets) max_flops = std::max(max_flops, machine.devices[d].peak_flops_per_s);
    std::vector<SCOTCH_Num> tverttab{0}, tvelo, tedge, tedlo;
    for (std::size_t a = 0; a < t; ++a) {
      tvelo.push_back(static_cast<SCOTCH_Num>(
          std::max(1LL, std::llround(1000.0 * machine.devices[targets[a]].peak_flops_per_s / std::max(max_flops, 1.0)))));
      for (std::size_t b = 0; b < t; ++b) {
        if (a == b) continue;
        tedge.push_back(static_cast<SCOTCH_Num>(b));
        tedlo.push_back(static_cast<SCOTCH_Num>(std::clamp(
            std::llround(100.0 * pair_cost[a * t + b] / std::max(cheapest, 1e-300)), 1LL, 1000000LL)));
      }
      tverttab.push_back(static_cast<SCOTCH_Num>(tedge.size()));
    }
    ScotchGraph target;
    scotch_check(SCOTCH_graphBuild(&target.g, 0, static_cast<SCOTCH_Num>(t), tverttab.data(), nullptr, tvelo.data(),
                                   nullptr, static_cast<SCOTCH_Num>(tedge.size()), tedge.data(), tedlo.data()),
                 "SCOTCH_graphBuild (machine graph)");
    scotch_check(SCOTCH_graphCheck(&target.g), "SCOTCH_graphCheck (machine graph)");

    ScotchContext context(options.seed);
    ScotchGraph source_in_context, target_in_context;
    scotch_check(SCOTCH_contextBindGraph(&context.c, &source.graph.g, &source_in_context.g), "SCOTCH_contextBindGraph");
    scotch_check(SCOTCH_contextBindGraph(&context.c, &target.g, &target_in_context.g), "SCOTCH_contextBindGraph");
    ScotchArch arch;
    ScotchStrat arch_strat, map_strat;
    // No vertex list: every target vertex is a terminal, numbered as in `targets`.
    scotch_check(SCOTCH_archBuild0(&arch.a, &target_in_context.g, 0, nullptr, &arch_strat.s), "SCOTCH_archBuild0");
    std::vector<SCOTCH_Num> part(wg.num_vertices(), -1);
    scotch_check(SCOTCH_graphMap(&source_in_context.g, &arch.a, &map_strat.s, part.data()), "SCOTCH_graphMap");
    for (std::size_t g = 0; g < part.size(); ++g) {
      PLACELAB_CHECK(part[g] >= 0 && static_cast<std::size_t>(part[g]) < targets.size())
          << "Scotch mapped group " << g << " to terminal " << part[g];
      group_devices[g] = targets[static_cast<std::size_t>(part[g])];
    }
  }
  Placement p = units.expand(group_devices);
  apply_soft_placement(graph, machine, p);
  return p;
}

Placement mincut_placement(const OpGraph& graph, const CostModel& cost, int seed) {
  return scotch_placement(graph, cost, ScotchPlacementOptions{.include_cpu = false, .seed = seed});
}

// ---- HEFT --------------------------------------------------------------------------------------

namespace {

// HEFT (Topcuoglu et al. 2002) with insertion, over the machine's streams and links: ops in
// decreasing upward rank, each on the candidate device where it finishes first. Members are the
// schedule so far, which every choice reads.
// On an eager graph the order is PyTorch's program order instead and finish times are the eager
// model's own (EagerSchedule): see run_eager.
class HeftScheduler {
 public:
  HeftScheduler(const OpGraph& graph, const CostModel& cost, const HeftOptions& options);
  ListSchedule run();

 private:
  ListSchedule run_eager();
  // The device among `devs` with the least finish_of(d) (HEFT's choice, whichever model times
  // it); equal finish times go to the device holding op's largest placed input (list_rules.h).
  template <typename FinishOf>
  DeviceId earliest_finishing(OpId op, const std::vector<DeviceId>& devs, FinishOf finish_of) const {
    return detail::earliest_finishing(
        devs, detail::largest_input_device(graph_, op, [&](OpId src) { return placed_[src] ? static_cast<int>(p_[src]) : -1; }),
        finish_of);
  }
  // Books what `schedule` committed for op and the parameters it brought along.
  void record_eager(OpId op, const EagerSchedule& schedule);
  using Interval = std::pair<double, double>;

  std::vector<DeviceId> allowed(OpId op) const;
  // Ops in decreasing upward rank: mean op time over the op's candidate devices plus the longest
  // path below it, each edge at its mean transfer time over ordered device pairs.
  std::vector<OpId> rank_order() const;
  // When `src`'s output over `t` is on device d; `commit` books the transfer's links.
  double arrival(OpId src, const Tensor& t, DeviceId d, bool commit);
  double earliest_finish(OpId op, DeviceId d, double ready, std::size_t& stream) const;
  // Commits `op` to device d: its inputs' transfers (in input order; they may queue behind each
  // other on a shared link), the earliest idle slot of one of d's streams, the group's device.
  void schedule_on(OpId op, DeviceId d);
  // The devices `op` may go to: its colocation group's device once it has one, else the
  // candidates (those with room for the group's persistent bytes, under respect_memory).
  std::vector<DeviceId> devices_for(OpId op) const;
  DeviceId best_device(OpId op, const std::vector<DeviceId>& devs);
  // Sources (variables, inputs) are placed with their first scheduled consumer, unless their
  // colocation group already has a device: placed on their own at time 0 they would be spread
  // over idle devices and drag their consumers and colocated updates after them.
  bool is_deferred(OpId op) const { return graph_.in_degree(op) == 0 && !(graph_.op(op).cpu_only && cpu_); }
  void place_deferred_input(OpId src, DeviceId consumer_device);

  const OpGraph& graph_;
  const CostModel& cost_;
  const HeftOptions& options_;
  const Machine& machine_;
  const std::optional<DeviceId> cpu_;
  std::vector<DeviceId> candidates_;
  const std::vector<OpId> topo_;  // the graph's topological order, for the ranks and the last sources
  const Grouping coloc_;
  std::vector<int64_t> group_persistent_;
  std::vector<int> group_device_;
  std::vector<int64_t> persistent_on_;
  // Busy intervals per device stream, sorted and disjoint: HEFT's insertion policy puts an op into
  // the earliest idle gap after its inputs arrive that is long enough, not only after the last op.
  std::vector<std::vector<std::vector<Interval>>> busy_;
  std::vector<double> finish_;
  std::vector<bool> placed_;
  Placement p_;
  // Link directions are FIFO resources held for a whole transfer, and what crosses devices follows
  // graph/transfers.h (the simulator's and the executors' rule): a producer's output goes to a
  // device once, its largest data edge on the wire. Arrival times account for committed transfers.
  LinkBook links_;
  std::vector<int64_t> wire_;
  std::unordered_map<uint64_t, double> arrived_;  // (producer, device) → arrival of its output there
};

HeftScheduler::HeftScheduler(const OpGraph& graph, const CostModel& cost, const HeftOptions& options)
    : graph_(graph),
      cost_(cost),
      options_(options),
      machine_(cost.machine()),
      cpu_(machine_.default_cpu()),
      candidates_(gpu_devices(machine_)),
      topo_(graph.topological_order()),
      coloc_(group_by_colocation(graph)),
      group_persistent_(coloc_.num_groups(), 0),
      group_device_(coloc_.num_groups(), -1),
      persistent_on_(machine_.num_devices(), 0),
      busy_(machine_.num_devices()),
      finish_(graph.num_ops(), 0.0),
      placed_(graph.num_ops(), false),
      links_(machine_.num_link_directions()),
      wire_(wire_bytes(graph)) {
  if ((options.include_cpu || candidates_.empty()) && cpu_) candidates_.push_back(*cpu_);
  if (candidates_.empty()) throw InputError("heft: machine \"" + machine_.name + "\" has no devices");
  p_.assign(graph.num_ops(), candidates_.front());
  for (OpId op = 0; op < graph.num_ops(); ++op) group_persistent_[coloc_.group_of(op)] += graph.op(op).persistent_bytes;
  for (DeviceId d = 0; d < machine_.num_devices(); ++d)
    busy_[d].resize(static_cast<std::size_t>(machine_.devices[d].parallel_capacity()));
}

std::vector<DeviceId> HeftScheduler::allowed(OpId op) const {
  if (graph_.op(op).cpu_only && cpu_) return {*cpu_};
  return candidates_;
}

std::vector<OpId> HeftScheduler::rank_order() const {
  const std::vector<double> rank = detail::upward_ranks(graph_, cost_, candidates_, cpu_);
  std::vector<OpId> order(topo_);
  // Decreasing rank; equal ranks (zero-cost chains) keep topological order, so every op comes
  // after its predecessors.
  std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) { return rank[a] > rank[b]; });
  return order;
}

double HeftScheduler::arrival(OpId src, const Tensor& t, DeviceId d, bool commit) {
  if (p_[src] == d || t.control) return finish_[src];
  const uint64_t key = (static_cast<uint64_t>(src) << 16) | d;
  if (auto it = arrived_.find(key); it != arrived_.end()) return it->second;
  const double end = links_.book(machine_.route(p_[src], d).hops, finish_[src],
                                 cost_.transfer_time_s(wire_[src], p_[src], d), commit);
  if (commit) arrived_.emplace(key, end);
  return end;
}

double HeftScheduler::earliest_finish(OpId op, DeviceId d, double ready, std::size_t& stream) const {
  const auto earliest_start = [](const std::vector<Interval>& iv, double ready_at, double duration) {
    auto it = std::upper_bound(iv.begin(), iv.end(), ready_at, [](double t, const Interval& x) { return t < x.second; });
    double t = ready_at;
    for (; it != iv.end(); ++it) {
      if (it->first - t >= duration) return t;
      t = std::max(t, it->second);
    }
    return t;
  };
  const double duration = cost_.op_time_s(graph_.op(op), d);
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t s = 0; s < busy_[d].size(); ++s) {
    const double f = earliest_start(busy_[d][s], ready, duration) + duration;
    if (f < best) {
      best = f;
      stream = s;
    }
  }
  return best;
}

void HeftScheduler::schedule_on(OpId op, DeviceId d) {
  double ready = 0;
  graph_.for_each_in_edge(op, [&](OpId src, const Tensor& t) { ready = std::max(ready, arrival(src, t, d, true)); });
  std::size_t stream = 0;
  const double f = earliest_finish(op, d, ready, stream);
  p_[op] = d;
  finish_[op] = f;
  placed_[op] = true;
  auto& iv = busy_[d][stream];
  const Interval slot{f - cost_.op_time_s(graph_.op(op), d), f};
  iv.insert(std::upper_bound(iv.begin(), iv.end(), slot), slot);
  const GroupId g = coloc_.group_of(op);
  if (group_device_[g] < 0) {
    group_device_[g] = d;
    persistent_on_[d] += group_persistent_[g];
  }
}

void HeftScheduler::place_deferred_input(OpId src, DeviceId consumer_device) {
  const GroupId gs = coloc_.group_of(src);
  schedule_on(src, group_device_[gs] >= 0 ? static_cast<DeviceId>(group_device_[gs]) : consumer_device);
}

std::vector<DeviceId> HeftScheduler::devices_for(OpId op) const {
  const GroupId g = coloc_.group_of(op);
  if (group_device_[g] >= 0) return {static_cast<DeviceId>(group_device_[g])};
  std::vector<DeviceId> devs = allowed(op);
  if (!options_.respect_memory) return devs;
  std::vector<DeviceId> fit;
  for (DeviceId d : devs)
    if (persistent_on_[d] + group_persistent_[g] <= machine_.devices[d].memory_bytes) fit.push_back(d);
  return fit.empty() ? devs : fit;
}

DeviceId HeftScheduler::best_device(OpId op, const std::vector<DeviceId>& devs) {
  return earliest_finishing(op, devs, [&](DeviceId d) {
    double ready = 0;
    graph_.for_each_in_edge(op, [&](OpId src, const Tensor& t) {
      // An unplaced source would come along to d and run there first.
      ready = std::max(ready, placed_[src] ? arrival(src, t, d, false) : cost_.op_time_s(graph_.op(src), d));
    });
    std::size_t stream = 0;
    return earliest_finish(op, d, ready, stream);
  });
}

ListSchedule HeftScheduler::run() {
  if (graph_.execution() == Execution::kEager) return run_eager();
  for (OpId op : rank_order()) {
    if (placed_[op] || is_deferred(op)) continue;
    // Inputs whose device is already decided by their colocation group are placed now.
    graph_.for_each_in_edge(op, [&](OpId src, const Tensor&) {
      if (!placed_[src] && group_device_[coloc_.group_of(src)] >= 0) place_deferred_input(src, 0);
    });
    const DeviceId d = best_device(op, devices_for(op));
    graph_.for_each_in_edge(op, [&](OpId src, const Tensor&) {
      if (!placed_[src]) place_deferred_input(src, d);
    });
    schedule_on(op, d);
  }
  // Sources nobody consumes.
  for (OpId op : topo_)
    if (!placed_[op]) {
      const GroupId g = coloc_.group_of(op);
      schedule_on(op, group_device_[g] >= 0 ? static_cast<DeviceId>(group_device_[g]) : allowed(op).front());
    }
  // p_ is HEFT's plan in its own model of the executor; the schedule is the simulator's run of it,
  // refined with HEFT's rule inside the simulator (dataflow_list.h).
  return detail::dataflow_list_schedule(
      graph_, cost_,
      {.kind = detail::DataflowListRule::Kind::kHeft, .candidates = candidates_,
       .respect_memory = options_.respect_memory},
      p_);
}

// PyTorch issues the ops in program order, so that is HEFT's order here (an upward rank cannot
// reorder them), and each op goes where the eager model finishes it first. Parameters are placed
// with their first reader, as sources are above: EagerSchedule brings them along.
ListSchedule HeftScheduler::run_eager() {
  const Simulator simulator(graph_, cost_);
  EagerSchedule schedule(simulator);
  for (OpId op = 0; op < graph_.num_ops(); ++op) {
    if (placed_[op]) continue;
    if (is_deferred(op) && schedule.is_parameter(op)) continue;
    // Inputs whose device their colocation group decided already go there, not with op.
    graph_.for_each_in_edge(op, [&](OpId src, const Tensor&) {
      const int gd = group_device_[coloc_.group_of(src)];
      if (!placed_[src] && gd >= 0) {
        schedule.commit(src, static_cast<DeviceId>(gd));
        record_eager(src, schedule);
      }
    });
    const DeviceId d =
        earliest_finishing(op, devices_for(op), [&](DeviceId dev) { return schedule.probe(op, dev).end_s; });
    schedule.commit(op, d);
    record_eager(op, schedule);
  }
  // Parameters nobody reads.
  for (OpId op = 0; op < graph_.num_ops(); ++op)
    if (!placed_[op]) {
      const GroupId g = coloc_.group_of(op);
      schedule.commit(op, group_device_[g] >= 0 ? static_cast<DeviceId>(group_device_[g]) : allowed(op).front());
      record_eager(op, schedule);
    }
  return {p_, schedule.makespan_s()};
}

void HeftScheduler::record_eager(OpId op, const EagerSchedule& schedule) {
  auto book = [&](OpId v) {
    if (placed_[v] || !schedule.committed(v)) return;
    const DeviceId d = schedule.device(v);
    p_[v] = d;
    placed_[v] = true;
    const GroupId g = coloc_.group_of(v);
    if (group_device_[g] < 0) {
      group_device_[g] = d;
      persistent_on_[d] += group_persistent_[g];
    }
  };
  graph_.for_each_in_edge(op, [&](OpId src, const Tensor&) { book(src); });
  book(op);
}

}  // namespace

ListSchedule heft_schedule(const OpGraph& graph, const CostModel& cost, const HeftOptions& options) {
  return HeftScheduler(graph, cost, options).run();
}

Placement heft_placement(const OpGraph& graph, const CostModel& cost, const HeftOptions& options) {
  return heft_schedule(graph, cost, options).placement;
}

// ---- Registry entries --------------------------------------------------------------------------
// Seeds: the randomised baselines take the run's seed, so that a scenario's seeds vary them as
// they vary the learners; METIS and Scotch take an int, hence the modulo.

namespace {

int library_seed(uint64_t seed) { return static_cast<int>(seed % 1000000); }

uint64_t parse_seed(const std::string& text) {
  const std::optional<uint64_t> seed = parse_number<uint64_t>(text);
  if (!seed) throw InputError("random.seed = " + text + ": must be a non-negative integer");
  return *seed;
}

}  // namespace

BaselineEntry detail::single_gpu_baseline_entry() {
  return {.name = "single_gpu",
          .aliases = {},
          .summary = "every op on the first GPU; cpu-only ops on the first CPU (TF soft placement)",
          .paper = "Mirhoseini et al., ICML 2017 §4",
          .argument = "",
          .place = [](const BaselineContext& c, const std::optional<std::string>&) {
            return single_gpu_placement(c.graph, c.machine);
          }};
}

BaselineEntry detail::single_cpu_baseline_entry() {
  return {.name = "single_cpu",
          .aliases = {},
          .summary = "every op on the first CPU",
          .paper = "Mirhoseini et al., ICML 2017 §4",
          .argument = "",
          .place = [](const BaselineContext& c, const std::optional<std::string>&) {
            return single_cpu_placement(c.graph, c.machine);
          }};
}

BaselineEntry detail::expert_baseline_entry() {
  return {.name = "expert",
          .aliases = {},
          .summary = "the papers' hand-made placement of a zoo model (a graph file has none)",
          .paper = "the model zoo's expert placement (docs/models.md)",
          .argument = "",
          .place = [](const BaselineContext& c, const std::optional<std::string>&) {
            if (!c.expert)
              throw InputError("expert: the graph has no expert placement; only zoo models (--model, `model:`) have one");
            return c.expert();
          }};
}

BaselineEntry detail::metis_baseline_entry() {
  return {.name = "metis",
          .aliases = {},
          .summary = "METIS k-way partition into one part per GPU (FLOPs and tensor bytes), seeded by the run's seed",
          .paper = "Karypis & Kumar 1998; Post Table 1",
          .argument = "",
          .place = [](const BaselineContext& c, const std::optional<std::string>&) {
            return metis_placement(c.graph, c.machine, {.seed = library_seed(c.seed)});
          }};
}

BaselineEntry detail::scotch_baseline_entry() {
  return {.name = "scotch",
          .aliases = {},
          .summary = "Scotch static mapping onto the machine graph (GPUs and CPUs), seeded by the run's seed",
          .paper = "Mirhoseini et al., ICML 2017 §4",
          .argument = "",
          .place = [](const BaselineContext& c, const std::optional<std::string>&) {
            return scotch_placement(c.graph, c.cost, {.include_cpu = true, .seed = library_seed(c.seed)});
          }};
}

BaselineEntry detail::mincut_baseline_entry() {
  return {.name = "mincut",
          .aliases = {},
          .summary = "Scotch static mapping onto the GPUs only, seeded by the run's seed",
          .paper = "Mirhoseini et al., ICML 2017 §4",
          .argument = "",
          .place = [](const BaselineContext& c, const std::optional<std::string>&) {
            return mincut_placement(c.graph, c.cost, library_seed(c.seed));
          }};
}

BaselineEntry detail::random_baseline_entry() {
  return {.name = "random",
          .aliases = {},
          .summary = "each colocation group on a uniformly drawn GPU; `random` draws with the run's seed, "
                     "`random:<seed>` with its own",
          .paper = "none; a sanity reference",
          .argument = "<seed>",
          .canonical_argument = [](const std::string& argument) { return std::to_string(parse_seed(argument)); },
          .place = [](const BaselineContext& c, const std::optional<std::string>& argument) {
            return random_placement(c.graph, c.machine, argument ? parse_seed(*argument) : c.seed);
          }};
}

BaselineEntry detail::round_robin_baseline_entry() {
  return {.name = "round_robin",
          .aliases = {},
          .summary = "colocation groups in topological order dealt to the GPUs in turn",
          .paper = "none; a sanity reference",
          .argument = "",
          .place = [](const BaselineContext& c, const std::optional<std::string>&) {
            return round_robin_placement(c.graph, c.machine);
          }};
}

BaselineEntry detail::heft_baseline_entry() {
  return {.name = "heft",
          .aliases = {},
          .summary = "HEFT list scheduling over the GPUs: each op where it finishes earliest; a strong non-learning reference",
          .paper = "Topcuoglu et al. 2002",
          .argument = "",
          .place = [](const BaselineContext& c, const std::optional<std::string>&) {
            return heft_placement(c.graph, c.cost);
          }};
}

}  // namespace placelab
