#include "placelab/learners/baselines.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <unordered_map>


#include "partition.h"
#include "placelab/graph/error.h"
#include "placelab/graph/numbers.h"
#include "placelab/graph/transfers.h"
#include "placelab/learners/grouping.h"
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
    if (machine.devices[d].peak_flops > machine.devices[fastest].peak_flops) fastest = d;
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
    for (DeviceId d : targets) max_flops = std::max(max_flops, machine.devices[d].peak_flops);
    std::vector<SCOTCH_Num> tverttab{0}, tvelo, tedge, tedlo;
    for (std::size_t a = 0; a < t; ++a) {
      tvelo.push_back(static_cast<SCOTCH_Num>(
          std::max(1LL, std::llround(1000.0 * machine.devices[targets[a]].peak_flops / std::max(max_flops, 1.0)))));
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

Placement heft_placement(const OpGraph& graph, const CostModel& cost, const HeftOptions& options) {
  const Machine& machine = cost.machine();
  const std::size_t n = graph.num_ops();
  const auto cpu = machine.default_cpu();
  std::vector<DeviceId> candidates = gpu_devices(machine);
  if ((options.include_cpu || candidates.empty()) && cpu) candidates.push_back(*cpu);
  if (candidates.empty()) throw InputError("heft: machine \"" + machine.name + "\" has no devices");
  auto allowed = [&](OpId op) -> std::vector<DeviceId> {
    if (graph.op(op).cpu_only && cpu) return {*cpu};
    return candidates;
  };

  // Mean op time over the op's candidate devices, mean transfer time over ordered device pairs.
  std::vector<double> mean_time(n);
  for (OpId op = 0; op < n; ++op) {
    const auto devs = allowed(op);
    double s = 0;
    for (DeviceId d : devs) s += cost.op_time_s(graph.op(op), d);
    mean_time[op] = s / static_cast<double>(devs.size());
  }
  auto mean_transfer = [&](int64_t bytes) {
    if (candidates.size() < 2) return 0.0;
    double s = 0;
    for (DeviceId a : candidates)
      for (DeviceId b : candidates)
        if (a != b) s += cost.transfer_time_s(bytes, a, b);
    return s / static_cast<double>(candidates.size() * (candidates.size() - 1));
  };
  const std::vector<OpId> topo = graph.topological_order();
  std::vector<std::size_t> topo_pos(n);
  for (std::size_t i = 0; i < n; ++i) topo_pos[topo[i]] = i;
  std::vector<double> rank(n, 0.0);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const OpId op = *it;
    double best = 0;
    graph.for_each_out_edge(op, [&](OpId dst, const Tensor& t) {
      best = std::max(best, (t.control ? 0.0 : mean_transfer(t.bytes)) + rank[dst]);
    });
    rank[op] = mean_time[op] + best;
  }
  std::vector<OpId> order(topo);
  // Decreasing rank; equal ranks (zero-cost chains) keep topological order, so every op comes
  // after its predecessors.
  std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) { return rank[a] > rank[b]; });

  const Grouping coloc = group_by_colocation(graph);
  std::vector<int64_t> group_persistent(coloc.num_groups(), 0);
  for (OpId op = 0; op < n; ++op) group_persistent[coloc.group_of(op)] += graph.op(op).persistent_bytes;
  std::vector<int> group_device(coloc.num_groups(), -1);
  std::vector<int64_t> persistent_on(machine.num_devices(), 0);
  // Busy intervals per device stream, sorted and disjoint: HEFT's insertion policy puts an op into
  // the earliest idle gap after its inputs arrive that is long enough, not only after the last op.
  using Interval = std::pair<double, double>;
  std::vector<std::vector<std::vector<Interval>>> busy(machine.num_devices());
  for (DeviceId d = 0; d < machine.num_devices(); ++d)
    busy[d].resize(static_cast<std::size_t>(std::max(1, machine.devices[d].streams)));
  auto earliest_start = [](const std::vector<Interval>& iv, double ready, double duration) {
    auto it = std::upper_bound(iv.begin(), iv.end(), ready,
                               [](double t, const Interval& x) { return t < x.second; });
    double t = ready;
    for (; it != iv.end(); ++it) {
      if (it->first - t >= duration) return t;
      t = std::max(t, it->second);
    }
    return t;
  };
  std::vector<double> finish(n, 0.0);
  Placement p(n, candidates.front());

  // Link directions are FIFO resources held for a whole transfer, and what crosses devices follows
  // graph/transfers.h (the simulator's and the executors' rule): a producer's output goes to a
  // device once, its largest data edge on the wire. Arrival times account for committed transfers.
  std::vector<double> link_free(machine.num_link_directions(), 0.0);
  const std::vector<int64_t> wire = wire_bytes(graph);
  std::unordered_map<uint64_t, double> arrived;  // (producer, device) → arrival of its output there
  auto arrival = [&](OpId src, const Tensor& t, DeviceId d, bool commit) {
    if (p[src] == d || t.control) return finish[src];
    const uint64_t key = (static_cast<uint64_t>(src) << 16) | d;
    if (auto it = arrived.find(key); it != arrived.end()) return it->second;
    const Route& route = machine.route(p[src], d);
    double start = finish[src];
    for (LinkDirection h : route.hops) start = std::max(start, link_free[h]);
    const double end = start + cost.transfer_time_s(wire[src], p[src], d);
    if (commit) {
      for (LinkDirection h : route.hops) link_free[h] = end;
      arrived.emplace(key, end);
    }
    return end;
  };
  auto earliest_finish = [&](OpId op, DeviceId d, double ready, std::size_t& stream) {
    const double duration = cost.op_time_s(graph.op(op), d);
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t s = 0; s < busy[d].size(); ++s) {
      const double f = earliest_start(busy[d][s], ready, duration) + duration;
      if (f < best) {
        best = f;
        stream = s;
      }
    }
    return best;
  };

  std::vector<bool> placed(n, false);
  // Commits `op` to device d: its inputs' transfers (in input order; they may queue behind each
  // other on a shared link), the earliest idle slot of one of d's streams, the group's device.
  auto schedule_on = [&](OpId op, DeviceId d) {
    double ready = 0;
    graph.for_each_in_edge(op, [&](OpId src, const Tensor& t) { ready = std::max(ready, arrival(src, t, d, true)); });
    std::size_t stream = 0;
    const double f = earliest_finish(op, d, ready, stream);
    p[op] = d;
    finish[op] = f;
    placed[op] = true;
    auto& iv = busy[d][stream];
    const Interval slot{f - cost.op_time_s(graph.op(op), d), f};
    iv.insert(std::upper_bound(iv.begin(), iv.end(), slot), slot);
    const GroupId g = coloc.group_of(op);
    if (group_device[g] < 0) {
      group_device[g] = d;
      persistent_on[d] += group_persistent[g];
    }
  };
  // Sources (variables, inputs) are placed with their first scheduled consumer, unless their
  // colocation group already has a device: placed on their own at time 0 they would be spread
  // over idle devices and drag their consumers and colocated updates after them.
  auto is_deferred = [&](OpId op) { return graph.in_degree(op) == 0 && !(graph.op(op).cpu_only && cpu); };
  auto place_deferred_input = [&](OpId src, DeviceId consumer_device) {
    const GroupId gs = coloc.group_of(src);
    schedule_on(src, group_device[gs] >= 0 ? static_cast<DeviceId>(group_device[gs]) : consumer_device);
  };

  for (OpId op : order) {
    if (placed[op] || is_deferred(op)) continue;
    // Inputs whose device is already decided by their colocation group are placed now.
    graph.for_each_in_edge(op, [&](OpId src, const Tensor&) {
      if (!placed[src] && group_device[coloc.group_of(src)] >= 0) place_deferred_input(src, 0);
    });
    const GroupId g = coloc.group_of(op);
    std::vector<DeviceId> devs;
    if (group_device[g] >= 0) {
      devs = {static_cast<DeviceId>(group_device[g])};
    } else {
      devs = allowed(op);
      if (options.respect_memory) {
        std::vector<DeviceId> fit;
        for (DeviceId d : devs)
          if (persistent_on[d] + group_persistent[g] <= machine.devices[d].memory_bytes) fit.push_back(d);
        if (!fit.empty()) devs = std::move(fit);
      }
    }
    // On equal finish times prefer the device holding the op's largest input: symmetric machines
    // produce many ties, and breaking them by device id would scatter chains for nothing.
    int preferred = -1;
    int64_t preferred_bytes = -1;
    graph.for_each_in_edge(op, [&](OpId src, const Tensor& t) {
      if (placed[src] && !t.control && t.bytes > preferred_bytes) {
        preferred_bytes = t.bytes;
        preferred = p[src];
      }
    });
    double best_finish = std::numeric_limits<double>::infinity();
    DeviceId best_dev = devs.front();
    for (DeviceId d : devs) {
      double ready = 0;
      graph.for_each_in_edge(op, [&](OpId src, const Tensor& t) {
        // An unplaced source would come along to d and run there first.
        ready = std::max(ready, placed[src] ? arrival(src, t, d, false) : cost.op_time_s(graph.op(src), d));
      });
      std::size_t stream = 0;
      const double f = earliest_finish(op, d, ready, stream);
      const bool tie = std::isfinite(best_finish) && std::abs(f - best_finish) <= 1e-12 * std::max(1.0, best_finish);
      if ((f < best_finish && !tie) || (tie && d == preferred && best_dev != preferred)) {
        best_finish = f;
        best_dev = d;
      }
    }
    graph.for_each_in_edge(op, [&](OpId src, const Tensor&) {
      if (!placed[src]) place_deferred_input(src, best_dev);
    });
    schedule_on(op, best_dev);
  }
  // Sources nobody consumes.
  for (OpId op : topo)
    if (!placed[op]) {
      const GroupId g = coloc.group_of(op);
      schedule_on(op, group_device[g] >= 0 ? static_cast<DeviceId>(group_device[g]) : allowed(op).front());
    }
  return p;
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
