// Properties every simulated step must have, checked on seeded random DAGs and placements over
// several machines: lower bounds on the step time, a consistent timeline (each op once, after its
// inputs, no two intervals on one stream or link direction), and consistent memory accounting.
// Machines without copy engines (copies run on the destination's streams) are among them.
#include <algorithm>
#include <map>
#include <tuple>

#include <gtest/gtest.h>

#include "placelab/graph/transfers.h"
#include "placelab/sim/bounds.h"
#include "placelab/sim/simulator.h"
#include "sim_test_util.h"

namespace placelab {
namespace {

using testing::FixedCostModel;

// TwoStreams: independent slots (full_speed_ops = streams); Shared: more streams than ops at
// full speed, so ops in flight share their device (copies too, without a copy engine).
enum class MachineKind {
  kMesh3,
  kMesh2TwoStreams,
  kSwitch,
  kMesh3NoCopyEngine,
  kMesh2TwoStreamsNoCopyEngine,
  kMesh2ThreeStreamsSharingTwo,
  kMesh2TwoStreamsSharedNoCopyEngine
};

Machine without_copy_engines(Machine m) {
  for (Device& d : m.devices) d.copy_engine = false;
  return m;
}

Machine make(MachineKind kind) {
  switch (kind) {
    case MachineKind::kMesh3: return testing::mesh_machine(3);
    case MachineKind::kMesh2TwoStreams: return testing::with_full_speed(testing::mesh_machine(2, 2), 2);
    case MachineKind::kSwitch: return testing::switch_machine();
    case MachineKind::kMesh3NoCopyEngine: return without_copy_engines(testing::mesh_machine(3));
    case MachineKind::kMesh2TwoStreamsNoCopyEngine:
      return without_copy_engines(testing::with_full_speed(testing::mesh_machine(2, 2), 2));
    case MachineKind::kMesh2ThreeStreamsSharingTwo: return testing::with_full_speed(testing::mesh_machine(2, 3), 2);
    case MachineKind::kMesh2TwoStreamsSharedNoCopyEngine: return without_copy_engines(testing::mesh_machine(2, 2));
  }
  return testing::mesh_machine(1);
}

class SimProperties : public ::testing::TestWithParam<std::tuple<MachineKind, uint32_t>> {};

// Intervals must not overlap once sorted by start.
void expect_disjoint(std::vector<std::pair<double, double>> intervals, const std::string& what) {
  std::sort(intervals.begin(), intervals.end());
  for (std::size_t i = 1; i < intervals.size(); ++i)
    EXPECT_GE(intervals[i].first, intervals[i - 1].second) << what << " interval " << i;
}

// Where each op ran in a simulated step's timeline, and its copies by (producer, destination).
struct TimelineFacts {
  std::vector<double> start, end;
  std::vector<DeviceId> where;
  std::map<std::pair<OpId, DeviceId>, const TimelineEvent*> sends;
};

// Lower bounds: the critical path on each op's fastest device, and total work over all slots; and
// the copies graph/transfers.h says cross devices.
void expect_lower_bounds_and_copy_count(const OpGraph& g, const Machine& m, const CostModel& cost, const Simulator& sim,
                                        const Placement& p, const SimResult& r) {
  const std::size_t n = g.num_ops(), nd = m.num_devices();
  std::vector<double> fastest(n), path(n, 0);
  double work = 0;
  int slots = 0;
  for (const Device& d : m.devices) slots += d.parallel_capacity();
  for (OpId op = 0; op < n; ++op) {
    // A cpu_only op runs on the CPU wherever it is placed (the switch machine has one).
    fastest[op] = cost.op_time_s(g.op(op), sim.effective_device(op, 0));
    for (DeviceId d = 1; d < nd; ++d)
      fastest[op] = std::min(fastest[op], cost.op_time_s(g.op(op), sim.effective_device(op, d)));
    work += fastest[op];
  }
  double critical = 0;
  for (OpId op : g.topological_order()) {
    double start = 0;
    g.for_each_in_edge(op, [&](OpId src, const Tensor&) { start = std::max(start, path[src]); });
    path[op] = start + fastest[op];
    critical = std::max(critical, path[op]);
  }
  EXPECT_GE(r.step_time_s, critical - 1e-9);
  EXPECT_GE(r.step_time_s, work / slots - 1e-9);
  // step_lower_bound, which reports and runs print, computes the same two bounds.
  const StepLowerBound bound = step_lower_bound(g, sim);
  EXPECT_NEAR(bound.critical_path_s, critical, 1e-9 * critical);
  EXPECT_NEAR(bound.work_s, work / slots, 1e-9 * work);
  EXPECT_EQ(bound.slots, slots);
  EXPECT_GE(r.step_time_s, bound.step_s - 1e-9);
  // The simulator sends what graph/transfers.h says crosses devices, as the executors and HEFT do.
  Placement effective(n);
  for (OpId op = 0; op < n; ++op) effective[op] = sim.effective_device(op, p[op]);
  int64_t copies = 0;
  for_each_transfer(
      g, effective, [](OpId, OpId) {}, [&](OpId, DeviceId, int64_t) { return static_cast<uint32_t>(copies++); },
      [](uint32_t, OpId) {});
  EXPECT_EQ(r.transfers, copies);

}

// Each op runs exactly once, on its effective device, for its cost-model time (at least that on a
// shared device, where it may run slower); no stream runs two things at once; no device does
// more work than its full-speed ops can in the time it has something in flight.
TimelineFacts expect_consistent_timeline(const OpGraph& g, const Machine& m, const Simulator& sim, const Placement& p,
                                         const SimResult& r) {
  const std::size_t n = g.num_ops(), nd = m.num_devices();
  TimelineFacts f;
  f.start.assign(n, 0);
  f.end.assign(n, 0);
  f.where.assign(n, 0);
  std::vector<double>& start = f.start;
  std::vector<double>& end = f.end;
  std::vector<DeviceId>& where = f.where;
  std::map<std::pair<OpId, DeviceId>, const TimelineEvent*>& sends = f.sends;
  std::vector<int> runs(n, 0);
  std::vector<double> busy(nd, 0), work(nd, 0);
  std::map<std::pair<DeviceId, uint16_t>, std::vector<std::pair<double, double>>> stream_use;
  double last_end = 0, prev_start = 0;
  for (const TimelineEvent& e : r.timeline) {
    EXPECT_GE(e.start_s, prev_start) << "timeline not sorted by start";
    prev_start = e.start_s;
    EXPECT_GE(e.end_s, e.start_s);
    last_end = std::max(last_end, e.end_s);
    if (e.kind == TimelineEvent::Kind::kOp) {
      ++runs[e.op];
      start[e.op] = e.start_s;
      end[e.op] = e.end_s;
      where[e.op] = e.device;
      EXPECT_EQ(e.device, sim.effective_device(e.op, p[e.op]));
      // end - start loses the low bits of a duration added to a large start time.
      if (m.devices[e.device].streams > m.devices[e.device].full_speed_ops)
        EXPECT_GE(e.end_s - e.start_s, sim.op_time_s(e.op, e.device) - 1e-12 * e.end_s);
      else
        EXPECT_NEAR(e.end_s - e.start_s, sim.op_time_s(e.op, e.device), 1e-12 * e.end_s);
      work[e.device] += sim.op_time_s(e.op, e.device);
      EXPECT_LT(e.stream, m.devices[e.device].streams);
      stream_use[{e.device, e.stream}].push_back({e.start_s, e.end_s});
    } else {
      EXPECT_TRUE(sends.emplace(std::make_pair(e.op, e.device), &e).second) << "second send of op " << e.op;
      // A device without a copy engine runs the copy on one of its streams, beside nothing else.
      if (!m.devices[e.device].copy_engine) {
        EXPECT_LT(e.stream, m.devices[e.device].streams);
        stream_use[{e.device, e.stream}].push_back({e.start_s, e.end_s});
      }
    }
  }
  for (OpId op = 0; op < n; ++op) EXPECT_EQ(runs[op], 1) << g.op(op).name;
  EXPECT_DOUBLE_EQ(r.step_time_s, last_end);
  for (DeviceId d = 0; d < nd; ++d) EXPECT_NEAR(r.devices[d].busy_s, work[d], 1e-9);
  for (const auto& [key, intervals] : stream_use) expect_disjoint(intervals, m.devices[key.first].name);
  // Work conservation: a device's ops' work fits in its full-speed ops × the time it had any op
  // in flight (the union of its ops' intervals).
  for (DeviceId d = 0; d < nd; ++d) {
    std::vector<std::pair<double, double>> spans;
    for (const auto& [key, intervals] : stream_use)
      if (key.first == d) spans.insert(spans.end(), intervals.begin(), intervals.end());
    std::sort(spans.begin(), spans.end());
    double covered = 0, reach = 0;
    for (const auto& [from, to] : spans) {
      covered += std::max(0.0, to - std::max(from, reach));
      reach = std::max(reach, to);
    }
    EXPECT_LE(work[d], m.devices[d].parallel_capacity() * covered + 1e-9) << m.devices[d].name;
  }

  return f;
}

// Inputs before starts; exactly one send per (producer, remote device) with a data edge, of the
// producer's largest data edge, holding its route's links one copy at a time.
void expect_sends_and_links(const OpGraph& g, const Machine& m, const CostModel& cost, const SimResult& r,
                            const TimelineFacts& f) {
  const std::size_t n = g.num_ops();
  const std::vector<double>& start = f.start;
  const std::vector<double>& end = f.end;
  const std::vector<DeviceId>& where = f.where;
  const auto& sends = f.sends;
  std::map<std::pair<OpId, DeviceId>, int64_t> expected_sends;  // → wire bytes
  for (OpId c = 0; c < n; ++c) {
    g.for_each_in_edge(c, [&](OpId src, const Tensor& t) {
      EXPECT_GE(start[c], end[src]) << g.op(src).name << " -> " << g.op(c).name;
      if (t.control || where[src] == where[c]) return;
      auto it = sends.find({src, where[c]});
      ASSERT_NE(it, sends.end()) << "no send " << g.op(src).name << " -> " << m.devices[where[c]].name;
      EXPECT_GE(start[c], it->second->end_s);
      int64_t& b = expected_sends[{src, where[c]}];
      g.for_each_out_edge(src, [&](OpId, const Tensor& o) { if (!o.control) b = std::max(b, o.bytes); });
    });
  }
  EXPECT_EQ(sends.size(), expected_sends.size());
  EXPECT_EQ(r.transfers, static_cast<int64_t>(expected_sends.size()));
  std::vector<std::vector<std::pair<double, double>>> link_use(m.num_link_directions());
  std::vector<int64_t> link_bytes(m.num_link_directions(), 0);
  for (const auto& [key, e] : sends) {
    EXPECT_EQ(e->src_device, where[key.first]);
    EXPECT_GE(e->start_s, end[key.first]);
    EXPECT_EQ(e->bytes, expected_sends[key]);
    const Device& to = m.devices[e->device];
    const double copy_s = cost.transfer_time_s(e->bytes, e->src_device, e->device);
    if (!to.copy_engine && to.streams > to.full_speed_ops)  // its copy shares the device with its ops
      EXPECT_GE(e->end_s - e->start_s, copy_s - 1e-12 * e->end_s);
    else
      EXPECT_NEAR(e->end_s - e->start_s, copy_s, 1e-12 * e->end_s);
    for (LinkDirection h : m.route(e->src_device, e->device).hops) {
      // Copies run by their destination do not reserve links: only their traffic counts there.
      if (m.devices[e->device].copy_engine) link_use[h].push_back({e->start_s, e->end_s});
      link_bytes[h] += e->bytes;
    }
  }
  for (std::size_t h = 0; h < link_use.size(); ++h) {
    expect_disjoint(link_use[h], m.link_direction_name(static_cast<LinkDirection>(h)));
    EXPECT_EQ(r.links[h].bytes, link_bytes[h]);
  }

}

// Memory: time never goes back, transient never negative, all of it freed at the end, and the
// largest sample is the reported peak.
void expect_consistent_memory(const Machine& m, const SimResult& r) {
  const std::size_t nd = m.num_devices();
  std::vector<int64_t> last(nd, -1), peak(nd, 0);
  double prev_time = 0;
  for (const MemorySample& s : r.memory_timeline) {
    EXPECT_GE(s.time_s, prev_time);
    prev_time = s.time_s;
    EXPECT_GE(s.bytes, r.devices[s.device].persistent_bytes) << m.devices[s.device].name << " at " << s.time_s;
    last[s.device] = s.bytes;
    peak[s.device] = std::max(peak[s.device], s.bytes);
  }
  for (DeviceId d = 0; d < nd; ++d) {
    EXPECT_EQ(last[d], r.devices[d].persistent_bytes) << m.devices[d].name;
    EXPECT_EQ(peak[d], r.devices[d].peak_memory_bytes) << m.devices[d].name;
  }
}

TEST_P(SimProperties, HoldOnRandomDags) {
  const auto [kind, seed] = GetParam();
  const Machine m = make(kind);
  std::vector<double> speed(m.num_devices());
  for (std::size_t d = 0; d < speed.size(); ++d) speed[d] = 1.0 + 0.5 * static_cast<double>(d % 3);
  FixedCostModel cost(m, speed);
  OpGraph g = testing::random_dag(seed, 12, 9);
  for (OpId op = 0; op < g.num_ops(); op += 7) g.op(op).cpu_only = true;
  const Placement p = testing::random_placement(seed * 31 + 7, g.num_ops(), m.num_devices());
  Simulator sim(g, cost);
  SimResult r = sim.simulate(p, SimOptions{.record_timeline = true});
  expect_lower_bounds_and_copy_count(g, m, cost, sim, p, r);
  const TimelineFacts facts = expect_consistent_timeline(g, m, sim, p, r);
  expect_sends_and_links(g, m, cost, r, facts);
  expect_consistent_memory(m, r);
}

INSTANTIATE_TEST_SUITE_P(SeededDags, SimProperties,
                         ::testing::Combine(::testing::Values(MachineKind::kMesh3, MachineKind::kMesh2TwoStreams,
                                                              MachineKind::kSwitch, MachineKind::kMesh3NoCopyEngine,
                                                              MachineKind::kMesh2TwoStreamsNoCopyEngine,
                                                              MachineKind::kMesh2ThreeStreamsSharingTwo,
                                                              MachineKind::kMesh2TwoStreamsSharedNoCopyEngine),
                                            ::testing::Range(1u, 7u)));

}  // namespace
}  // namespace placelab
