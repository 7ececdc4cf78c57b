#include "placelab/learners/critpath.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "option_table.h"
#include "placelab/sim/critical_path.h"
#include "registry_entries.h"
#include "require.h"
#include "state_json.h"

namespace placelab {

void CritpathOptions::validate() const {
  using detail::require;
  require(start == "first" || start == "both" || start == "best_baseline" || start == "best_baseline_groups", "critpath",
          "start", start, "must be both, best_baseline, best_baseline_groups or first");
  require(candidates >= 0, "critpath", "candidates", std::to_string(candidates), "must be >= 0");
  require(step >= 1 && step <= 100000, "critpath", "step", std::to_string(step), "must be in [1, 100000]");
  require(kick >= 1 && kick <= 100000, "critpath", "kick", std::to_string(kick), "must be in [1, 100000]");
  require(pair_from >= 0 && pair_from <= 1000, "critpath", "pair_from", std::to_string(pair_from), "must be in [0, 1000]");
  require(std::isfinite(oom_time_s) && oom_time_s > 0, "critpath", "oom_time_s", format_exact(oom_time_s),
          "must be > 0");
}

CritpathLearner::CritpathLearner(SearchSpace space, CritpathOptions options, uint64_t seed, const OpGraph& graph,
                                 const Simulator& sim, const Grouping& groups, std::optional<Placement> start)
    : space_(std::move(space)), options_(std::move(options)), graph_(&graph), sim_(&sim), grouping_(&groups),
      members_(groups.members()), rng_(seed) {
  space_.validate();
  options_.validate();
  PLACELAB_CHECK(space_.num_groups == graph.num_ops() && groups.num_ops() == graph.num_ops() &&
                 sim.num_ops() == graph.num_ops())
      << "a space of " << space_.num_groups << " for " << graph.num_ops() << " ops, a grouping of " << groups.num_ops()
      << " ops and a simulator of " << sim.num_ops();
  current_.assign(space_.num_groups, space_.devices.front());
  if (options_.start != "first") {
    if (!start)
      throw InputError("critpath.start = best_baseline: the run has no baseline that placed this graph (list one "
                       "under `baselines:`)");
    PLACELAB_CHECK(start->size() == space_.num_groups) << start->size() << " ops in the start placement";
    for (DeviceId d : *start)
      PLACELAB_CHECK(std::find(space_.devices.begin(), space_.devices.end(), d) != space_.devices.end())
          << "start device " << d << " is not in the search space";
    const Placement whole = groups.expand(groups.majority(*start, space_.devices));
    current_ = options_.op_moves && options_.start == "best_baseline" ? *start : whole;
    if (options_.op_moves && options_.start == "both") {
      current_ = whole;
      second_start_ = *start;
    }
  }
  best_ = current_;
  measure_current();
}

void CritpathLearner::measure_current() {
  queue_ = {Candidate{}};
  next_ = 0;
  step_end_ = 1;
  pending_ = true;
}

Placement CritpathLearner::apply(const Candidate& c) const {
  Placement p = current_;
  for (uint8_t k = 0; k < c.count; ++k) {
    const Move& m = c.moves[k];
    if (m.whole_group)
      for (OpId op : members_[m.id]) p[op] = m.device;
    else
      p[m.id] = m.device;
  }
  return p;
}

bool CritpathLearner::changes(const Move& m) const {
  if (!m.whole_group) return current_[m.id] != m.device;
  for (OpId op : members_[m.id])
    if (current_[op] != m.device) return true;
  return false;
}

void CritpathLearner::set_sample_budget(int64_t samples) {
  PLACELAB_CHECK(samples >= 1) << "sample budget " << samples;
  budget_ = samples;
}

std::size_t CritpathLearner::samples_until_update() const { return step_end_ - next_; }

std::vector<Placement> CritpathLearner::propose(std::size_t max_count) {
  PLACELAB_CHECK(max_count >= 1) << "propose(0)";
  const std::size_t n = std::min(max_count, step_end_ - next_);
  std::vector<Placement> out;
  for (std::size_t i = next_; i < next_ + n; ++i) out.push_back(apply(queue_[i]));
  next_ += n;
  return out;
}

void CritpathLearner::observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) {
  PLACELAB_CHECK(group_placements.size() == measurements.size() && !group_placements.empty() &&
                 group_placements.size() <= next_ && next_ <= step_end_)
      << group_placements.size() << " placements and " << measurements.size() << " measurements";
  const std::size_t first = next_ - group_placements.size();  // queue_ index of group_placements[0]
  for (std::size_t i = 0; i < group_placements.size(); ++i) {
    const double t = measurements[i].oom ? options_.oom_time_s : measurements[i].step_time_s;
    ++samples_seen_;
    if (!have_best_ || t < best_time_s_) {
      best_ = group_placements[i];
      best_time_s_ = t;
      have_best_ = true;
    }
    if (pending_) {
      current_time_s_ = t;  // the start or a kicked placement: the search goes on from it, whatever its time
    } else if (!step_best_ || t < step_best_time_s_) {
      step_best_ = queue_[first + i];
      step_best_time_s_ = t;
    }
  }
  if (next_ < step_end_) return;  // the step is not fully measured yet
  if (!second_start_.empty() && samples_seen_ >= budget_ / 2) {
    // Half the budget spent from the first start: the second half searches from the other one.
    current_ = std::move(second_start_);
    second_start_.clear();
    measure_current();
  } else if (pending_) {
    pending_ = false;
    plan_round();
  } else {
    if (step_best_ && step_best_time_s_ < current_time_s_ * (1 - 1e-9)) {
      // First improvement: taken at once; the pass goes on with its remaining moves, applied to
      // the new placement (a move that has become no move is dropped).
      current_ = apply(*step_best_);
      current_time_s_ = step_best_time_s_;
      improved_in_pass_ = true;
      std::vector<Candidate> rest;
      for (std::size_t q = next_; q < queue_.size(); ++q) {
        bool moves = false;
        for (uint8_t k = 0; k < queue_[q].count; ++k) moves |= changes(queue_[q].moves[k]);
        if (moves) rest.push_back(queue_[q]);
      }
      queue_ = std::move(rest);
      next_ = 0;
    }
    if (next_ < queue_.size()) {
      step_end_ = std::min(queue_.size(), next_ + static_cast<std::size_t>(options_.step));
    } else if (improved_in_pass_) {
      plan_round();  // a new pass, ordered by the new placement's critical path
    } else if (!paired_ && plan_pairs()) {
      // no single move helps: the path's best moves two at a time
    } else {
      plan_kick();  // a local optimum: restart near the best
    }
  }
  step_best_.reset();
}

namespace {

// A move of the search: group → device, and how promising the critical path says it is.
struct Move {
  GroupId group;
  DeviceId device;
};

}  // namespace

void CritpathLearner::plan_round() {
  ++rounds_;
  const SimResult r = sim_->simulate(current_, SimOptions{.record_timeline = true});
  const std::vector<CriticalLink> path = critical_path(*graph_, *sim_, r);
  const std::vector<TimelineEvent>& ev = r.timeline;

  // How busy each device of the space is over a window: B(t), the busy seconds before t summed over
  // its slots, from the sorted starts and ends of its ops (O(log n) a window).
  const std::size_t nd = space_.devices.size();
  std::vector<int> space_index(sim_->machine().devices.size(), -1);
  for (std::size_t k = 0; k < nd; ++k) space_index[space_.devices[k]] = static_cast<int>(k);
  struct Busy {
    std::vector<double> starts, ends, start_sums, end_sums;  // sorted; prefix sums with a leading 0
    int slots = 1;
  };
  std::vector<Busy> busy(nd);
  for (std::size_t k = 0; k < nd; ++k) busy[k].slots = sim_->machine().devices[space_.devices[k]].parallel_capacity();
  for (const TimelineEvent& e : ev)
    if (e.kind == TimelineEvent::Kind::kOp && space_index[e.device] >= 0) {
      Busy& b = busy[static_cast<std::size_t>(space_index[e.device])];
      b.starts.push_back(e.start_s);
      b.ends.push_back(e.end_s);
    }
  for (Busy& b : busy) {
    std::sort(b.starts.begin(), b.starts.end());
    std::sort(b.ends.begin(), b.ends.end());
    b.start_sums.assign(1, 0.0);
    b.end_sums.assign(1, 0.0);
    for (double x : b.starts) b.start_sums.push_back(b.start_sums.back() + x);
    for (double x : b.ends) b.end_sums.push_back(b.end_sums.back() + x);
  }
  auto busy_before = [](const Busy& b, double t) {
    const auto ns = static_cast<std::size_t>(std::lower_bound(b.starts.begin(), b.starts.end(), t) - b.starts.begin());
    const auto ne = static_cast<std::size_t>(std::lower_bound(b.ends.begin(), b.ends.end(), t) - b.ends.begin());
    return (static_cast<double>(ns) * t - b.start_sums[ns]) - (static_cast<double>(ne) * t - b.end_sums[ne]);
  };
  auto idle_fraction = [&](std::size_t k, double from, double to) {
    if (to <= from) return 0.0;
    const double used = busy_before(busy[k], to) - busy_before(busy[k], from);
    return std::clamp(1 - used / ((to - from) * busy[k].slots), 0.0, 1.0);
  };

  // Scores by move; a move's key orders ties: whole groups before ops, then id, then device.
  // Keyed (single op?, id, device): on equal scores whole-group moves come first.
  using MoveKey = std::tuple<bool, uint32_t, DeviceId>;
  auto key = [](const Move& m) { return MoveKey{!m.whole_group, m.id, m.device}; };
  std::map<MoveKey, double> score;
  auto suggest = [&](OpId op, DeviceId d, double gain) {
    if (space_index[d] < 0 || gain <= 0) return;
    const Move group_move{true, grouping_->group_of(op), d}, op_move{false, op, d};
    if (changes(group_move)) score[key(group_move)] += gain;
    if (options_.op_moves && changes(op_move)) score[key(op_move)] += gain;
  };
  for (std::size_t i = 0; i < path.size(); ++i) {
    const TimelineEvent& e = ev[path[i].event];
    const double length = e.end_s - e.start_s;
    if (e.kind == TimelineEvent::Kind::kTransfer) {
      // A copy on the path: bring the producer to the consumer or the consumer to the producer.
      const double cost = length + path[i].waited_s;
      suggest(e.op, e.device, cost);
      if (i + 1 < path.size() && ev[path[i + 1].event].kind == TimelineEvent::Kind::kOp)
        suggest(ev[path[i + 1].event].op, e.src_device, cost);
      continue;
    }
    // A blocker: the next event of the path was ready and waited for the slot this op held. It, or
    // its group, may run on a device that is idle meanwhile.
    if (i + 1 < path.size() && path[i + 1].wait == CriticalLink::Wait::kDevice)
      for (std::size_t k = 0; k < nd; ++k) suggest(e.op, space_.devices[k], length * idle_fraction(k, e.start_s, e.end_s));
    // An op of the path that another device runs faster (a CPU beside GPUs, mixed GPUs).
    for (std::size_t k = 0; k < nd; ++k) suggest(e.op, space_.devices[k], length - sim_->op_time_s(e.op, space_.devices[k]));
  }

  // The path's best `candidates` moves, most promising first (ties in key order), then every other
  // whole-group move in a seeded random order: the pass ends at the first improvement it finds.
  std::vector<std::pair<double, Move>> ranked;
  for (const auto& [k, s] : score) ranked.push_back({s, Move{!std::get<0>(k), std::get<1>(k), std::get<2>(k)}});
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (ranked.size() > static_cast<std::size_t>(options_.candidates))
    ranked.resize(static_cast<std::size_t>(options_.candidates));
  std::vector<Move> rest;
  for (GroupId g = 0; g < grouping_->num_groups(); ++g)
    for (DeviceId d : space_.devices)
      if (const Move m{true, g, d}; !score.contains(key(m)) && changes(m)) rest.push_back(m);
  for (std::size_t i = rest.size(); i > 1; --i) std::swap(rest[i - 1], rest[rng_() % i]);
  for (const Move& m : rest) ranked.push_back({0.0, m});
  if (ranked.empty()) {
    plan_kick();
    return;
  }
  queue_.clear();
  for (const auto& [s, m] : ranked) queue_.push_back(Candidate{1, {m, Move{}}});
  top_moves_.assign(queue_.begin(),
                    queue_.begin() + static_cast<std::ptrdiff_t>(
                                         std::min<std::size_t>(queue_.size(), static_cast<std::size_t>(options_.pair_from))));
  paired_ = false;
  improved_in_pass_ = false;
  next_ = 0;
  step_end_ = std::min(queue_.size(), static_cast<std::size_t>(options_.step));
}

bool CritpathLearner::plan_pairs() {
  queue_.clear();
  for (std::size_t a = 0; a < top_moves_.size(); ++a)
    for (std::size_t b = a + 1; b < top_moves_.size(); ++b)
      if (top_moves_[a].moves[0].whole_group != top_moves_[b].moves[0].whole_group ||
          top_moves_[a].moves[0].id != top_moves_[b].moves[0].id)
        queue_.push_back(Candidate{2, {top_moves_[a].moves[0], top_moves_[b].moves[0]}});
  paired_ = true;
  improved_in_pass_ = false;
  if (queue_.empty()) return false;
  next_ = 0;
  step_end_ = std::min(queue_.size(), static_cast<std::size_t>(options_.step));
  return true;
}

void CritpathLearner::plan_kick() {
  ++kicks_;
  current_ = best_;
  const std::size_t nd = space_.devices.size();
  if (nd > 1)
    for (int64_t k = 0; k < options_.kick; ++k) {
      // A whole group to a device other than its first op's.
      const std::size_t g = rng_() % members_.size();
      std::size_t here = 0;
      while (space_.devices[here] != current_[members_[g].front()]) ++here;
      const DeviceId to = space_.devices[(here + 1 + rng_() % (nd - 1)) % nd];
      for (OpId op : members_[g]) current_[op] = to;
    }
  measure_current();
}

namespace {

// A candidate as [count, whole_group, id, device, whole_group, id, device].
nlohmann::json candidates_json(std::span<const CritpathLearner::Candidate> cs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : cs)
    out.push_back({c.count, c.moves[0].whole_group, c.moves[0].id, c.moves[0].device, c.moves[1].whole_group,
                   c.moves[1].id, c.moves[1].device});
  return out;
}

}  // namespace

std::string CritpathLearner::save_state() const {
  nlohmann::json j = detail::state_header(*this);
  j["rng"] = detail::rng_to_string(rng_);
  j["budget"] = budget_;
  j["samples_seen"] = samples_seen_;
  j["rounds"] = rounds_;
  j["kicks"] = kicks_;
  j["current"] = current_;
  j["second_start"] = second_start_;
  j["current_time_s"] = detail::bits(current_time_s_);
  j["pending"] = pending_;
  j["best"] = best_;
  j["best_time_s"] = detail::bits(best_time_s_);
  j["have_best"] = have_best_;
  j["queue"] = candidates_json(queue_);
  j["next"] = next_;
  j["step_end"] = step_end_;
  j["top_moves"] = candidates_json(top_moves_);
  j["paired"] = paired_;
  j["improved_in_pass"] = improved_in_pass_;
  j["step_best"] = step_best_ ? candidates_json(std::span(&*step_best_, 1)) : nlohmann::json::array();
  j["step_best_time_s"] = detail::bits(step_best_time_s_);
  return j.dump();
}

void CritpathLearner::load_state(const std::string& state) {
  const nlohmann::json j = detail::parse_state(state, "learner state");
  try {
    detail::check_state_header(j, *this);
    auto in_space = [&](DeviceId d) {
      return std::find(space_.devices.begin(), space_.devices.end(), d) != space_.devices.end();
    };
    auto candidates = [&](const char* key) {
      std::vector<Candidate> out;
      for (const auto& q : j.at(key)) {
        if (!q.is_array() || q.size() != 7) throw InputError(std::string("learner state: ") + key + ": malformed candidate");
        const auto count = q[0].get<uint32_t>();
        Candidate c;
        if (count > 2) throw InputError(std::string("learner state: ") + key + ": at most two moves a candidate");
        c.count = static_cast<uint8_t>(count);
        for (std::size_t k = 0; k < 2; ++k) {
          const bool whole = q[1 + 3 * k].get<bool>();
          const auto id = q[2 + 3 * k].get<uint32_t>();
          const auto device = q[3 + 3 * k].get<uint32_t>();
          if (k < count && (id >= (whole ? members_.size() : space_.num_groups) || device > UINT16_MAX ||
                            !in_space(static_cast<DeviceId>(device))))
            throw InputError(std::string("learner state: ") + key + ": a move outside the search space");
          c.moves[k] = Move{whole, id, static_cast<DeviceId>(device)};
        }
        out.push_back(c);
      }
      return out;
    };
    std::vector<Candidate> queue = candidates("queue"), top = candidates("top_moves"), step_best = candidates("step_best");
    const std::size_t next = j.at("next").get<std::size_t>(), step_end = j.at("step_end").get<std::size_t>();
    if (queue.empty() || next > step_end || step_end > queue.size())
      throw InputError("learner state: queue/next/step_end: must be a non-empty queue with next <= step_end <= its size");
    if (step_best.size() > 1) throw InputError("learner state: step_best: at most one candidate");
    Placement current = detail::space_placement(j, "current", space_), best = detail::space_placement(j, "best", space_);
    Placement second_start = j.at("second_start").get<Placement>();
    if (!second_start.empty()) second_start = detail::space_placement(j, "second_start", space_);
    rng_ = detail::rng_from_string(j.at("rng").get<std::string>());
    budget_ = j.at("budget").get<int64_t>();
    samples_seen_ = j.at("samples_seen").get<int64_t>();
    rounds_ = j.at("rounds").get<int64_t>();
    kicks_ = j.at("kicks").get<int64_t>();
    current_ = std::move(current);
    second_start_ = std::move(second_start);
    current_time_s_ = detail::unbits(j.at("current_time_s"));
    pending_ = j.at("pending").get<bool>();
    best_ = std::move(best);
    best_time_s_ = detail::unbits(j.at("best_time_s"));
    have_best_ = j.at("have_best").get<bool>();
    queue_ = std::move(queue);
    next_ = next;
    step_end_ = step_end;
    top_moves_ = std::move(top);
    paired_ = j.at("paired").get<bool>();
    improved_in_pass_ = j.at("improved_in_pass").get<bool>();
    step_best_.reset();
    if (!step_best.empty()) step_best_ = step_best.front();
    step_best_time_s_ = detail::unbits(j.at("step_best_time_s"));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("learner state: ") + e.what());
  }
}

// ---- Registry entry ----------------------------------------------------------------------------

namespace {

const detail::OptionTable<CritpathOptions>& critpath_options() {
  using O = CritpathOptions;
  static const detail::OptionTable<O> kTable(
      "critpath",
      {{"start", &O::start, "", "best_baseline: the run's fastest baseline; first: every op on the first device",
        {"both", "best_baseline", "best_baseline_groups", "first"}},
       {"op_moves", &O::op_moves, "", "also move single ops the critical path marks; false: whole groups only"},
       {"candidates", &O::candidates, ">= 0", "the critical path's best moves tried per pass, before every other group move"},
       {"step", &O::step, "in [1, 100000]", "candidates measured before the best improvement is taken"},
       {"pair_from", &O::pair_from, "in [0, 1000]",
        "when a pass improves nothing, pairs of its best this many moves are tried before a kick (0: none)"},
       {"kick", &O::kick, "in [1, 100000]", "groups moved at random from the best placement when the pairs improve nothing too"},
       {"oom_time_s", &O::oom_time_s, "> 0", "step time (s) counted for an OOM placement (Post: 100 s)"}});
  return kTable;
}

}  // namespace

LearnerEntry detail::critpath_learner_entry() {
  return {.name = "critpath",
          .aliases = {},
          .summary = "local search over ops and whole groups, its moves read off the simulated step's critical path "
                     "(ops a queue waited for, copies), restarted from the best with random kicks",
          .paper = "placelab (docs/learners.md, \"critpath\")",
          .options = critpath_options().infos(),
          .policy_gradient = false,
          .needs_problem = false,
          .needs_simulator = true,
          .places_ops = true,
          .whole_groups = {{"op_moves", false}},
          .validate = [](const OptionValues& v) { critpath_options().build(v); },
          .make = [](const OptionValues& v, const LearnerContext& c) -> std::unique_ptr<Learner> {
            return std::make_unique<CritpathLearner>(c.space, critpath_options().build(v), c.seed, *c.graph,
                                                     *c.simulator, *c.grouping, c.best_baseline);
          }};
}

}  // namespace placelab
