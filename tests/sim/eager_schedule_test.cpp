// EagerSchedule (sim/eager_schedule.h): a step built op by op by a scheduler is the simulator's
// step, to the bit, and probing leaves no trace.
#include "placelab/sim/eager_schedule.h"

#include <gtest/gtest.h>

#include <random>

#include "placelab/core/error.h"
#include "sim_test_util.h"

namespace placelab::testing {
namespace {

// A PyTorch-like step: parameters first (no inputs, no work, persistent bytes), then a random
// layered DAG whose ops read earlier ops and parameters; the second half of the layers is the
// backward pass, a last layer the updates; some ops are CPU-only, some edges control edges.
OpGraph eager_dag(uint32_t seed, int layers = 10, int width = 5, int params = 8) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> time(0.1, 2.0);
  std::uniform_int_distribution<int64_t> bytes(1, 3000);
  OpGraph g;
  g.set_execution(Execution::kEager);
  for (int i = 0; i < params; ++i) add(g, "w" + std::to_string(i), 0.0, bytes(rng), 100);
  for (int l = 0; l < layers; ++l)
    for (int i = 0; i < width; ++i) {
      const OpId v = add(g, "op" + std::to_string(l) + "_" + std::to_string(i), time(rng), bytes(rng), 0,
                         std::uniform_int_distribution<int>(0, 14)(rng) == 0);
      g.op(v).phase = l == layers - 1 ? Phase::kUpdate : (2 * l >= layers ? Phase::kBackward : Phase::kForward);
      const int fan_in = std::uniform_int_distribution<int>(1, 3)(rng);
      for (int k = 0; k < fan_in; ++k) {
        OpId src = 0;
        if (l == 0 || std::uniform_int_distribution<int>(0, 4)(rng) == 0) {
          src = static_cast<OpId>(std::uniform_int_distribution<int>(0, params - 1)(rng));
        } else {
          const int src_layer = std::max(0, l - std::uniform_int_distribution<int>(1, 2)(rng));
          src = static_cast<OpId>(params + src_layer * width + std::uniform_int_distribution<int>(0, width - 1)(rng));
        }
        Tensor t;
        t.bytes = bytes(rng);
        t.control = std::uniform_int_distribution<int>(0, 9)(rng) == 0;
        g.add_edge(src, v, t);
      }
    }
  return g;
}

// switch_machine with a host that spends 0.05 s issuing an op.
Machine host_machine() {
  Machine m = switch_machine();
  m.devices[0].dispatch_s = 0.05;
  m.finalize();
  return m;
}

TEST(EagerSchedule, CommittingAPlacementInProgramOrderIsTheSimulatedStep) {
  const Machine m = host_machine();
  FixedCostModel cost(m);
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const OpGraph g = eager_dag(seed);
    const Simulator sim(g, cost);
    const Placement p = random_placement(seed, g.num_ops(), m.num_devices());
    EagerSchedule s(sim);
    for (OpId op = 0; op < g.num_ops(); ++op) s.commit(op, p[op]);
    const SimResult r = sim.simulate(p);
    EXPECT_EQ(s.makespan_s(), r.step_time_s) << "seed " << seed;
    for (OpId op = 0; op < g.num_ops(); ++op) EXPECT_EQ(s.device(op), sim.effective_device(op, p[op]));
  }
}

// A greedy scheduler probes every device before each commit: the step it ends with is the step of
// its placement, and a probe answers what the commit then does.
TEST(EagerSchedule, ProbesLeaveNoTraceAndAnswerWhatTheCommitDoes) {
  const Machine m = host_machine();
  FixedCostModel cost(m);
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    const OpGraph g = eager_dag(seed, 12, 6);
    const Simulator sim(g, cost);
    EagerSchedule s(sim);
    std::mt19937 rng(seed);
    for (OpId op = 0; op < g.num_ops(); ++op) {
      DeviceId best = 0;
      EagerSchedule::Times best_times;
      best_times.end_s = 1e300;
      for (DeviceId d = 0; d < m.num_devices(); ++d) {
        const EagerSchedule::Times t = s.probe(op, d);
        EXPECT_LE(t.start_s, t.end_s);
        // A coin decides between ties and an occasional worse device, so that the placements vary.
        if (t.end_s < best_times.end_s || std::uniform_int_distribution<int>(0, 5)(rng) == 0) {
          best = d;
          best_times = t;
        }
      }
      const EagerSchedule::Times committed = s.commit(op, best);
      EXPECT_EQ(committed.start_s, best_times.start_s) << "op " << op;
      EXPECT_EQ(committed.end_s, best_times.end_s) << "op " << op;
      EXPECT_EQ(committed.copy_bytes, best_times.copy_bytes) << "op " << op;
    }
    EXPECT_EQ(s.makespan_s(), sim.simulate(s.placement()).step_time_s) << "seed " << seed;
  }
}

// A parameter nobody committed goes with its first reader; its copies are then not needed.
TEST(EagerSchedule, ParametersComeAlongWithTheirFirstReader) {
  OpGraph g;
  g.set_execution(Execution::kEager);
  const OpId w = add(g, "w", 0.0, 1000, 400);
  const OpId a = add(g, "a", 5.0);
  g.add_edge(w, a, {.bytes = 1000});
  const Machine m = host_machine();
  FixedCostModel cost(m);
  const Simulator sim(g, cost);
  EagerSchedule s(sim);
  EXPECT_TRUE(s.is_parameter(w));
  EXPECT_FALSE(s.is_parameter(a));
  const EagerSchedule::Times on_gpu = s.probe(a, 2);
  EXPECT_EQ(on_gpu.copy_bytes, 0);
  EXPECT_FALSE(s.committed(w));
  s.commit(a, 2);
  EXPECT_TRUE(s.committed(w));
  EXPECT_EQ(s.device(w), 2u);
  EXPECT_EQ(s.makespan_s(), sim.simulate(Placement{2, 2}).step_time_s);
  // Committed first elsewhere, the parameter is copied to its reader.
  EagerSchedule apart(sim);
  apart.commit(w, 1);
  EXPECT_EQ(apart.probe(a, 2).copy_bytes, 1000);
  apart.commit(a, 2);
  EXPECT_EQ(apart.makespan_s(), sim.simulate(Placement{1, 2}).step_time_s);
}

TEST(EagerSchedule, RefusesDataflowGraphsAndOpsOutOfProgramOrder) {
  OpGraph g;
  const OpId a = add(g, "a", 1.0);
  const OpId b = add(g, "b", 1.0);
  const OpId c = add(g, "c", 1.0);
  g.add_edge(a, c);
  const Machine m = host_machine();
  FixedCostModel cost(m);
  {
    const Simulator dataflow(g, cost);
    EXPECT_THROW(EagerSchedule{dataflow}, InputError);
  }
  g.set_execution(Execution::kEager);
  const Simulator sim(g, cost);
  EagerSchedule s(sim);
  EXPECT_THROW(s.commit(b, 1), Error);  // a comes first
  EXPECT_THROW(s.probe(c, 1), Error);
  s.commit(a, 1);
  EXPECT_THROW(s.commit(a, 1), Error);  // twice
  s.commit(b, 1);
  s.commit(c, 2);
  EXPECT_EQ(s.makespan_s(), sim.simulate(Placement{1, 1, 2}).step_time_s);
}

}  // namespace
}  // namespace placelab::testing
