// The exact placement-and-scheduling model (exact.h): tasks from a grouping, the mixed-integer
// model, a start from the single-device and HEFT placements, and CBC through its C interface.
// Times enter the model in milliseconds and bytes in MiB, so that coefficients stay within a few
// orders of magnitude of 1 and CBC's absolute tolerances (1e-6 .. 1e-9) mean nothing physical.
#include "placelab/learners/exact.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "placelab/core/error.h"
#include "placelab/core/numbers.h"
#include "placelab/graph/transfers.h"
#include "placelab/learners/baselines.h"
#include "registry_entries.h"

namespace placelab {

void ExactOptions::validate() const {
  if (!(time_limit_s > 0) || !(time_limit_s <= 86400))
    throw InputError(fmt::format("exact.time_limit_s = {}: must be in (0, 86400] seconds", time_limit_s));
  if (max_groups < 1 || max_groups > 200)
    throw InputError(fmt::format("exact.max_groups = {}: must be in [1, 200]", max_groups));
  if (!(relative_gap >= 0) || !(relative_gap < 1))
    throw InputError(fmt::format("exact.relative_gap = {}: must be in [0, 1)", relative_gap));
  if (seed < 0) throw InputError(fmt::format("exact.seed = {}: must be >= 0", seed));
}

std::string_view exact_status_name(ExactStatus status) {
  switch (status) {
    case ExactStatus::kOptimal: return "optimal";
    case ExactStatus::kTimeLimit: return "time limit";
    case ExactStatus::kNoIncumbent: return "no incumbent";
  }
  return "?";
}

std::string ExactResult::summary() const {
  std::string s = std::string(exact_status_name(status));
  if (status != ExactStatus::kNoIncumbent)
    s += fmt::format(": model makespan {:.4f} s (bound {:.4f} s, gap {:.2f} %)", objective_s, best_bound_s, 100 * gap);
  if (group_bound_s > 0)
    s += fmt::format("; every group placement ≥ {:.4f} s{}", group_bound_s, group_bound_optimal ? "" : " (relaxation not closed)");
  s += fmt::format(", {} groups", groups);
  s += fmt::format(", {} tasks, {} variables ({} integer), {} constraints, {:.1f} s", tasks, variables,
                   integer_variables, constraints, solve_s);
  return s;
}

namespace {

constexpr double kMs = 1e3;          // seconds → model time unit (ms)
constexpr double kMiB = 1.0 / (1 << 20);  // bytes → model memory unit (MiB)

// The tasks of the model and everything about them the model and the start need.
struct Tasks {
  std::size_t num_groups = 0;              // the grouping's groups
  std::vector<std::size_t> task_of_op;     // [op] → task
  std::vector<std::size_t> group_of_task;  // the task's group (meaningless for pinned tasks)
  std::vector<bool> pinned;                // CPU-only ops: on the first CPU whatever the groups' devices
  std::vector<std::size_t> order;          // tasks in a topological order of the task graph
  std::vector<std::size_t> position;       // [task] → index in order
  std::vector<std::vector<std::size_t>> preds;
  // [task edge a→b] the wire bytes of each producer op of a that feeds b over a data edge.
  std::map<std::pair<std::size_t, std::size_t>, std::vector<int64_t>> sent;
  std::size_t size() const { return pinned.size(); }
};

// Tasks: a group's ops at one level, where an op's level counts the group changes on the longest
// path that reaches it: level(v) = max over inputs u of level(u) + [u and v in different groups],
// CPU-only ops forming a group of their own. Along an edge between two tasks the level rises
// strictly (another group: by the definition; the same group: the tasks differ in level and it
// cannot fall), so the task graph is acyclic without merging anything — a group's forward,
// backward and update work, and any work of it that waits on another group, are separate tasks.
// An op without inputs (a variable, a constant) takes the highest level its consumers allow, so
// that it joins its group's first task rather than make one of its own.
Tasks make_tasks(const OpGraph& graph, const Grouping& grouping, std::optional<DeviceId> cpu) {
  const std::size_t n = graph.num_ops();
  const auto soft = [&](OpId op) { return cpu.has_value() && graph.op(op).cpu_only; };
  // Pinned ops are one pseudo-group, numbered after the grouping's.
  const auto group = [&](OpId op) -> std::size_t { return soft(op) ? grouping.num_groups() : grouping.group_of(op); };
  const std::vector<OpId> topo = graph.topological_order();
  std::vector<std::size_t> level(n, 0);
  for (OpId v : topo)
    graph.for_each_in_edge(v, [&](OpId u, const Tensor&) {
      level[v] = std::max(level[v], level[u] + (group(u) != group(v) ? 1 : 0));
    });
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const OpId v = *it;
    if (graph.in_degree(v) != 0 || graph.out_degree(v) == 0) continue;
    std::size_t highest = std::numeric_limits<std::size_t>::max();
    graph.for_each_out_edge(v, [&](OpId w, const Tensor&) {
      const std::size_t step = group(w) != group(v) ? 1 : 0;
      highest = std::min(highest, level[w] >= step ? level[w] - step : 0);
    });
    level[v] = highest;
  }

  Tasks t;
  t.num_groups = grouping.num_groups();
  // Tasks numbered by (level, group): that order is topological, since levels rise along task edges.
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> ids;
  for (OpId op = 0; op < n; ++op) ids.emplace(std::make_pair(level[op], group(op)), 0);
  for (auto& [key, id] : ids) {
    id = t.pinned.size();
    t.pinned.push_back(key.second == grouping.num_groups());
    t.group_of_task.push_back(t.pinned.back() ? 0 : key.second);
  }
  t.task_of_op.resize(n);
  for (OpId op = 0; op < n; ++op) t.task_of_op[op] = ids.at({level[op], group(op)});
  t.order.resize(t.size());
  t.position.resize(t.size());
  std::iota(t.order.begin(), t.order.end(), std::size_t{0});
  std::iota(t.position.begin(), t.position.end(), std::size_t{0});

  t.preds.assign(t.size(), {});
  const std::vector<int64_t> wire = wire_bytes(graph);
  for (OpId op = 0; op < n; ++op) {
    const std::size_t a = t.task_of_op[op];
    std::vector<std::size_t> fed;  // the tasks op sends data to, once each
    graph.for_each_out_edge(op, [&](OpId dst, const Tensor& tensor) {
      const std::size_t b = t.task_of_op[dst];
      if (a == b) return;
      PLACELAB_CHECK(a < b) << "exact: task levels broken at op " << op;
      auto& bytes = t.sent[{a, b}];  // an edge, even when it carries nothing (control)
      if (!tensor.control && std::find(fed.begin(), fed.end(), b) == fed.end()) {
        fed.push_back(b);
        bytes.push_back(wire[op]);
      }
    });
  }
  for (const auto& [edge, bytes] : t.sent) t.preds[edge.second].push_back(edge.first);
  return t;
}

// The model's data: durations per device, delays per edge and device pair, memory.
struct ModelData {
  std::vector<DeviceId> devices;           // the targets, D
  std::optional<DeviceId> cpu;
  std::vector<std::vector<double>> p;      // [task][i]: ms on devices[i]; pinned: [task][0] on the CPU
  std::vector<int64_t> group_bytes;        // [group] persistent bytes of its ops that are not pinned
  int64_t pinned_bytes = 0;                // persistent bytes of the CPU-only ops
  bool single_stream(std::size_t i, const Machine& m) const { return m.devices[devices[i]].parallel_capacity() <= 1; }
};

// The model's makespan (ms) of a group placement (an index into devices per group), scheduled as
// a list in task order: each task starts when its inputs have arrived and its single-stream device
// is free. Also the start times. Empty when the persistent bytes do not fit.
struct ModelSchedule {
  double makespan = 0;
  std::vector<double> start;
};

double delay_ms(const CostModel& cost, const std::vector<int64_t>& bytes, DeviceId from, DeviceId to) {
  if (from == to) return 0;
  double s = 0;
  for (int64_t b : bytes) s += cost.transfer_time_s(b, from, to);
  return s * kMs;
}

std::optional<ModelSchedule> schedule_in_model(const Tasks& t, const ModelData& d, const CostModel& cost,
                                              const std::vector<std::size_t>& device_of_group) {
  const Machine& m = cost.machine();
  std::vector<int64_t> used(d.devices.size(), 0);
  for (std::size_t g = 0; g < t.num_groups; ++g) used[device_of_group[g]] += d.group_bytes[g];
  for (std::size_t i = 0; i < d.devices.size(); ++i) {
    int64_t capacity = m.devices[d.devices[i]].memory_bytes;
    if (d.cpu && d.devices[i] == *d.cpu) capacity -= d.pinned_bytes;
    if (used[i] > capacity) return std::nullopt;
  }
  const auto device = [&](std::size_t task) {
    return t.pinned[task] ? *d.cpu : d.devices[device_of_group[t.group_of_task[task]]];
  };
  const auto duration = [&](std::size_t task) {
    return t.pinned[task] ? d.p[task][0] : d.p[task][device_of_group[t.group_of_task[task]]];
  };
  ModelSchedule s;
  s.start.assign(t.size(), 0);
  std::vector<double> finish(t.size(), 0), free_at(m.num_devices(), 0);
  for (std::size_t task : t.order) {
    double ready = 0;
    for (std::size_t a : t.preds[task])
      ready = std::max(ready, finish[a] + delay_ms(cost, t.sent.at({a, task}), device(a), device(task)));
    const DeviceId dev = device(task);
    const bool exclusive = !t.pinned[task] && m.devices[dev].parallel_capacity() <= 1;
    s.start[task] = exclusive ? std::max(ready, free_at[dev]) : ready;
    finish[task] = s.start[task] + duration(task);
    if (exclusive) free_at[dev] = finish[task];
    s.makespan = std::max(s.makespan, finish[task]);
  }
  return s;
}

// Columns and rows for CBC, kept here until the model is loaded (so that the counts are ours).
class MilpBuilder {
 public:
  int add_column(double lb, double ub, double obj, bool integer) {
    lb_.push_back(lb);
    ub_.push_back(ub);
    obj_.push_back(obj);
    integer_.push_back(integer);
    return static_cast<int>(lb_.size() - 1);
  }
  void set_upper(int column, double ub) { ub_[static_cast<std::size_t>(column)] = ub; }
  // Σ coefs · cols ≥ rhs (sense 'G'), ≤ ('L') or = ('E'). Repeated columns are summed.
  void add_row(std::vector<std::pair<int, double>> terms, char sense, double rhs) {
    std::sort(terms.begin(), terms.end());
    std::vector<std::pair<int, double>> merged;
    for (const auto& [c, v] : terms) {
      if (!merged.empty() && merged.back().first == c) merged.back().second += v;
      else merged.emplace_back(c, v);
    }
    rows_.push_back({std::move(merged), sense, rhs});
  }
  // The largest amount by which `values` breaks a row or a column bound, and that row (−1: a bound).
  std::pair<double, int> violation(const std::vector<double>& values) const {
    std::pair<double, int> worst{0.0, -1};
    for (std::size_t c = 0; c < lb_.size(); ++c)
      worst = std::max(worst, {std::max(lb_[c] - values[c], values[c] - ub_[c]), -1});
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      double lhs = 0;
      for (const auto& [c, v] : rows_[r].terms) lhs += v * values[static_cast<std::size_t>(c)];
      const double rhs = rows_[r].rhs;
      const double broken = rows_[r].sense == 'G' ? rhs - lhs : rows_[r].sense == 'L' ? lhs - rhs : std::abs(lhs - rhs);
      worst = std::max(worst, {broken, static_cast<int>(r)});
    }
    return worst;
  }
  std::size_t num_columns() const { return lb_.size(); }
  std::size_t num_integer() const { return static_cast<std::size_t>(std::count(integer_.begin(), integer_.end(), true)); }
  std::size_t num_rows() const { return rows_.size(); }

  void load(Cbc_Model* model) const {
    // Unique names: CBC matches a MIP start to columns by name, even one given by index.
    for (std::size_t c = 0; c < lb_.size(); ++c)
      Cbc_addCol(model, fmt::format("c{}", c).c_str(), lb_[c], ub_[c], obj_[c], integer_[c] ? 1 : 0, 0, nullptr,
                 nullptr);
    std::vector<int> cols;
    std::vector<double> vals;
    for (const Row& r : rows_) {
      cols.clear();
      vals.clear();
      for (const auto& [c, v] : r.terms)
        if (v != 0) {
          cols.push_back(c);
          vals.push_back(v);
        }
      Cbc_addRow(model, "", static_cast<int>(cols.size()), cols.data(), vals.data(), r.sense, r.rhs);
    }
  }

 private:
  struct Row {
    std::vector<std::pair<int, double>> terms;
    char sense;
    double rhs;
  };
  std::vector<double> lb_, ub_, obj_;
  std::vector<bool> integer_;
  std::vector<Row> rows_;
};

struct CbcDeleter {
  void operator()(Cbc_Model* m) const { Cbc_deleteModel(m); }
};

// CBC quiet, one thread, seeded, with a wall-clock limit.
std::unique_ptr<Cbc_Model, CbcDeleter> make_cbc(const MilpBuilder& mb, const ExactOptions& options, double seconds) {
  std::unique_ptr<Cbc_Model, CbcDeleter> model(Cbc_newModel());
  Cbc_setLogLevel(model.get(), 0);
  mb.load(model.get());
  Cbc_setObjSense(model.get(), 1);
  Cbc_setParameter(model.get(), "threads", "0");
  Cbc_setParameter(model.get(), "randomCbcSeed", std::to_string(options.seed + 1).c_str());
  Cbc_setParameter(model.get(), "randomSeed", std::to_string(options.seed + 1).c_str());
  Cbc_setParameter(model.get(), "timeMode", "elapsed");
  Cbc_setAllowableFractionGap(model.get(), options.relative_gap);
  Cbc_setMaximumSeconds(model.get(), std::max(0.01, seconds));
  return model;
}

// For each target device (an index into `devices`): whether it is the first of its orbit under the
// permutations of the targets that leave the relaxation below unchanged — every device and its
// image price the graph's ops alike (CostModel::op_time_representatives: measured times keyed by a
// device name set a device apart) and have the same memory and streams,
// and every pair's transfers take as long as their images' (checked at 0 bytes and at 1 GiB:
// latency and bandwidth). Any group placement maps by such a permutation to one that puts a chosen
// group on the first device of its orbit with the same relaxed makespan, so the relaxation may fix
// one group that way without changing its optimum.
std::vector<bool> orbit_representatives(const OpGraph& graph, const CostModel& cost,
                                        const std::vector<DeviceId>& devices) {
  const Machine& m = cost.machine();
  const std::size_t nd = devices.size();
  std::vector<bool> rep(nd, true);
  if (nd > 8) return rep;  // 8! permutations at most
  const std::vector<DeviceId> priced_as = cost.op_time_representatives(graph);
  const auto alike = [&](DeviceId a, DeviceId b) {
    return priced_as[a] == priced_as[b] &&
           m.devices[a].memory_bytes == m.devices[b].memory_bytes && m.devices[a].streams == m.devices[b].streams &&
           m.devices[a].full_speed_ops == m.devices[b].full_speed_ops;
  };
  std::vector<std::size_t> perm(nd);
  std::iota(perm.begin(), perm.end(), std::size_t{0});
  do {
    bool symmetry = true;
    for (std::size_t i = 0; i < nd && symmetry; ++i) symmetry = alike(devices[i], devices[perm[i]]);
    for (std::size_t i = 0; i < nd && symmetry; ++i)
      for (std::size_t j = 0; j < nd && symmetry; ++j)
        if (i != j)
          for (const int64_t bytes : {int64_t{0}, int64_t{1} << 30})
            symmetry = symmetry && cost.transfer_time_s(bytes, devices[i], devices[j]) ==
                                       cost.transfer_time_s(bytes, devices[perm[i]], devices[perm[j]]);
    if (symmetry)
      for (std::size_t i = 0; i < nd; ++i)
        if (perm[i] < i) rep[i] = false;  // i's orbit has an earlier device
  } while (std::next_permutation(perm.begin(), perm.end()));
  return rep;
}

// The relaxation (exact.h, ExactResult::group_bound_s), at op level: a start t_v per op; for every
// edge u → v, t_v ≥ t_u + the time of u on its group's device, plus, for a data edge between
// different devices, the time u's copy holds its route (cost.transfer_time_s of wire_bytes(u));
// the makespan ≥ t_v + the time of v, and ≥ each device's work over its streams; the groups'
// persistent bytes fit. A simulated run of a group placement meets every one of these (an op runs
// for its op_time_s; a copy leaves when its producer finishes and takes at least its route's
// time, links shared with other copies only delaying it; a device's streams do at most their
// number of ops at once), so the relaxation's optimum, and CBC's bound on it, is at most the best
// simulated step time of every such placement that does not run out of memory. What it leaves out:
// the order of ops on a device (two ops may overlap on one stream) and link contention. Returns
// the bound (s) and whether CBC proved it optimal; nullopt when no placement fits.
std::optional<std::pair<double, bool>> relaxation_bound(const OpGraph& graph, const CostModel& cost,
                                                        const Grouping& grouping, const ModelData& d,
                                                        const ExactOptions& options, double seconds) {
  const Machine& machine = cost.machine();
  const std::size_t nd = d.devices.size(), n = graph.num_ops();
  const auto pinned = [&](OpId op) { return d.cpu.has_value() && graph.op(op).cpu_only; };
  MilpBuilder mb;
  std::vector<std::vector<int>> x(grouping.num_groups(), std::vector<int>(nd));
  for (std::size_t g = 0; g < grouping.num_groups(); ++g)
    for (std::size_t i = 0; i < nd; ++i) {
      int64_t capacity = machine.devices[d.devices[i]].memory_bytes;
      if (d.cpu && d.devices[i] == *d.cpu) capacity -= d.pinned_bytes;
      x[g][i] = mb.add_column(0, d.group_bytes[g] > capacity ? 0 : 1, 0, true);
    }
  // Symmetry: the group with the most work may only take the first device of each orbit.
  {
    std::vector<double> work(grouping.num_groups(), 0.0);
    for (OpId op = 0; op < n; ++op)
      if (!pinned(op)) work[grouping.group_of(op)] += cost.op_time_s(graph.op(op), d.devices[0]);
    const std::size_t heaviest = static_cast<std::size_t>(std::max_element(work.begin(), work.end()) - work.begin());
    const std::vector<bool> rep = orbit_representatives(graph, cost, d.devices);
    if (!work.empty() && work[heaviest] > 0)
      for (std::size_t i = 0; i < nd; ++i)
        if (!rep[i]) mb.set_upper(x[heaviest][i], 0);
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<int> start(n);
  for (OpId op = 0; op < n; ++op) start[op] = mb.add_column(0, inf, 0, false);
  const int c_max = mb.add_column(0, inf, 1, false);

  // Op times (ms) per target device; a pinned op's on the CPU.
  std::vector<std::vector<double>> op_ms(n, std::vector<double>(nd));
  for (OpId op = 0; op < n; ++op)
    for (std::size_t i = 0; i < nd; ++i)
      op_ms[op][i] = cost.op_time_s(graph.op(op), pinned(op) ? *d.cpu : d.devices[i]) * kMs;
  using Terms = std::vector<std::pair<int, double>>;
  // −(op's time) as terms over its group's x, or a constant moved to rhs for a pinned op.
  const auto minus_time = [&](OpId op, Terms& terms, double& rhs) {
    if (pinned(op)) rhs += op_ms[op][0];
    else
      for (std::size_t i = 0; i < nd; ++i) terms.emplace_back(x[grouping.group_of(op)][i], -op_ms[op][i]);
  };
  const auto device_options = [&](OpId op) {
    std::vector<std::pair<DeviceId, int>> o;  // (device, x column or −1 when fixed)
    if (pinned(op)) o.emplace_back(*d.cpu, -1);
    else
      for (std::size_t i = 0; i < nd; ++i) o.emplace_back(d.devices[i], x[grouping.group_of(op)][i]);
    return o;
  };

  for (std::size_t g = 0; g < grouping.num_groups(); ++g) {
    Terms terms;
    for (std::size_t i = 0; i < nd; ++i) terms.emplace_back(x[g][i], 1.0);
    mb.add_row(std::move(terms), 'E', 1);
  }
  double pinned_work = 0;
  for (OpId op = 0; op < n; ++op)
    if (pinned(op)) pinned_work += op_ms[op][0];
  bool cpu_targeted = false;
  for (std::size_t i = 0; i < nd; ++i) {
    const bool is_cpu = d.cpu && d.devices[i] == *d.cpu;
    cpu_targeted = cpu_targeted || is_cpu;
    Terms mem, load{{c_max, machine.devices[d.devices[i]].parallel_capacity()}};
    for (std::size_t g = 0; g < grouping.num_groups(); ++g)
      mem.emplace_back(x[g][i], static_cast<double>(d.group_bytes[g]) * kMiB);
    const int64_t capacity = machine.devices[d.devices[i]].memory_bytes - (is_cpu ? d.pinned_bytes : 0);
    mb.add_row(std::move(mem), 'L', static_cast<double>(capacity) * kMiB);
    for (OpId op = 0; op < n; ++op)
      if (!pinned(op)) load.emplace_back(x[grouping.group_of(op)][i], -op_ms[op][i]);
    mb.add_row(std::move(load), 'G', is_cpu ? pinned_work : 0);
  }
  if (d.cpu && !cpu_targeted) mb.add_row({{c_max, machine.devices[*d.cpu].parallel_capacity()}}, 'G', pinned_work);

  const std::vector<int64_t> wire = wire_bytes(graph);
  for (OpId u = 0; u < n; ++u) {
    if (graph.out_degree(u) == 0) {
      Terms terms{{c_max, 1.0}, {start[u], -1.0}};
      double rhs = 0;
      minus_time(u, terms, rhs);
      mb.add_row(std::move(terms), 'G', rhs);
    }
    graph.for_each_out_edge(u, [&](OpId v, const Tensor& tensor) {
      Terms base{{start[v], 1.0}, {start[u], -1.0}};
      double base_rhs = 0;
      minus_time(u, base, base_rhs);
      mb.add_row(base, 'G', base_rhs);
      const bool same_device = pinned(u) == pinned(v) && (pinned(u) || grouping.group_of(u) == grouping.group_of(v));
      if (tensor.control || same_device) return;
      for (const auto& [du, xu] : device_options(u))
        for (const auto& [dv, xv] : device_options(v)) {
          if (du == dv) continue;
          const double delay = cost.transfer_time_s(wire[u], du, dv) * kMs;
          Terms terms = base;
          double rhs = base_rhs - delay;
          if (xu >= 0) terms.emplace_back(xu, -delay);
          else rhs += delay;
          if (xv >= 0) terms.emplace_back(xv, -delay);
          else rhs += delay;
          mb.add_row(std::move(terms), 'G', rhs);
        }
    });
  }
  std::unique_ptr<Cbc_Model, CbcDeleter> model = make_cbc(mb, options, seconds);
  Cbc_solve(model.get());
  if (Cbc_isProvenInfeasible(model.get())) return std::nullopt;
  const bool optimal = Cbc_isProvenOptimal(model.get()) != 0;
  double bound = Cbc_getBestPossibleObjValue(model.get());
  if (optimal) bound = std::min(bound, Cbc_getObjValue(model.get()));
  if (!std::isfinite(bound) || bound < 0) bound = 0;
  return std::make_pair(bound / kMs, optimal);
}

std::vector<DeviceId> target_devices(const Machine& machine, const ExactOptions& options) {
  std::vector<DeviceId> d = options.devices;
  if (d.empty()) d = gpu_devices(machine);
  if (d.empty())
    for (DeviceId i = 0; i < machine.num_devices(); ++i) d.push_back(i);
  if (d.empty()) throw InputError("exact: machine \"" + machine.name + "\" has no devices");
  for (DeviceId i : d)
    if (i >= machine.num_devices())
      throw InputError(fmt::format("exact.devices: device {} is not one of the machine's {}", i, machine.num_devices()));
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  return d;
}


// The targets' durations of every task and the persistent bytes of every group (ModelData's p,
// group_bytes and pinned_bytes).
void fill_task_times(const OpGraph& graph, const CostModel& cost, const Grouping& grouping, const Tasks& t,
                     ModelData& d) {
  const std::size_t nd = d.devices.size();
  d.p.assign(t.size(), std::vector<double>(nd, 0.0));
  d.group_bytes.assign(t.num_groups, 0);
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    const Op& o = graph.op(op);
    const std::size_t task = t.task_of_op[op];
    const bool soft = d.cpu && o.cpu_only;
    if (t.pinned[task]) d.p[task][0] += cost.op_time_s(o, *d.cpu) * kMs;
    else
      for (std::size_t i = 0; i < nd; ++i)
        d.p[task][i] += cost.op_time_s(o, soft ? *d.cpu : d.devices[i]) * kMs;
    if (soft) d.pinned_bytes += o.persistent_bytes;
    else d.group_bytes[grouping.group_of(op)] += o.persistent_bytes;
  }
}

// Reachability over the task DAG (bitsets, filled in topological order): pairs that one path
// orders need no order binary.
class TaskReach {
 public:
  explicit TaskReach(const Tasks& t) : words_((t.size() + 63) / 64), reach_(t.size(), std::vector<uint64_t>(words_, 0)) {
    for (std::size_t b : t.order)
      for (std::size_t a : t.preds[b]) {
        reach_[b][a / 64] |= uint64_t{1} << (a % 64);
        for (std::size_t w = 0; w < words_; ++w) reach_[b][w] |= reach_[a][w];
      }
  }
  bool reaches(std::size_t a, std::size_t b) const { return ((reach_[b][a / 64] >> (a % 64)) & 1) != 0; }

 private:
  std::size_t words_;
  std::vector<std::vector<uint64_t>> reach_;  // [b]: tasks that reach b
};

// The model's start: the best of every group on one device and HEFT's placement, scheduled in
// the model; no schedule when none fits.
struct StartSchedule {
  std::optional<ModelSchedule> schedule;
  std::vector<std::size_t> devices;  // per group: an index into ModelData::devices
};

StartSchedule start_schedule(const OpGraph& graph, const CostModel& cost, const Grouping& grouping, const Tasks& t,
                             const ModelData& d) {
  StartSchedule start;
  const auto consider = [&](std::vector<std::size_t> devs) {
    std::optional<ModelSchedule> s = schedule_in_model(t, d, cost, devs);
    if (s && (!start.schedule || s->makespan < start.schedule->makespan)) {
      start.schedule = std::move(s);
      start.devices = std::move(devs);
    }
  };
  for (std::size_t i = 0; i < d.devices.size(); ++i) consider(std::vector<std::size_t>(t.num_groups, i));
  const Placement heft = heft_placement(graph, cost);
  const Placement by_group = grouping.majority(heft, d.devices);
  std::vector<std::size_t> devs(t.num_groups);
  for (GroupId g = 0; g < grouping.num_groups(); ++g)
    devs[g] = static_cast<std::size_t>(std::find(d.devices.begin(), d.devices.end(), by_group[g]) - d.devices.begin());
  consider(std::move(devs));
  return start;
}

// A time (ms) no schedule the model needs exceeds: the start's makespan, else every task at its
// slowest and every transfer between every pair of targets; the bound of the start times and the
// disjunctions' big M.
double model_horizon_ms(const Tasks& t, const ModelData& d, const CostModel& cost, const StartSchedule& start) {
  double horizon = 0;
  if (start.schedule) horizon = start.schedule->makespan;
  else {
    for (std::size_t task = 0; task < t.size(); ++task) horizon += *std::max_element(d.p[task].begin(), d.p[task].end());
    for (const auto& [edge, bytes] : t.sent)
      for (DeviceId a : d.devices)
        for (DeviceId b : d.devices) horizon += delay_ms(cost, bytes, a, b);
  }
  return horizon * (1 + 1e-9) + 1e-6;
}

// The mixed-integer model of placement and scheduling over tasks (docs/learners.md, "Exact
// reference"), built row by row in a fixed order so that CBC sees the same model every run.
struct ScheduleModel {
  using Terms = std::vector<std::pair<int, double>>;
  // A pair of tasks unordered by the DAG that may share a single-stream device.
  struct Pair {
    std::size_t a, b;
    int y, z;  // z = −1: same group, always on one device
  };

  ScheduleModel(const Tasks& t, const ModelData& d, const CostModel& cost, double horizon)
      : t_(t), d_(d), cost_(cost), machine_(cost.machine()), nd_(d.devices.size()), big_m_(horizon) {
    x.assign(t.num_groups, std::vector<int>(nd_));
    for (std::size_t g = 0; g < t.num_groups; ++g)
      for (std::size_t i = 0; i < nd_; ++i) x[g][i] = mb.add_column(0, d.group_bytes[g] > capacity(i) ? 0 : 1, 0, true);
    s.resize(t.size());
    for (std::size_t task = 0; task < t.size(); ++task) s[task] = mb.add_column(0, horizon, 0, false);
    c_max = mb.add_column(0, horizon, 1, false);
  }

  // Every group on one device; memory and work per device; the makespan after every task.
  void add_assignment_and_device_rows() {
    for (std::size_t g = 0; g < t_.num_groups; ++g) {
      Terms terms;
      for (std::size_t i = 0; i < nd_; ++i) terms.emplace_back(x[g][i], 1.0);
      mb.add_row(std::move(terms), 'E', 1);
    }
    for (std::size_t i = 0; i < nd_; ++i) {
      Terms mem, load;
      for (std::size_t g = 0; g < t_.num_groups; ++g)
        mem.emplace_back(x[g][i], static_cast<double>(d_.group_bytes[g]) * kMiB);
      double pinned_work = 0;
      if (is_cpu(i))
        for (std::size_t task = 0; task < t_.size(); ++task)
          if (t_.pinned[task]) pinned_work += d_.p[task][0];
      mb.add_row(std::move(mem), 'L', static_cast<double>(capacity(i)) * kMiB);
      // A device's work fits in the makespan on its streams: implied by the disjunctions on a
      // single-stream device, but it gives the LP relaxation its strength.
      load.emplace_back(c_max, machine_.devices[d_.devices[i]].parallel_capacity());
      for (std::size_t task = 0; task < t_.size(); ++task)
        if (!t_.pinned[task]) load.emplace_back(x[t_.group_of_task[task]][i], -d_.p[task][i]);
      mb.add_row(std::move(load), 'G', pinned_work);
    }
    for (std::size_t task = 0; task < t_.size(); ++task) {
      Terms terms{{c_max, 1.0}, {s[task], -1.0}};
      double rhs = 0;
      minus_duration(task, terms, rhs);
      mb.add_row(std::move(terms), 'G', rhs);
    }
  }

  // Precedence with communication delays: S_b ≥ S_a + P_a + D_ab(k, l) when a is on k and b on l.
  void add_precedence_rows() {
    for (const auto& [edge, bytes] : t_.sent) {
      const auto [a, b] = edge;
      {
        Terms terms{{s[b], 1.0}, {s[a], -1.0}};
        double rhs = 0;
        minus_duration(a, terms, rhs);
        mb.add_row(std::move(terms), 'G', rhs);
      }
      if (bytes.empty()) continue;
      if (!t_.pinned[a] && !t_.pinned[b] && t_.group_of_task[a] == t_.group_of_task[b]) continue;  // one device
      for (const auto& [da, xa] : device_options(a))
        for (const auto& [db, xb] : device_options(b)) {
          const double delay = delay_ms(cost_, bytes, da, db);
          if (delay <= 0) continue;
          Terms terms{{s[b], 1.0}, {s[a], -1.0}};
          double rhs = -delay;
          minus_duration(a, terms, rhs);
          if (xa >= 0) terms.emplace_back(xa, -delay);
          else rhs += delay;
          if (xb >= 0) terms.emplace_back(xb, -delay);
          else rhs += delay;
          mb.add_row(std::move(terms), 'G', rhs);
        }
    }
  }

  // Disjunctions: two unordered tasks on one single-stream device do not overlap.
  void add_disjunctions(const TaskReach& reach) {
    std::vector<std::size_t> exclusive;
    for (std::size_t i = 0; i < nd_; ++i)
      if (d_.single_stream(i, machine_)) exclusive.push_back(i);
    if (exclusive.empty()) return;
    for (std::size_t ia = 0; ia < t_.size(); ++ia)
      for (std::size_t ib = ia + 1; ib < t_.size(); ++ib) {
        std::size_t a = t_.order[ia], b = t_.order[ib];
        if (t_.pinned[a] || t_.pinned[b] || reach.reaches(a, b) || reach.reaches(b, a)) continue;
        const bool same = t_.group_of_task[a] == t_.group_of_task[b];
        Pair pr{a, b, mb.add_column(0, 1, 0, true), same ? -1 : mb.add_column(0, 1, 0, false)};
        // y = 1: a before b.  S_b ≥ S_a + P_a − M(1 − y) − M(1 − z);  S_a ≥ S_b + P_b − M y − M(1 − z).
        Terms first{{s[b], 1.0}, {s[a], -1.0}, {pr.y, -big_m_}};
        double rhs_first = -big_m_;
        Terms second{{s[a], 1.0}, {s[b], -1.0}, {pr.y, big_m_}};
        double rhs_second = 0;
        minus_duration(a, first, rhs_first);
        minus_duration(b, second, rhs_second);
        if (!same) {
          first.emplace_back(pr.z, -big_m_);
          rhs_first -= big_m_;
          second.emplace_back(pr.z, -big_m_);
          rhs_second -= big_m_;
          for (std::size_t i : exclusive)
            mb.add_row({{pr.z, 1.0}, {x[t_.group_of_task[a]][i], -1.0}, {x[t_.group_of_task[b]][i], -1.0}}, 'G', -1);
        }
        mb.add_row(std::move(first), 'G', rhs_first);
        mb.add_row(std::move(second), 'G', rhs_second);
        pairs.push_back(pr);
      }
  }

  // The start as a value for every column; it must satisfy every row.
  std::vector<double> start_values(const StartSchedule& start) const {
    std::vector<double> values(mb.num_columns(), 0.0);
    for (std::size_t g = 0; g < t_.num_groups; ++g) values[static_cast<std::size_t>(x[g][start.devices[g]])] = 1;
    for (std::size_t task = 0; task < t_.size(); ++task)
      values[static_cast<std::size_t>(s[task])] = start.schedule->start[task];
    values[static_cast<std::size_t>(c_max)] = start.schedule->makespan;
    for (const Pair& pr : pairs) {
      values[static_cast<std::size_t>(pr.y)] = t_.position[pr.a] < t_.position[pr.b] ? 1 : 0;
      if (pr.z >= 0)
        values[static_cast<std::size_t>(pr.z)] =
            start.devices[t_.group_of_task[pr.a]] == start.devices[t_.group_of_task[pr.b]] ? 1 : 0;
    }
    const auto [broken, row] = mb.violation(values);
    PLACELAB_CHECK(broken < 1e-6) << "exact: the start breaks row " << row << " by " << broken;
    return values;
  }

  MilpBuilder mb;
  std::vector<std::vector<int>> x;  // [group][i]: the group is on devices[i]
  std::vector<int> s;               // [task]: its start (ms)
  int c_max = 0;                    // the makespan (ms), the objective
  std::vector<Pair> pairs;

 private:
  bool is_cpu(std::size_t i) const { return d_.cpu && d_.devices[i] == *d_.cpu; }
  int64_t capacity(std::size_t i) const {
    return machine_.devices[d_.devices[i]].memory_bytes - (is_cpu(i) ? d_.pinned_bytes : 0);
  }
  // −P_a as terms (non-pinned) or as a constant moved to the right-hand side (pinned).
  void minus_duration(std::size_t task, Terms& terms, double& rhs) const {
    if (t_.pinned[task]) rhs += d_.p[task][0];
    else
      for (std::size_t i = 0; i < nd_; ++i) terms.emplace_back(x[t_.group_of_task[task]][i], -d_.p[task][i]);
  }
  // (device, x column or −1 when fixed) for each device a task may run on.
  std::vector<std::pair<DeviceId, int>> device_options(std::size_t task) const {
    std::vector<std::pair<DeviceId, int>> o;
    if (t_.pinned[task]) o.emplace_back(*d_.cpu, -1);
    else
      for (std::size_t i = 0; i < nd_; ++i) o.emplace_back(d_.devices[i], x[t_.group_of_task[task]][i]);
    return o;
  }

  const Tasks& t_;
  const ModelData& d_;
  const CostModel& cost_;
  const Machine& machine_;
  std::size_t nd_;
  double big_m_;
};

// CBC's answer into the result: status, objective, bound, and the placement of its incumbent.
void read_solution(Cbc_Model* model, const OpGraph& graph, const Grouping& grouping, const ModelData& d,
                   const ScheduleModel& sm, ExactResult& result) {
  const double* sol = Cbc_getColSolution(model);
  const bool optimal = Cbc_isProvenOptimal(model) != 0;
  const bool has_incumbent = sol != nullptr && Cbc_numberSavedSolutions(model) > 0 && !Cbc_isProvenInfeasible(model);
  if (!optimal && !has_incumbent) {
    result.status = ExactStatus::kNoIncumbent;
    result.best_bound_s = Cbc_getBestPossibleObjValue(model) / kMs;
    return;
  }
  result.status = optimal ? ExactStatus::kOptimal : ExactStatus::kTimeLimit;
  result.objective_s = Cbc_getObjValue(model) / kMs;
  result.best_bound_s = std::min(result.objective_s, Cbc_getBestPossibleObjValue(model) / kMs);
  result.gap = result.objective_s > 0 ? (result.objective_s - result.best_bound_s) / result.objective_s : 0;

  result.group_devices.assign(grouping.num_groups(), d.devices.front());
  for (GroupId g = 0; g < grouping.num_groups(); ++g) {
    const std::vector<int>& row = sm.x[g];
    std::size_t best = 0;
    for (std::size_t i = 1; i < d.devices.size(); ++i)
      if (sol[row[i]] > sol[row[best]]) best = i;
    result.group_devices[g] = d.devices[best];
  }
  result.placement = grouping.expand(result.group_devices);
  if (d.cpu)
    for (OpId op = 0; op < graph.num_ops(); ++op)
      if (graph.op(op).cpu_only) result.placement[op] = *d.cpu;
}

}  // namespace

ExactResult solve_exact(const OpGraph& graph, const CostModel& cost, const Grouping& grouping,
                        const ExactOptions& options) {
  options.validate();
  const auto started = std::chrono::steady_clock::now();
  if (grouping.num_ops() != graph.num_ops())
    throw InputError(fmt::format("exact: the grouping has {} ops, the graph {}", grouping.num_ops(), graph.num_ops()));
  const Machine& machine = cost.machine();
  ModelData d;
  d.devices = target_devices(machine, options);
  d.cpu = machine.default_cpu();
  const Tasks t = make_tasks(graph, grouping, d.cpu);
  if (t.num_groups > options.max_groups)
    throw InputError(fmt::format(
        "exact: {} groups is more than exact.max_groups = {}: the model's ordering binaries grow as the square "
        "of its tasks; use a coarser grouping (scope_units, layer, or metis with fewer groups)",
        t.num_groups, options.max_groups));
  fill_task_times(graph, cost, grouping, t, d);
  const StartSchedule start = start_schedule(graph, cost, grouping, t, d);

  ScheduleModel sm(t, d, cost, model_horizon_ms(t, d, cost, start));
  sm.add_assignment_and_device_rows();
  sm.add_precedence_rows();
  sm.add_disjunctions(TaskReach(t));

  ExactResult result;
  result.groups = t.num_groups;
  result.tasks = t.size();
  result.variables = sm.mb.num_columns();
  result.integer_variables = sm.mb.num_integer();
  result.constraints = sm.mb.num_rows();

  // The relaxation first, with a fifth of the time: it has no order binaries and solves fast.
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  if (const auto bound = relaxation_bound(graph, cost, grouping, d, options, options.time_limit_s * 0.2 - elapsed())) {
    result.group_bound_s = bound->first;
    result.group_bound_optimal = bound->second;
  }
  std::unique_ptr<Cbc_Model, CbcDeleter> model = make_cbc(sm.mb, options, options.time_limit_s - elapsed());
  if (start.schedule) {
    std::vector<double> values = sm.start_values(start);
    std::vector<int> idx(values.size());
    std::iota(idx.begin(), idx.end(), 0);
    Cbc_setMIPStartI(model.get(), static_cast<int>(idx.size()), idx.data(), values.data());
  }
  Cbc_solve(model.get());
  result.solve_s = elapsed();
  read_solution(model.get(), graph, grouping, d, sm, result);
  return result;
}

// ---- Registry entry ----------------------------------------------------------------------------

namespace {
// `exact:<seconds>`'s options, validated.
ExactOptions exact_argument(const std::string& argument) {
  return detail::options_from_argument(argument, &ExactOptions::time_limit_s, "exact.time_limit_s",
                                       "must be a number of seconds");
}
}  // namespace

BaselineEntry detail::exact_baseline_entry() {
  return {.name = "exact",
          .aliases = {},
          .summary = "mixed-integer placement and scheduling of the scenario's groups (CBC) within a time limit "
                     "(default 60 s), with a lower bound for every group placement; at most 64 groups",
          .paper = "Hafeez et al., Pesto, Middleware 2021 (the formulation); COIN-OR CBC",
          .argument = "<seconds>",
          .canonical_argument =
              [](const std::string& argument) { return format_exact(exact_argument(argument).time_limit_s); },
          .place = [](const BaselineContext& c, const std::optional<std::string>& argument) {
            ExactOptions options = argument ? exact_argument(*argument) : ExactOptions{};
            options.seed = static_cast<int>(c.seed % 1000000);
            // Without a scenario's grouping (--placement exact on the command line): layer scopes.
            const Grouping fallback = c.grouping ? Grouping{} : group_by_model_units(c.graph, false);
            const ExactResult r = solve_exact(c.graph, c.cost, c.grouping ? *c.grouping : fallback, options);
            if (c.note) *c.note = r.summary();
            if (r.status == ExactStatus::kNoIncumbent)
              throw InputError("exact: no placement: " + r.summary());
            return r.placement;
          }};
}

}  // namespace placelab
