#include "placelab/sim/critical_path.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "placelab/graph/error.h"

namespace placelab {

namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// Times on the path are copies of one another (a start is the max of finish times), so they
// compare equal exactly; the tolerance only absorbs a finish computed as start + duration twice.
bool same_time(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(a)); }

}  // namespace

std::vector<CriticalLink> critical_path(const OpGraph& graph, const Simulator& sim, const SimResult& result) {
  const std::vector<TimelineEvent>& events = result.timeline;
  if (events.empty()) return {};
  const Machine& machine = sim.machine();
  const std::size_t num_devices = machine.devices.size();

  // Where to look things up: each op's run, each (producer, destination) copy, and per device the
  // events that held its compute slots.
  std::vector<std::size_t> op_event(graph.num_ops(), kNone);
  std::unordered_map<uint64_t, std::size_t> copy_event;
  std::vector<std::vector<std::size_t>> on_slots(num_devices);
  auto copy_key = [&](OpId producer, DeviceId to) { return uint64_t{producer} * num_devices + to; };
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TimelineEvent& e = events[i];
    if (e.kind == TimelineEvent::Kind::kOp) {
      op_event[e.op] = i;
      on_slots[e.device].push_back(i);
    } else {
      copy_event[copy_key(e.op, e.device)] = i;
      if (!machine.devices[e.device].copy_engine) on_slots[e.device].push_back(i);
    }
  }
  // A copy holds link directions only when its destination has a copy engine.
  auto holds_links = [&](const TimelineEvent& e) {
    return e.kind == TimelineEvent::Kind::kTransfer && machine.devices[e.device].copy_engine;
  };
  auto shares_link = [&](const TimelineEvent& a, const TimelineEvent& b) {
    const auto ha = machine.route(a.src_device, a.device).hops;
    const auto hb = machine.route(b.src_device, b.device).hops;
    for (const LinkDirection& x : ha)
      for (const LinkDirection& y : hb)
        if (x == y) return true;
    return false;
  };
  // Candidates for "the event that ended when this one started", sorted by end time: per device the
  // events on its slots, and every copy that holds links.
  auto by_end = [&](std::size_t a, std::size_t b) {
    return events[a].end_s < events[b].end_s || (events[a].end_s == events[b].end_s && a < b);
  };
  std::vector<std::size_t> link_holders;
  for (std::size_t i = 0; i < events.size(); ++i)
    if (holds_links(events[i])) link_holders.push_back(i);
  std::sort(link_holders.begin(), link_holders.end(), by_end);
  for (auto& slots : on_slots) std::sort(slots.begin(), slots.end(), by_end);
  // Visits the events of `sorted` whose end is the same time as `t`, in index order of equal ends.
  auto ending_at = [&](const std::vector<std::size_t>& sorted, double t, auto&& visit) {
    const double margin = 2e-12 * std::max(1.0, std::abs(t));
    auto it = std::lower_bound(sorted.begin(), sorted.end(), t - margin,
                               [&](std::size_t j, double x) { return events[j].end_s < x; });
    for (; it != sorted.end() && events[*it].end_s <= t + margin; ++it)
      if (same_time(events[*it].end_s, t)) visit(*it);
  };
  // The event that freed what `e` waited for at its start: a copy holding a link of its route (the
  // last such in timeline order), or the op that freed a slot of its device (the latest to start).
  auto releaser = [&](std::size_t i) {
    const TimelineEvent& e = events[i];
    std::size_t best = kNone;
    if (holds_links(e)) {
      ending_at(link_holders, e.start_s, [&](std::size_t j) {
        if (j != i && shares_link(events[j], e) && (best == kNone || j > best)) best = j;
      });
    } else {
      ending_at(on_slots[e.device], e.start_s, [&](std::size_t j) {
        if (j != i && (best == kNone || events[j].start_s > events[best].start_s ||
                       (events[j].start_s == events[best].start_s && j < best)))
          best = j;
      });
    }
    return best;
  };

  std::size_t last = 0;
  for (std::size_t i = 1; i < events.size(); ++i)
    if (events[i].end_s > events[last].end_s) last = i;

  std::vector<CriticalLink> path;
  std::size_t current = last;
  // Each step goes to an event that finished no later than `current` started and, for zero-length
  // events, at most once: the walk ends within the timeline's size.
  for (std::size_t guard = 0; guard <= events.size(); ++guard) {
    const TimelineEvent& e = events[current];
    // When did it have everything it needed, and from which event?
    double ready = 0;
    std::size_t input = kNone;
    if (e.kind == TimelineEvent::Kind::kOp) {
      graph.for_each_in_edge(e.op, [&](OpId src, const Tensor& t) {
        const std::size_t producer = op_event[src];
        PLACELAB_CHECK(producer != kNone) << "op " << src << " has no timeline event";
        std::size_t from = producer;
        if (!t.control && events[producer].device != e.device) {
          const auto it = copy_event.find(copy_key(src, e.device));
          PLACELAB_CHECK(it != copy_event.end()) << "no copy of op " << src << " to device " << e.device;
          from = it->second;
        }
        if (input == kNone || events[from].end_s > ready) {
          ready = events[from].end_s;
          input = from;
        }
      });
    } else {
      input = op_event[e.op];
      PLACELAB_CHECK(input != kNone) << "op " << e.op << " has no timeline event";
      ready = events[input].end_s;
    }
    CriticalLink link{current, CriticalLink::Wait::kStart, 0};
    std::size_t previous = kNone;
    if (input != kNone && same_time(ready, e.start_s)) {
      link.wait = CriticalLink::Wait::kInput;
      previous = input;
    } else if (e.start_s > ready) {
      if (const std::size_t r = releaser(current); r != kNone) {
        link.wait = holds_links(e) ? CriticalLink::Wait::kLink : CriticalLink::Wait::kDevice;
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
