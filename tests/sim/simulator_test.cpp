// Hand-computed schedules: every expected number below is derived in the comment above it from
// the rules of docs/simulator.md, with op times taken from FixedCostModel (time = op.flops).
#include "placelab/sim/bounds.h"
#include "placelab/sim/simulator.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "placelab/hwmodels/cost_model.h"
#include "sim_test_util.h"

namespace placelab {
namespace {

using testing::add;
using testing::FixedCostModel;
using testing::mesh_machine;
using testing::switch_machine;

// Data edge of `bytes`.
Tensor data(int64_t bytes) { return Tensor{bytes, false}; }
Tensor control() { return Tensor{0, true}; }

const TimelineEvent& op_event(const SimResult& r, OpId op) {
  for (const TimelineEvent& e : r.timeline)
    if (e.kind == TimelineEvent::Kind::kOp && e.op == op) return e;
  throw Error("op not in timeline");
}

SimResult run(const OpGraph& g, const CostModel& cost, const Placement& p) {
  Simulator sim(g, cost);
  return sim.simulate(p, SimOptions{.record_timeline = true});
}

TEST(Simulator, ChainOnOneDeviceRunsBackToBack) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1);
  add(g, "b", 2);
  add(g, "c", 3);
  g.add_edge(0, 1, data(100));
  g.add_edge(1, 2, data(100));
  SimResult r = run(g, cost, {0, 0, 0});
  // 1 + 2 + 3; local edges cost nothing.
  EXPECT_DOUBLE_EQ(r.step_time_s, 6);
  EXPECT_DOUBLE_EQ(r.devices[0].busy_s, 6);
  EXPECT_EQ(r.devices[0].num_ops, 3);
  EXPECT_EQ(r.devices[1].num_ops, 0);
  EXPECT_EQ(r.transfers, 0);
  EXPECT_DOUBLE_EQ(op_event(r, 1).start_s, 1);
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 3);
  EXPECT_DOUBLE_EQ(op_event(r, 2).end_s, 6);
  for (const LinkStats& l : r.links) EXPECT_EQ(l.bytes, 0);
}

TEST(Simulator, IndependentOpsOnTwoDevicesOverlap) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 2);
  add(g, "b", 3);
  EXPECT_DOUBLE_EQ(run(g, cost, {0, 1}).step_time_s, 3);  // max(2, 3)
  EXPECT_DOUBLE_EQ(run(g, cost, {1, 1}).step_time_s, 5);  // 2 + 3 on one stream
}

TEST(Simulator, CrossDeviceEdgeAddsLatencyPlusBytesOverBandwidth) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1);
  add(g, "b", 1);
  g.add_edge(0, 1, data(500));
  SimResult r = run(g, cost, {0, 1});
  // a: [0,1]; send: 1 s latency + 500 B / 1000 B/s = 1.5 s, [1, 2.5]; b: [2.5, 3.5].
  EXPECT_DOUBLE_EQ(r.step_time_s, 3.5);
  EXPECT_EQ(r.transfers, 1);
  EXPECT_EQ(r.links[0].bytes, 500);  // link 0 = gpu:0–gpu:1, direction 0 = gpu:0→gpu:1
  EXPECT_DOUBLE_EQ(r.links[0].busy_s, 1.5);
  EXPECT_EQ(r.links[1].bytes, 0);
  EXPECT_DOUBLE_EQ(op_event(r, 1).start_s, 2.5);
  // Placing both on one device removes the transfer.
  EXPECT_DOUBLE_EQ(run(g, cost, {1, 1}).step_time_s, 2);
}

// A copy model that is not affine in bytes: the simulator must ask it per transfer rather than
// tabulate latency + bytes × slope.
class SqrtCopyCost : public FixedCostModel {
 public:
  using FixedCostModel::FixedCostModel;
  double transfer_time_s(int64_t bytes, DeviceId src, DeviceId dst) const override {
    return src == dst ? 0 : 1 + std::sqrt(static_cast<double>(bytes));
  }
};

TEST(Simulator, NonAffineTransferTimesAreAskedPerTransfer) {
  Machine m = mesh_machine(2);
  SqrtCopyCost cost(m);
  OpGraph g;
  add(g, "a", 1);
  add(g, "b", 1);
  add(g, "c", 1);
  g.add_edge(0, 2, data(400));
  g.add_edge(1, 2, data(100));
  // a [0,1], b [1,2] on gpu:0; a's copy 1 + √400 = 21 s [1, 22]; b's 1 + √100 = 11 s waits for
  // the link: [22, 33]; c [33, 34].
  SimResult r = run(g, cost, {0, 0, 1});
  EXPECT_DOUBLE_EQ(r.step_time_s, 34);
  EXPECT_DOUBLE_EQ(r.links[0].busy_s, 32);
}

// The analytic model promises affine copies (CostModel::transfer_is_affine), so the simulator
// skips its probes; the same model asked through a wrapper that promises nothing is probed. On a
// machine of 300 devices (the pair table is filled on every core from 256) under random switches
// and link figures, both give the same step to the bit, and both equal the route's own figures.
TEST(Simulator, APromiseOfAffineCopiesSkipsTheProbesNotTheLine) {
  Machine m;
  m.name = "wide";
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> bandwidth(1e9, 5e10), latency(0, 1e-5);
  for (int i = 0; i < 300; ++i) m.devices.push_back(testing::device("gpu:" + std::to_string(i), DeviceKind::kGpu));
  for (int i = 0; i < 12; ++i) m.switches.push_back("sw:" + std::to_string(i));
  for (int i = 1; i < 12; ++i)
    m.links.push_back(testing::link(m.switches[i], m.switches[std::uniform_int_distribution<int>(0, i - 1)(rng)],
                           bandwidth(rng), latency(rng)));
  for (const Device& d : m.devices)
    m.links.push_back(testing::link(d.name, m.switches[std::uniform_int_distribution<int>(0, 11)(rng)], bandwidth(rng), latency(rng)));
  m.finalize();
  const AnalyticCostModel promised(m);
  const testing::UnpromisingCost probed(promised);
  ASSERT_TRUE(promised.transfer_is_affine(0, 1));
  ASSERT_FALSE(probed.transfer_is_affine(0, 1));
  const OpGraph g = testing::random_dag(11, 30, 20);
  const Simulator a(g, promised), b(g, probed);
  for (uint32_t seed = 0; seed < 5; ++seed) {
    const Placement p = testing::random_placement(seed, g.num_ops(), m.num_devices());
    const SimResult ra = a.simulate(p), rb = b.simulate(p);
    testing::expect_identical(ra, rb);
    EXPECT_GT(ra.transfers, 0);
  }
  // One copy alone: the route's latency plus its bytes over the bottleneck.
  OpGraph two;
  add(two, "a", 1e-3, 1 << 20);
  add(two, "b", 1e-3);
  two.add_edge(0, 1, data(1 << 20));
  const Route r = m.route(3, 250);
  const SimResult one = Simulator(two, promised).simulate(Placement{3, 250});
  const double copy = r.latency_s + static_cast<double>(1 << 20) / r.bandwidth_Bps;
  EXPECT_NEAR(one.step_time_s, promised.op_time_s(two.op(0), 3) + copy + promised.op_time_s(two.op(1), 250),
              1e-12 * one.step_time_s);
}

TEST(Simulator, ADeviceWithoutCopyEngineRunsItsCopiesOnItsOwnSlot) {
  Machine m = mesh_machine(2);
  for (Device& d : m.devices) d.copy_engine = false;  // as the CPU executor's devices
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1);  // 0, gpu:0
  add(g, "b", 3);  // 1, gpu:1, a source
  add(g, "c", 1);  // 2, gpu:1, reads a
  add(g, "e", 2);  // 3, gpu:1, ordered after a by a control edge
  g.add_edge(0, 2, data(500));
  g.add_edge(0, 3, control());
  // a [0,1]. Its copy and e are both ready on gpu:1 at 1, which runs b until 3. An op goes before
  // a copy ready at the same time: e [3,5], then the copy (1 + 500/1000 = 1.5 s) [5,6.5] on
  // gpu:1's slot, then c [6.5,7.5]. With a copy engine the copy would run [1,2.5] beside b.
  SimResult r = run(g, cost, {0, 1, 1, 1});
  EXPECT_DOUBLE_EQ(r.step_time_s, 7.5);
  EXPECT_DOUBLE_EQ(op_event(r, 3).start_s, 3);
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 6.5);
  EXPECT_DOUBLE_EQ(r.devices[1].busy_s, 6);  // ops only: b + e + c
  EXPECT_EQ(r.transfers, 1);
  EXPECT_EQ(r.links[0].bytes, 500);           // traffic is still counted on the link
  EXPECT_DOUBLE_EQ(r.links[0].busy_s, 1.5);
  int copies = 0;
  for (const TimelineEvent& e : r.timeline) {
    if (e.kind != TimelineEvent::Kind::kTransfer) continue;
    ++copies;
    EXPECT_DOUBLE_EQ(e.start_s, 5);
    EXPECT_DOUBLE_EQ(e.end_s, 6.5);
    EXPECT_EQ(e.device, 1u);
    EXPECT_EQ(e.src_device, 0u);
  }
  EXPECT_EQ(copies, 1);

  // A copy ready before a waiting op goes first; copies do not serialize on the link: two
  // producers on gpu:0 send to gpu:1, which has two slots, and both copies run at once.
  Machine m2 = testing::with_full_speed(mesh_machine(2, 2), 2);  // independent slots, as the executor's cores
  for (Device& d : m2.devices) d.copy_engine = false;
  FixedCostModel cost2(m2);
  OpGraph g2;
  add(g2, "p", 1);  // 0, gpu:0
  add(g2, "q", 1);  // 1, gpu:0 (second slot)
  add(g2, "x", 1);  // 2, gpu:1, reads p
  add(g2, "y", 1);  // 3, gpu:1, reads q
  g2.add_edge(0, 2, data(500));
  g2.add_edge(1, 3, data(500));
  // p and q [0,1]; both copies ready at 1 run [1,2.5] on gpu:1's two slots; x, y [2.5,3.5].
  // (Through a copy engine they would share the link direction: [1,2.5] and [2.5,4].)
  SimResult r2 = run(g2, cost2, {0, 0, 1, 1});
  EXPECT_DOUBLE_EQ(r2.step_time_s, 3.5);
  EXPECT_DOUBLE_EQ(r2.links[0].busy_s, 3);
  for (Device& d : m2.devices) d.copy_engine = true;
  FixedCostModel cost3(m2);
  EXPECT_DOUBLE_EQ(run(g2, cost3, {0, 0, 1, 1}).step_time_s, 5);
}

TEST(Simulator, TransfersSharingALinkDirectionSerialize) {
  Machine m = switch_machine();  // cpu:0=0, gpu:0=1, gpu:1=2, gpu:2=3, gpu:3=4
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1);
  add(g, "b", 1);
  add(g, "c", 1);
  g.add_edge(0, 2, data(500));
  g.add_edge(1, 2, data(500));
  // a on gpu:0, b on gpu:2, c on gpu:1: both sends end with hop sw→gpu:1.
  // Each takes 2 s latency (two hops) + 0.5 s. a's (lower id, issued first): [1, 3.5];
  // b's waits for sw→gpu:1: [3.5, 6]. c: [6, 7].
  SimResult r = run(g, cost, {1, 3, 2});
  EXPECT_DOUBLE_EQ(r.step_time_s, 7);
  EXPECT_EQ(r.transfers, 2);
  const LinkDirection sw_to_gpu1 = 2 * 2 + 1;  // link 2 = gpu:1–sw, direction 1 = sw→gpu:1
  EXPECT_EQ(r.links[sw_to_gpu1].bytes, 1000);
  EXPECT_DOUBLE_EQ(r.links[sw_to_gpu1].busy_s, 5);
  int transfers_seen = 0;
  for (const TimelineEvent& e : r.timeline) {
    if (e.kind != TimelineEvent::Kind::kTransfer) continue;
    ++transfers_seen;
    EXPECT_DOUBLE_EQ(e.start_s, e.op == 0 ? 1 : 3.5);
    EXPECT_DOUBLE_EQ(e.end_s, e.op == 0 ? 3.5 : 6);
  }
  EXPECT_EQ(transfers_seen, 2);
}

TEST(Simulator, TransfersOnDisjointLinksOverlap) {
  Machine m = switch_machine();
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1);
  add(g, "b", 1);
  add(g, "c", 1);
  add(g, "d", 1);
  g.add_edge(0, 2, data(500));
  g.add_edge(1, 3, data(500));
  // gpu:0→gpu:1 and gpu:2→gpu:3 share no link direction: both sends [1, 3.5]; c, d: [3.5, 4.5].
  SimResult r = run(g, cost, {1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(r.step_time_s, 4.5);
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 3.5);
  EXPECT_DOUBLE_EQ(op_event(r, 3).start_s, 3.5);
}

TEST(Simulator, OneSendPerProducerAndDestinationDevice) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1);
  add(g, "b", 1);
  add(g, "c", 1);
  add(g, "d", 1);
  g.add_edge(0, 1, data(300));
  g.add_edge(0, 2, data(500));
  g.add_edge(0, 3, data(200));
  // b, c on gpu:1 share one copy of a's output, sized by the largest edge (500 B): [1, 2.5].
  // d on gpu:0 reads it locally: [1, 2]. b: [2.5, 3.5], c: [3.5, 4.5].
  SimResult r = run(g, cost, {0, 1, 1, 0});
  EXPECT_EQ(r.transfers, 1);
  EXPECT_EQ(r.links[0].bytes, 500);
  EXPECT_DOUBLE_EQ(r.step_time_s, 4.5);
  EXPECT_DOUBLE_EQ(op_event(r, 3).end_s, 2);
}

TEST(Simulator, TwoStreamsRunTwoOpsAtOnce) {
  Machine m = testing::with_full_speed(mesh_machine(1, /*streams=*/2), 2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 2);
  add(g, "b", 3);
  add(g, "c", 1);
  // a on slot 0 [0,2], b on slot 1 [0,3], c takes the slot a frees: slot 0 [2,3].
  SimResult r = run(g, cost, {0, 0, 0});
  EXPECT_DOUBLE_EQ(r.step_time_s, 3);
  EXPECT_EQ(op_event(r, 0).stream, 0);
  EXPECT_EQ(op_event(r, 1).stream, 1);
  EXPECT_EQ(op_event(r, 2).stream, 0);
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 2);
  EXPECT_DOUBLE_EQ(r.devices[0].busy_s, 6);
}

// Shared devices (streams > full_speed_ops): ops in flight split the device, each at
// full_speed / in-flight of its speed while they outnumber full_speed (docs/simulator.md, "Compute").
TEST(Simulator, SharedStreamsSplitTheDeviceBetweenOpsInFlight) {
  Machine m = mesh_machine(1, /*streams=*/2);  // full_speed_ops = 1
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 2);
  add(g, "b", 3);
  // Both start at 0 at half speed: a's 2 s of work are done at 4, when b has 1 s left, which it
  // does alone at full speed: [0, 5]. The step is the device's whole work.
  SimResult r = run(g, cost, {0, 0});
  EXPECT_DOUBLE_EQ(op_event(r, 0).start_s, 0);
  EXPECT_DOUBLE_EQ(op_event(r, 0).end_s, 4);
  EXPECT_DOUBLE_EQ(op_event(r, 1).start_s, 0);
  EXPECT_DOUBLE_EQ(op_event(r, 1).end_s, 5);
  EXPECT_EQ(op_event(r, 1).stream, 1);
  EXPECT_DOUBLE_EQ(r.step_time_s, 5);
  EXPECT_DOUBLE_EQ(r.devices[0].busy_s, 5);  // work, not elapsed time
}

TEST(Simulator, OpsUpToFullSpeedRunAtFullSpeedOnASharedDevice) {
  Machine m = testing::with_full_speed(mesh_machine(1, /*streams=*/3), 2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1);
  add(g, "b", 2);
  add(g, "c", 3);
  // Three in flight on two ops' worth of speed: each at 2/3. a's 1 s is done at 1.5 (b has 1 s
  // left, c 2 s); then two in flight run at full speed: b ends at 2.5, c at 3.5.
  SimResult r = run(g, cost, {0, 0, 0});
  EXPECT_DOUBLE_EQ(op_event(r, 0).end_s, 1.5);
  EXPECT_DOUBLE_EQ(op_event(r, 1).end_s, 2.5);
  EXPECT_DOUBLE_EQ(op_event(r, 2).end_s, 3.5);
  EXPECT_DOUBLE_EQ(r.step_time_s, 3.5);
}

TEST(Simulator, AnOpStartingOnASharedDeviceSlowsTheOnesInFlight) {
  Machine m = mesh_machine(2, /*streams=*/2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 4);  // 0, gpu:0 from 0
  add(g, "p", 1);  // 1, gpu:1 [0, 1]
  add(g, "b", 2);  // 2, gpu:0 after p
  g.add_edge(1, 2, control());
  // a alone for 1 s (3 s left); from 1 a and b at half speed: b's 2 s take 4, to 5, when a has
  // 1 s left; a alone again ends at 6.
  SimResult r = run(g, cost, {0, 1, 0});
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 1);
  EXPECT_DOUBLE_EQ(op_event(r, 2).end_s, 5);
  EXPECT_DOUBLE_EQ(op_event(r, 0).end_s, 6);
  EXPECT_DOUBLE_EQ(r.step_time_s, 6);
}

TEST(Simulator, OpsEndingTogetherOnASharedDeviceEndInIdOrderAtOneInstant) {
  Machine m = mesh_machine(1, /*streams=*/2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 2);
  add(g, "b", 2);
  add(g, "c", 1);  // after a and b
  g.add_edge(0, 2, data(8));
  g.add_edge(1, 2, data(8));
  // a and b at half speed both end at 4; c alone [4, 5].
  SimResult r = run(g, cost, {0, 0, 0});
  EXPECT_DOUBLE_EQ(op_event(r, 0).end_s, 4);
  EXPECT_DOUBLE_EQ(op_event(r, 1).end_s, 4);
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 4);
  EXPECT_DOUBLE_EQ(r.step_time_s, 5);
}

TEST(Simulator, ACopyRunByASharedDeviceSharesItWithItsOps) {
  Machine m = mesh_machine(2, /*streams=*/2);
  for (Device& d : m.devices) d.copy_engine = false;
  m.finalize();
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "p", 1);  // 0, gpu:0 [0, 1]
  add(g, "q", 4);  // 1, gpu:1 from 0
  add(g, "c", 1);  // 2, gpu:1, reads p's 1000 bytes
  g.add_edge(0, 2, data(1000));
  // q alone until 1 (3 s left). The copy (1 s latency + 1000 B at 1000 B/s = 2 s of work) runs
  // on gpu:1's free slot beside q, both at half speed: it ends at 5, when q has 1 s left. c then
  // shares with q: both have 1 s and end at 7.
  SimResult r = run(g, cost, {0, 1, 1});
  const TimelineEvent* copy = nullptr;
  for (const TimelineEvent& e : r.timeline)
    if (e.kind == TimelineEvent::Kind::kTransfer) copy = &e;
  ASSERT_NE(copy, nullptr);
  EXPECT_DOUBLE_EQ(copy->start_s, 1);
  EXPECT_DOUBLE_EQ(copy->end_s, 5);
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 5);
  EXPECT_DOUBLE_EQ(op_event(r, 2).end_s, 7);
  EXPECT_DOUBLE_EQ(op_event(r, 1).end_s, 7);
  EXPECT_DOUBLE_EQ(r.step_time_s, 7);
}

TEST(Simulator, TheWorkBoundCountsASharedDeviceAsItsFullSpeedOps) {
  Machine m = testing::with_full_speed(mesh_machine(2, /*streams=*/4), 2);
  FixedCostModel cost(m);
  OpGraph g;
  for (int i = 0; i < 8; ++i) add(g, "op" + std::to_string(i), 1);
  Simulator sim(g, cost);
  const StepLowerBound bound = step_lower_bound(g, sim);
  EXPECT_EQ(bound.slots, 4);  // 2 devices × 2 full-speed ops, not × 4 streams
  EXPECT_DOUBLE_EQ(bound.work_s, 2);
  // All eight on gpu:0 (4 streams, 2 at full speed): 8 s of work at 2 ops' speed.
  EXPECT_DOUBLE_EQ(sim.simulate(Placement(8, 0)).step_time_s, 4);
}

TEST(Simulator, EarliestReadyRunsFirstEvenWithALargerId) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "blocker", 5);  // 0, gpu:0
  add(g, "late", 1);     // 1, gpu:0, ready at 2 (after q)
  add(g, "early", 1);    // 2, gpu:0, ready at 1 (after p)
  add(g, "p", 1);        // 3, gpu:1 [0,1]
  add(g, "q", 1);        // 4, gpu:1 [1,2]
  g.add_edge(4, 1, control());
  g.add_edge(3, 2, control());
  g.add_edge(3, 4, data(8));
  // gpu:0 is busy until 5; then early (ready 1) before late (ready 2) despite its larger id.
  SimResult r = run(g, cost, {0, 0, 0, 1, 1});
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 5);
  EXPECT_DOUBLE_EQ(op_event(r, 1).start_s, 6);
  EXPECT_DOUBLE_EQ(r.step_time_s, 7);
}

TEST(Simulator, OpsReadyAtTheSameInstantRunInIdOrder) {
  Machine m = mesh_machine(3);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "p", 1);  // 0, gpu:1
  add(g, "q", 1);  // 1, gpu:2
  add(g, "A", 1);  // 2, gpu:0, after q
  add(g, "B", 1);  // 3, gpu:0, after p
  g.add_edge(1, 2, control());
  g.add_edge(0, 3, control());
  // p and q both finish at 1; p's finish (lower id) makes B ready first, but A and B are both
  // ready at 1, so A (id 2) runs first: A [1,2], B [2,3].
  SimResult r = run(g, cost, {1, 2, 0, 0});
  EXPECT_DOUBLE_EQ(op_event(r, 2).start_s, 1);
  EXPECT_DOUBLE_EQ(op_event(r, 3).start_s, 2);
}

TEST(Simulator, PeakMemoryOfAKnownScheduleIncludesReceivedCopies) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1, /*output=*/100, /*persistent=*/1000);  // gpu:0
  add(g, "b", 1, 200, 0);                                // gpu:0
  add(g, "c", 1, 50, 10);                                // gpu:1
  g.add_edge(0, 1, data(100));
  g.add_edge(0, 2, data(100));
  g.add_edge(1, 2, data(200));
  SimResult r = run(g, cost, {0, 0, 1});
  // gpu:0: a [0,1] allocates 100; b [1,2] allocates 200 → 300 transient (peak).
  //   a's copy to gpu:1 [1, 2.1] (1 + 100/1000); b's copy [2.1, 3.3] waits for the link.
  //   a's output is freed at 2.1 (b finished at 2, its send at 2.1); b's at 3.3.
  // gpu:1: a's copy 100 from 1; b's copy 200 from its issue at 2 → 300; c [3.3, 4.3] adds 50 →
  //   350 (peak); all freed when c finishes.
  EXPECT_EQ(r.devices[0].persistent_bytes, 1000);
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 1300);
  EXPECT_EQ(r.devices[1].persistent_bytes, 10);
  EXPECT_EQ(r.devices[1].peak_memory_bytes, 360);
  EXPECT_DOUBLE_EQ(r.step_time_s, 1 + 1.1 + 1.2 + 1);
  EXPECT_FALSE(r.oom);
  // Every transient byte comes back: the last sample of each device is its persistent bytes.
  for (DeviceId d = 0; d < 2; ++d) {
    int64_t last = -1;
    for (const MemorySample& s : r.memory_timeline)
      if (s.device == d) last = s.bytes;
    EXPECT_EQ(last, r.devices[d].persistent_bytes) << d;
  }
}

TEST(Simulator, AReceivedCopyIsAllocatedWhenIssuedNotWhenTheLinkFrees) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1, /*output=*/100, /*persistent=*/0);  // gpu:0
  add(g, "b", 1, 900, 0);                            // gpu:0
  add(g, "c", 1, 50, 0);                             // gpu:1, reads a and b
  add(g, "p", 2.05, 500, 0);                         // gpu:1, no consumers
  g.add_edge(0, 2, data(100));
  g.add_edge(1, 2, data(900));
  SimResult r = run(g, cost, {0, 0, 1, 1});
  // gpu:0: a [0,1], b [1,2]. a's copy [1, 2.1] (1 + 100/1000). b's copy is issued at 2 and waits
  // for the link until 2.1: [2.1, 4.0]. c [4, 5].
  // gpu:1: p [0, 2.05] holds 500 until it finishes; a's copy 100 from 1 → 600; b's copy 900 from
  // its issue at 2, while p still holds its 500 → 1500 (peak; as TensorFlow's Recv allocates when
  // the rendezvous completes, before the copy waits for the link); p frees 500 at 2.05; c adds 50
  // at 4 → 1050. (Allocated at the link's start, 2.1, the peak would be 1050.)
  EXPECT_DOUBLE_EQ(r.step_time_s, 5);
  EXPECT_EQ(r.devices[1].peak_memory_bytes, 1500);
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 1000);
  bool sampled = false;
  for (const MemorySample& s : r.memory_timeline)
    if (s.device == 1 && s.bytes == 1500) {
      EXPECT_DOUBLE_EQ(s.time_s, 2);
      sampled = true;
    }
  EXPECT_TRUE(sampled);
  // The same without a timeline.
  Simulator sim(g, cost);
  SimWorkspace ws;
  SimResult fast;
  sim.simulate(Placement{0, 0, 1, 1}, ws, fast);
  EXPECT_EQ(fast.devices[1].peak_memory_bytes, 1500);
}

TEST(Simulator, FreesAtAnInstantPrecedeAllocations) {
  Machine m = mesh_machine(1);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1, 100);
  add(g, "b", 1, 100);
  add(g, "c", 1, 100);
  g.add_edge(0, 1, data(100));
  g.add_edge(1, 2, data(100));
  // At 2, b's finish frees a's output before c allocates its own: peak 200, never 300.
  EXPECT_EQ(run(g, cost, {0, 0, 0}).devices[0].peak_memory_bytes, 200);
}

TEST(Simulator, OutputsWithoutConsumersAreFreedWhenTheOpFinishes) {
  Machine m = mesh_machine(1);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1, 100);
  add(g, "b", 1, 100);
  // a [0,1] then b [1,2], nothing reads a: 100 at a time.
  EXPECT_EQ(run(g, cost, {0, 0}).devices[0].peak_memory_bytes, 100);
}

TEST(Simulator, OomNamesTheDeviceWithTheLargestExcess) {
  Machine m = mesh_machine(2, 1, /*memory_bytes=*/1000);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1, 0, 1500);
  add(g, "b", 2, 0, 1200);
  SimResult r = run(g, cost, {1, 0});
  EXPECT_TRUE(r.oom);
  EXPECT_EQ(r.oom_device, 1);
  EXPECT_EQ(r.oom_excess_bytes, 500);
  EXPECT_DOUBLE_EQ(r.step_time_s, 2);  // still simulated to the end
  EXPECT_EQ(oom_message(r, m), "out of memory on gpu:1: peak 1500 bytes exceeds capacity 1000 bytes by 500 bytes");
  SimResult fits = run(g, cost, {0, 0});
  EXPECT_TRUE(fits.oom);  // 2700 on gpu:0
  EXPECT_EQ(fits.oom_device, 0);
  EXPECT_EQ(fits.oom_excess_bytes, 1700);
}

TEST(Simulator, NoOomWhenPeakEqualsCapacity) {
  Machine m = mesh_machine(1, 1, 1000);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1, 400, 600);
  SimResult r = run(g, cost, {0});
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 1000);
  EXPECT_FALSE(r.oom);
  EXPECT_EQ(oom_message(r, m), "");
}

TEST(Simulator, CpuOnlyOpsOnAGpuRunOnTheFirstCpu) {
  Machine m = switch_machine();
  FixedCostModel cost(m, {0.5, 1, 1, 1, 1});  // the CPU runs at half speed
  OpGraph g;
  add(g, "lookup", 1, 0, 64, /*cpu_only=*/true);
  add(g, "use", 1);
  g.add_edge(0, 1, data(1000));
  Simulator sim(g, cost);
  EXPECT_EQ(sim.effective_device(0, 1), 0);
  EXPECT_EQ(sim.effective_device(1, 1), 1);
  // lookup placed on gpu:0 runs on cpu:0 for 2 s; its output goes cpu:0→sw→gpu:0:
  // 2 s latency + 1000/1000 s = 3 s; use [5, 6].
  SimResult r = sim.simulate(Placement{1, 1}, SimOptions{.record_timeline = true});
  EXPECT_EQ(op_event(r, 0).device, 0);
  EXPECT_EQ(r.devices[0].num_ops, 1);
  EXPECT_EQ(r.devices[0].persistent_bytes, 64);
  EXPECT_EQ(r.devices[1].persistent_bytes, 0);
  EXPECT_EQ(r.transfers, 1);
  EXPECT_DOUBLE_EQ(r.step_time_s, 6);

  // Without a CPU the op stays where it was placed.
  Machine gpus = mesh_machine(2);
  FixedCostModel gpu_cost(gpus);
  SimResult stays = run(g, gpu_cost, {1, 1});
  EXPECT_EQ(op_event(stays, 0).device, 1);
  EXPECT_DOUBLE_EQ(stays.step_time_s, 2);
}

TEST(Simulator, ControlEdgesAcrossDevicesOnlyOrder) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1, 100);
  add(g, "b", 1);
  g.add_edge(0, 1, control());
  // No data: no transfer, b starts when a finishes.
  SimResult r = run(g, cost, {0, 1});
  EXPECT_EQ(r.transfers, 0);
  EXPECT_DOUBLE_EQ(op_event(r, 1).start_s, 1);
  EXPECT_DOUBLE_EQ(r.step_time_s, 2);
  EXPECT_EQ(r.devices[0].peak_memory_bytes, 100);
}

// The lower bound by hand: a → {b, c} → d with times 1, 3, 2, 1 s on gpu:0 and twice as long on
// gpu:1. Critical path a, b, d at the fastest device: 5 s; work (1 + 3 + 2 + 1) / 2 slots = 3.5 s.
// Restricted to gpu:1 alone: path 10 s, work 14 s over one slot. The persistent bytes of one op
// exceed both devices' memory together: no placement fits.
TEST(StepLowerBound, CriticalPathWorkAndMemoryByHand) {
  Machine m = testing::mesh_machine(2, 1, 1000);
  FixedCostModel cost(m, {1.0, 0.5});
  OpGraph g;
  for (auto [name, t] : {std::pair{"a", 1.0}, {"b", 3.0}, {"c", 2.0}, {"d", 1.0}}) g.add_op({.name = name, .flops = t});
  g.add_edge(0, 1, {.bytes = 8});
  g.add_edge(0, 2, {.bytes = 8});
  g.add_edge(1, 3, {.bytes = 8});
  g.add_edge(2, 3, {.bytes = 8});
  Simulator sim(g, cost);
  StepLowerBound b = step_lower_bound(g, sim);
  EXPECT_DOUBLE_EQ(b.critical_path_s, 5.0);
  EXPECT_DOUBLE_EQ(b.work_s, 3.5);
  EXPECT_DOUBLE_EQ(b.step_s, 5.0);
  EXPECT_TRUE(b.memory_feasible);
  const std::vector<DeviceId> slow{1};
  b = step_lower_bound(g, sim, slow);
  EXPECT_DOUBLE_EQ(b.critical_path_s, 10.0);
  EXPECT_DOUBLE_EQ(b.work_s, 14.0);
  EXPECT_DOUBLE_EQ(b.step_s, 14.0);
  EXPECT_GE(sim.simulate(std::vector<DeviceId>(4, 1)).step_time_s, b.step_s);
  g.op(0).persistent_bytes = 2001;
  Simulator heavy(g, cost);
  b = step_lower_bound(g, heavy);
  EXPECT_EQ(b.memory_bytes, 2000);
  EXPECT_FALSE(b.memory_feasible);
}

TEST(Simulator, RejectsBadPlacementsAndCycles) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1);
  add(g, "b", 1);
  g.add_edge(0, 1, data(1));
  Simulator sim(g, cost);
  EXPECT_THROW(sim.simulate(Placement{0}), InputError);
  EXPECT_THROW(sim.simulate(Placement{0, 2}), InputError);
  std::vector<Placement> batch = {{0, 0}, {0, 7}};
  std::vector<SimResult> out(2);
  try {
    sim.simulate_batch(batch, out, 2);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("batch[1]"), std::string::npos) << e.what();
  }
  g.add_edge(1, 0, data(1));
  EXPECT_THROW(Simulator(g, cost), InputError);
}

TEST(Simulator, TimelineOnlyWhenRequested) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1, 10);
  add(g, "b", 1);
  g.add_edge(0, 1, data(10));
  Simulator sim(g, cost);
  SimWorkspace ws;
  SimResult r;
  sim.simulate(Placement{0, 1}, ws, r, SimOptions{.record_timeline = true});
  EXPECT_EQ(r.timeline.size(), 3u);  // two ops, one transfer
  EXPECT_FALSE(r.memory_timeline.empty());
  sim.simulate(Placement{0, 1}, ws, r);
  EXPECT_TRUE(r.timeline.empty());
  EXPECT_TRUE(r.memory_timeline.empty());
}

TEST(Simulator, EmptyGraphTakesNoTime) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  SimResult r = Simulator(g, cost).simulate(Placement{});
  EXPECT_EQ(r.step_time_s, 0);
  EXPECT_EQ(r.devices.size(), 2u);
  EXPECT_FALSE(r.oom);
}

}  // namespace
}  // namespace placelab
