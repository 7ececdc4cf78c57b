#include "dataflow_list.h"

#include "list_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "placelab/core/error.h"
#include "placelab/graph/transfers.h"
#include "placelab/learners/grouping.h"
#include "placelab/sim/dataflow_schedule.h"
#include "placelab/sim/simulator.h"

namespace placelab::detail {
namespace {

// A run of the step decides an op when its first producer finishes, often before its other
// producers are decided (a layer's weights are read at time 0), and sources (variables, inputs) at
// time 0, before anything that reads them. So a schedule is the best of several runs: three starts
// — the scheduler's own offline plan, every op on the first candidate, and the rule alone — then up
// to kRefinements runs, each with the best run so far as the hint (what an undecided producer will
// be, and each source's group on the device of its first reader there), while they improve.
constexpr int kRefinements = 3;

constexpr double kNever = std::numeric_limits<double>::infinity();

}  // namespace

std::vector<double> upward_ranks(const OpGraph& graph, const CostModel& cost, const std::vector<DeviceId>& candidates,
                                 const std::optional<DeviceId>& cpu) {
  const auto mean_transfer = [&](int64_t bytes) {
    if (candidates.size() < 2) return 0.0;
    double s = 0;
    for (DeviceId a : candidates)
      for (DeviceId b : candidates)
        if (a != b) s += cost.transfer_time_s(bytes, a, b);
    return s / static_cast<double>(candidates.size() * (candidates.size() - 1));
  };
  const std::size_t n = graph.num_ops();
  std::vector<double> rank(n, 0.0);
  const std::vector<OpId> topo = graph.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const OpId op = *it;
    double mean_time = 0;
    if (cpu && graph.op(op).cpu_only) {
      mean_time = cost.op_time_s(graph.op(op), *cpu);
    } else {
      for (DeviceId d : candidates) mean_time += cost.op_time_s(graph.op(op), d);
      mean_time /= static_cast<double>(candidates.size());
    }
    double below = 0;
    graph.for_each_out_edge(op, [&](OpId dst, const Tensor& t) {
      below = std::max(below, (t.control ? 0.0 : mean_transfer(t.bytes)) + rank[dst]);
    });
    rank[op] = mean_time + below;
  }
  return rank;
}

namespace {

// The rule of one list scheduler, applied to the ops the running step asks about.
class ListDecider final : public DataflowDecider {
 public:
  ListDecider(const OpGraph& graph, const CostModel& cost, const DataflowListRule& rule)
      : graph_(graph),
        cost_(cost),
        machine_(cost.machine()),
        rule_(rule),
        cpu_(machine_.default_cpu()),
        coloc_(group_by_colocation(graph)),
        group_persistent_(coloc_.num_groups(), 0),
        has_source_(coloc_.num_groups(), 0),
        topo_pos_(graph.num_ops(), 0) {
    PLACELAB_CHECK(!rule.candidates.empty()) << "no candidate devices";
    for (OpId op = 0; op < graph.num_ops(); ++op) {
      group_persistent_[coloc_.group_of(op)] += graph.op(op).persistent_bytes;
      if (graph.in_degree(op) == 0 && !soft_placed(op)) has_source_[coloc_.group_of(op)] = 1;
    }
    const std::vector<OpId> topo = graph.topological_order();
    for (std::size_t i = 0; i < topo.size(); ++i) topo_pos_[topo[i]] = i;
    if (rule.kind == DataflowListRule::Kind::kHeft) rank_ = upward_ranks(graph, cost, rule.candidates, cpu_);
  }

  // Starts a run. With a hint, a source's group goes to the device of the group's first reader
  // in the hint (the op outside the group, not soft-placed, reading one of its members, that ended
  // first there); without one, or without such a reader, the rule places the source.
  void start_run(const DataflowRun* hint) {
    hint_ = hint;
    source_device_.assign(coloc_.num_groups(), -1);
    if (hint) {
      std::vector<double> first_end(coloc_.num_groups(), kNever);
      for (OpId reader = 0; reader < graph_.num_ops(); ++reader) {
        if (soft_placed(reader)) continue;
        graph_.for_each_in_edge(reader, [&](OpId src, const Tensor&) {
          const GroupId g = coloc_.group_of(src);
          if (!has_source_[g] || g == coloc_.group_of(reader) || !(hint->end_s[reader] < first_end[g])) return;
          first_end[g] = hint->end_s[reader];
          source_device_[g] = hint->placement[reader];
        });
      }
    }
    group_device_.assign(coloc_.num_groups(), -1);
    persistent_on_.assign(machine_.num_devices(), 0);
    last_op_.assign(machine_.num_devices(), std::nullopt);
  }

  void decide(std::span<const OpId> ops, DataflowStep& step) override {
    remaining_.assign(ops.begin(), ops.end());
    if (rule_.kind == DataflowListRule::Kind::kSct) keep_for_favorite(step);
    for (;;) {
      commit_forced(step);
      if (remaining_.empty()) break;
      const auto [op, d] = rule_.kind == DataflowListRule::Kind::kHeft ? heft_choice(step) : etf_choice(step, true);
      commit(op, d, step);
      remaining_.erase(std::find(remaining_.begin(), remaining_.end(), op));
    }
  }

 private:
  bool soft_placed(OpId op) const { return cpu_ && graph_.op(op).cpu_only; }

  // The device op must take, if any: the first CPU for a soft-placed op, its group's device once
  // the group has one, a source's device for this run (start_run).
  std::optional<DeviceId> forced(OpId op) const {
    if (soft_placed(op)) return *cpu_;
    const GroupId g = coloc_.group_of(op);
    if (group_device_[g] >= 0) return static_cast<DeviceId>(group_device_[g]);
    if (graph_.in_degree(op) != 0 || source_device_[g] < 0) return std::nullopt;
    return static_cast<DeviceId>(source_device_[g]);
  }

  void commit_forced(DataflowStep& step) {
    std::size_t kept = 0;
    for (OpId op : remaining_) {
      if (const std::optional<DeviceId> d = forced(op)) {
        commit(op, *d, step);
      } else {
        remaining_[kept++] = op;
      }
    }
    remaining_.resize(kept);
  }

  void commit(OpId op, DeviceId d, DataflowStep& step) {
    step.decide(op, d);
    const DeviceId placed = step.device(op);
    const GroupId g = coloc_.group_of(op);
    if (group_device_[g] < 0 && !soft_placed(op)) {
      group_device_[g] = placed;
      persistent_on_[placed] += group_persistent_[g];
    }
    last_op_[placed] = op;
  }

  // HEFT's devices: the candidates with room for the group's persistent bytes (all of them when
  // none has, or memory is not respected).
  std::vector<DeviceId> heft_devices(OpId op) const {
    if (!rule_.respect_memory) return rule_.candidates;
    const GroupId g = coloc_.group_of(op);
    std::vector<DeviceId> fit;
    for (DeviceId d : rule_.candidates)
      if (persistent_on_[d] + group_persistent_[g] <= machine_.devices[d].memory_bytes) fit.push_back(d);
    return fit.empty() ? rule_.candidates : fit;
  }

  // In a run with a hint: the longest unloaded copy op's output would need from d to its readers,
  // each where it is decided or else where the hint ran it. A move away from the readers pays it
  // after the op ends, which its own end does not show.
  double send_back_s(OpId op, DeviceId d, const DataflowStep& step) const {
    if (hint_ == nullptr) return 0.0;
    double longest = 0;
    graph_.for_each_out_edge(op, [&](OpId dst, const Tensor& t) {
      if (t.control) return;
      const DeviceId there = step.decided(dst) ? step.device(dst) : hint_->placement[dst];
      if (there != d) longest = std::max(longest, cost_.transfer_time_s(t.bytes, d, there));
    });
    return longest;
  }

  // HEFT: the op of highest upward rank (then earlier in topological order) to the device where
  // it ends first.
  std::pair<OpId, DeviceId> heft_choice(const DataflowStep& step) const {
    OpId op = remaining_.front();
    for (OpId o : remaining_)
      if (rank_[o] > rank_[op] || (rank_[o] == rank_[op] && topo_pos_[o] < topo_pos_[op])) op = o;
    const int preferred = largest_input_device(
        graph_, op, [&](OpId src) { return step.decided(src) ? static_cast<int>(step.device(src)) : -1; });
    return {op, earliest_finishing(heft_devices(op), preferred, [&](DeviceId d) {
              return step.estimate(op, d).end_s + send_back_s(op, d, step);
            })};
  }

  // Baechi's memory test (ETFDevice / is_placeable), on the step's real bytes in use: the op's
  // output, the copies it would receive, and its group's persistent bytes when the group has no
  // device yet, must fit in what is free on d now.
  bool fits(OpId op, DeviceId d, const DataflowEstimate& est, const DataflowStep& step) const {
    const GroupId g = coloc_.group_of(op);
    const int64_t group_bytes = group_device_[g] < 0 ? group_persistent_[g] : 0;
    return step.memory_in_use(d) + graph_.op(op).output_bytes + est.copy_bytes + group_bytes <=
           machine_.devices[d].memory_bytes;
  }

  // When op starts on d, kNever when it does not fit there and memory counts.
  double start_on(OpId op, DeviceId d, bool respect_memory, const DataflowStep& step) const {
    const DataflowEstimate est = step.estimate(op, d);
    return respect_memory && !fits(op, d, est, step) ? kNever : est.start_s;
  }

  // The favorite child d is kept for (m-SCT): that of the op decided on d last, while undecided.
  std::optional<OpId> kept_for(DeviceId d, const DataflowStep& step) const {
    if (rule_.kind != DataflowListRule::Kind::kSct || !last_op_[d]) return std::nullopt;
    const std::optional<OpId> child = rule_.favorite[*last_op_[d]];
    if (!child || step.decided(*child)) return std::nullopt;
    return child;
  }

  // m-ETF: the (op, device) pair that starts first; ties to the op earlier in topological order,
  // then the device kept for it, then the first candidate. m-SCT: a device kept for a favorite
  // child takes another op only once that op is urgent (Baechi's SCTDevice._get_op_on_await): at
  // the latest of its starts over the devices it fits. No pair fits: memory is ignored.
  std::pair<OpId, DeviceId> etf_choice(const DataflowStep& step, bool respect_memory) {
    respect_memory = respect_memory && rule_.respect_memory;
    double best_start = kNever;
    std::size_t best_pos = 0;
    bool best_favored = false;
    std::pair<OpId, DeviceId> best{0, 0};
    for (OpId op : remaining_) {
      starts_.clear();
      double urgent_s = 0;
      for (DeviceId d : rule_.candidates) {
        starts_.push_back(start_on(op, d, respect_memory, step) + send_back_s(op, d, step));
        if (starts_.back() < kNever) urgent_s = std::max(urgent_s, starts_.back());
      }
      for (std::size_t k = 0; k < rule_.candidates.size(); ++k) {
        if (!(starts_[k] < kNever)) continue;
        const DeviceId d = rule_.candidates[k];
        const std::optional<OpId> kept = kept_for(d, step);
        const bool favored = kept == op;
        const double start = kept && !favored ? std::max(starts_[k], urgent_s) : starts_[k];
        if (start < best_start || (start == best_start && (topo_pos_[op] < best_pos ||
                                                           (topo_pos_[op] == best_pos && favored && !best_favored)))) {
          best_start = start;
          best_pos = topo_pos_[op];
          best_favored = favored;
          best = {op, d};
        }
      }
    }
    if (best_start == kNever) {
      PLACELAB_CHECK(respect_memory) << "no device for " << remaining_.size() << " ops";
      return etf_choice(step, false);
    }
    return best;
  }

  // SCT's rule (Hanen & Munier 1995): the finishing op's favorite child goes to its device when it
  // is asked for now, fits there, and starts there no later than on any other device.
  void keep_for_favorite(DataflowStep& step) {
    const std::optional<OpId> parent = step.finishing();
    if (!parent || !rule_.favorite[*parent]) return;
    const OpId child = *rule_.favorite[*parent];
    const auto it = std::find(remaining_.begin(), remaining_.end(), child);
    if (it == remaining_.end() || forced(child)) return;
    const DeviceId here = step.device(*parent);
    double here_s = kNever, elsewhere_s = kNever;
    for (DeviceId d : rule_.candidates) {
      double& earliest = d == here ? here_s : elsewhere_s;
      earliest = std::min(earliest, start_on(child, d, rule_.respect_memory, step));
    }
    if (here_s < kNever && here_s <= elsewhere_s) {
      remaining_.erase(it);
      commit(child, here, step);
    }
  }

  const OpGraph& graph_;
  const CostModel& cost_;
  const Machine& machine_;
  const DataflowListRule& rule_;
  const std::optional<DeviceId> cpu_;
  const Grouping coloc_;
  std::vector<int64_t> group_persistent_;
  std::vector<uint8_t> has_source_;  // per group: holds a source that is not soft-placed
  std::vector<std::size_t> topo_pos_;
  std::vector<double> rank_;         // kHeft: per op
  // Per run.
  const DataflowRun* hint_ = nullptr;
  std::vector<int> source_device_;   // per group holding a source: its device this run, -1: the rule's
  std::vector<int> group_device_;    // per group, -1 while undecided
  std::vector<int64_t> persistent_on_;
  std::vector<std::optional<OpId>> last_op_;  // per device: the op decided there last
  // Per decision.
  std::vector<OpId> remaining_;
  std::vector<double> starts_;
};

// Decides every op as a given placement says: a run of that placement with its ops' end times.
class FixedDecider final : public DataflowDecider {
 public:
  explicit FixedDecider(Placement placement) : placement_(std::move(placement)) {}
  void decide(std::span<const OpId> ops, DataflowStep& step) override {
    for (OpId op : ops) step.decide(op, placement_[op]);
  }

 private:
  Placement placement_;
};

}  // namespace

ListSchedule dataflow_list_schedule(const OpGraph& graph, const CostModel& cost, const DataflowListRule& rule,
                                    const Placement& plan) {
  const Simulator simulator(graph, cost);
  ListDecider decider(graph, cost, rule);
  // A run that fits beats one that does not; then the shorter step; then the earlier run.
  const auto better = [](const DataflowRun& a, const DataflowRun& b) {
    return (!a.result.oom && b.result.oom) ||
           (a.result.oom == b.result.oom && a.result.step_time_s < b.result.step_time_s);
  };
  FixedDecider planned(plan);
  DataflowRun best = simulate_deciding(simulator, planned);
  FixedDecider one_device(Placement(graph.num_ops(), rule.candidates.front()));
  if (DataflowRun single = simulate_deciding(simulator, one_device); better(single, best)) best = std::move(single);
  decider.start_run(nullptr);
  if (DataflowRun alone = simulate_deciding(simulator, decider); better(alone, best)) best = std::move(alone);
  for (int run = 0; run < kRefinements; ++run) {
    decider.start_run(&best);
    DataflowRun next = simulate_deciding(simulator, decider, &best);
    if (!better(next, best)) break;
    best = std::move(next);
  }
  return {std::move(best.placement), best.result.step_time_s};
}

}  // namespace placelab::detail
