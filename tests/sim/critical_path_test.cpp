// The critical path of a simulated step: hand-computed chains (an input, a slot, a link) and, on
// random graphs and placements, a path that accounts for the whole step.
#include "placelab/sim/critical_path.h"

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace placelab {
namespace {

using testing::add;
using testing::FixedCostModel;
using W = CriticalLink::Wait;

struct Traced {
  SimResult result;
  std::vector<CriticalLink> path;
};

Traced trace(const OpGraph& g, const Machine& m, const Placement& p) {
  FixedCostModel cost(m);
  Simulator sim(g, cost);
  Traced t{sim.simulate(p, SimOptions{.record_timeline = true}), {}};
  t.path = critical_path(g, sim, t.result);
  return t;
}

// (kind, op, wait) of each link, for compact expectations.
std::vector<std::tuple<TimelineEvent::Kind, OpId, W>> links(const Traced& t) {
  std::vector<std::tuple<TimelineEvent::Kind, OpId, W>> out;
  for (const CriticalLink& c : t.path) out.emplace_back(t.result.timeline[c.event].kind, t.result.timeline[c.event].op, c.wait);
  return out;
}

constexpr auto kOp = TimelineEvent::Kind::kOp;
constexpr auto kCopy = TimelineEvent::Kind::kTransfer;

TEST(CriticalPath, FollowsInputsOnOneDevice) {
  OpGraph g;
  const OpId a = add(g, "a", 1), b = add(g, "b", 2), c = add(g, "c", 0.5);
  g.add_edge(a, b, Tensor{});
  g.add_edge(b, c, Tensor{});
  const Traced t = trace(g, testing::mesh_machine(1), Placement{0, 0, 0});
  EXPECT_EQ(links(t), (decltype(links(t)){{kOp, a, W::kStart}, {kOp, b, W::kInput}, {kOp, c, W::kInput}}));
}

// Two independent ops on one slot: the second waits for the first's slot, as long as it ran.
TEST(CriticalPath, NamesTheOpHoldingTheSlot) {
  OpGraph g;
  const OpId a = add(g, "a", 3), b = add(g, "b", 1);
  const Traced t = trace(g, testing::mesh_machine(1), Placement{0, 0});
  EXPECT_EQ(links(t), (decltype(links(t)){{kOp, a, W::kStart}, {kOp, b, W::kDevice}}));
  EXPECT_DOUBLE_EQ(t.path[1].waited_s, 3);
}

// a on gpu:0 sends 1000 B to b on gpu:1 (1 s latency + 1 s at 1000 B/s).
TEST(CriticalPath, GoesThroughTheCopyOfAnInput) {
  OpGraph g;
  const OpId a = add(g, "a", 1, 1000), b = add(g, "b", 1);
  Tensor t;
  t.bytes = 1000;
  g.add_edge(a, b, t);
  const Traced tr = trace(g, testing::mesh_machine(2), Placement{0, 1});
  EXPECT_EQ(links(tr), (decltype(links(tr)){{kOp, a, W::kStart}, {kCopy, a, W::kInput}, {kOp, b, W::kInput}}));
  EXPECT_DOUBLE_EQ(tr.result.timeline[tr.path[1].event].end_s, 3);
}

// a and b finish together on gpu:0 and both send to gpu:1 over the one link: b's copy (issued
// second) waits for a's, and the path runs a → a's copy → b's copy → c.
TEST(CriticalPath, NamesTheCopyHoldingTheLink) {
  OpGraph g;
  const OpId a = add(g, "a", 1, 1000), b = add(g, "b", 1, 1000), c = add(g, "c", 1);
  Tensor t;
  t.bytes = 1000;
  g.add_edge(a, c, t);
  g.add_edge(b, c, t);
  const Traced tr = trace(g, testing::with_full_speed(testing::mesh_machine(2, /*streams=*/2), 2), Placement{0, 0, 1});
  EXPECT_EQ(links(tr), (decltype(links(tr)){{kOp, a, W::kStart}, {kCopy, a, W::kInput}, {kCopy, b, W::kLink}, {kOp, c, W::kInput}}));
  EXPECT_DOUBLE_EQ(tr.path[2].waited_s, 2);
}

// On random graphs and placements over a switch (copies share links): the path starts at 0, each
// event starts when the one before it ends, and the last ends the step.
TEST(CriticalPath, AccountsForTheWholeStep) {
  const Machine m = testing::switch_machine();
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const OpGraph g = testing::random_dag(seed, 8, 6);
    const Traced t = trace(g, m, testing::random_placement(seed, g.num_ops(), m.num_devices()));
    ASSERT_FALSE(t.path.empty());
    EXPECT_EQ(t.path.front().wait, W::kStart) << seed;
    EXPECT_EQ(t.result.timeline[t.path.front().event].start_s, 0) << seed;
    EXPECT_EQ(t.result.timeline[t.path.back().event].end_s, t.result.step_time_s) << seed;
    for (std::size_t i = 1; i < t.path.size(); ++i) {
      const TimelineEvent& prev = t.result.timeline[t.path[i - 1].event];
      const TimelineEvent& e = t.result.timeline[t.path[i].event];
      EXPECT_NEAR(e.start_s, prev.end_s, 1e-9) << seed << " link " << i;
      EXPECT_NE(t.path[i].wait, W::kStart) << seed << " link " << i;
    }
  }
  // Without a timeline (SimOptions::record_timeline off) there is no path.
  OpGraph one;
  add(one, "x", 1);
  FixedCostModel cost(m);
  const Simulator sim(one, cost);
  EXPECT_TRUE(critical_path(one, sim, sim.simulate(Placement{1})).empty());
}

}  // namespace
}  // namespace placelab
