#include "placelab/sim/critical_path.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>
#include <unordered_map>

#include "placelab/core/error.h"

namespace placelab {

namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// Times on the path are copies of one another (a start is the max of finish times), so they
// compare equal exactly; the tolerance only absorbs a finish computed as start + duration twice.
bool same_time(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(a)); }

// The timeline's lookups for the walk back: each op's run, each (producer, destination) copy,
// per device the events that held its compute slots, and the copies that held links, the last
// two sorted by end time.
class TimelineIndex {
 public:
  TimelineIndex(const std::vector<TimelineEvent>& events, const Machine& machine)
      : events_(events), machine_(machine), num_devices_(machine.devices.size()), on_slots_(num_devices_) {}

  void build(std::size_t num_ops) {
    op_event_.assign(num_ops, kNone);
    for (std::size_t i = 0; i < events_.size(); ++i) {
      const TimelineEvent& e = events_[i];
      if (e.kind == TimelineEvent::Kind::kOp) {
        op_event_[e.op] = i;
        on_slots_[e.device].push_back(i);
      } else {
        copy_event_[copy_key(e.op, e.device)] = i;
        if (!machine_.devices[e.device].copy_engine) on_slots_[e.device].push_back(i);
      }
      if (holds_links(e)) link_holders_.push_back(i);
    }
    // Candidates for "the event that ended when this one started", sorted by end time.
    const auto by_end = [&](std::size_t a, std::size_t b) {
      return events_[a].end_s < events_[b].end_s || (events_[a].end_s == events_[b].end_s && a < b);
    };
    std::sort(link_holders_.begin(), link_holders_.end(), by_end);
    for (auto& slots : on_slots_) std::sort(slots.begin(), slots.end(), by_end);
  }

  // A copy holds link directions only when its destination has a copy engine.
  bool holds_links(const TimelineEvent& e) const {
    return e.kind == TimelineEvent::Kind::kTransfer && machine_.devices[e.device].copy_engine;
  }

  // When event `e` had everything it needed, and the event that delivered the last of it (an
  // op's latest input or its copy; a copy's producer); kNone for an op without inputs.
  std::pair<double, std::size_t> input_of(const OpGraph& graph, const TimelineEvent& e) const {
    double ready = 0;
    std::size_t input = kNone;
    if (e.kind == TimelineEvent::Kind::kOp) {
      graph.for_each_in_edge(e.op, [&](OpId src, const Tensor& t) {
        const std::size_t producer = op_event_[src];
        PLACELAB_CHECK(producer != kNone) << "op " << src << " has no timeline event";
        std::size_t from = producer;
        if (!t.control && events_[producer].device != e.device) {
          const auto it = copy_event_.find(copy_key(src, e.device));
          PLACELAB_CHECK(it != copy_event_.end()) << "no copy of op " << src << " to device " << e.device;
          from = it->second;
        }
        if (input == kNone || events_[from].end_s > ready) {
          ready = events_[from].end_s;
          input = from;
        }
      });
    } else {
      input = op_event_[e.op];
      PLACELAB_CHECK(input != kNone) << "op " << e.op << " has no timeline event";
      ready = events_[input].end_s;
    }
    return {ready, input};
  }

  // The event that freed what event i waited for at its start: a copy holding a link of its route
  // (the last such in timeline order), or the op that freed a slot of its device (the latest to
  // start); kNone when none ended then.
  std::size_t releaser(std::size_t i) const {
    const TimelineEvent& e = events_[i];
    std::size_t best = kNone;
    if (holds_links(e)) {
      ending_at(link_holders_, e.start_s, [&](std::size_t j) {
        if (j != i && shares_link(events_[j], e) && (best == kNone || j > best)) best = j;
      });
    } else {
      ending_at(on_slots_[e.device], e.start_s, [&](std::size_t j) {
        if (j != i && (best == kNone || events_[j].start_s > events_[best].start_s ||
                       (events_[j].start_s == events_[best].start_s && j < best)))
          best = j;
      });
    }
    return best;
  }

 private:
  uint64_t copy_key(OpId producer, DeviceId to) const { return uint64_t{producer} * num_devices_ + to; }
  bool shares_link(const TimelineEvent& a, const TimelineEvent& b) const {
    const auto ha = machine_.route(a.src_device, a.device).hops;
    const auto hb = machine_.route(b.src_device, b.device).hops;
    for (const LinkDirection& x : ha)
      for (const LinkDirection& y : hb)
        if (x == y) return true;
    return false;
  }
  // Visits the events of `sorted` whose end is the same time as `t`, in index order of equal ends.
  template <typename Visit>
  void ending_at(const std::vector<std::size_t>& sorted, double t, Visit&& visit) const {
    const double margin = 2e-12 * std::max(1.0, std::abs(t));
    auto it = std::lower_bound(sorted.begin(), sorted.end(), t - margin,
                               [&](std::size_t j, double x) { return events_[j].end_s < x; });
    for (; it != sorted.end() && events_[*it].end_s <= t + margin; ++it)
      if (same_time(events_[*it].end_s, t)) visit(*it);
  }

  const std::vector<TimelineEvent>& events_;
  const Machine& machine_;
  std::size_t num_devices_;
  std::vector<std::size_t> op_event_;
  std::unordered_map<uint64_t, std::size_t> copy_event_;
  std::vector<std::vector<std::size_t>> on_slots_;
  std::vector<std::size_t> link_holders_;
};

}  // namespace

std::vector<CriticalLink> critical_path(const OpGraph& graph, const Simulator& sim, const SimResult& result) {
  const std::vector<TimelineEvent>& events = result.timeline;
  if (events.empty()) return {};
  TimelineIndex index(events, sim.machine());
  index.build(graph.num_ops());

  std::size_t last = 0;
  for (std::size_t i = 1; i < events.size(); ++i)
    if (events[i].end_s > events[last].end_s) last = i;

  std::vector<CriticalLink> path;
  std::size_t current = last;
  // Each step goes to an event that finished no later than `current` started and, for zero-length
  // events, at most once: the walk ends within the timeline's size.
  for (std::size_t guard = 0; guard <= events.size(); ++guard) {
    const TimelineEvent& e = events[current];
    const auto [ready, input] = index.input_of(graph, e);
    CriticalLink link{current, CriticalLink::Wait::kStart, 0};
    std::size_t previous = kNone;
    if (input != kNone && same_time(ready, e.start_s)) {
      link.wait = CriticalLink::Wait::kInput;
      previous = input;
    } else if (e.start_s > ready) {
      if (const std::size_t r = index.releaser(current); r != kNone) {
        link.wait = index.holds_links(e) ? CriticalLink::Wait::kLink : CriticalLink::Wait::kDevice;
        link.waited_s = e.start_s - ready;
        previous = r;
      }
    }
    path.push_back(link);
    if (previous == kNone || e.start_s <= 0) break;
    current = previous;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace placelab
