// critpath, the search that reads the simulated step's critical path: reaches the exhaustive
// optimum over the groups of a small fork-join problem (it places ops, so it may beat it), tries the
// path's moves first, is deterministic by seed and resumes exactly.
#include "placelab/learners/critpath.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "placelab/core/error.h"
#include "placelab/learners/registry.h"
#include "placelab/learners/trainer.h"
#include "placelab/sim/sim_environment.h"
#include "toy.h"

namespace placelab {
namespace {

// Four branches of five 1 ms ops between a source and a sink, on four toy GPUs: a group per branch
// (its variable and chain) and one for the source, sink and CPU-only save (group 0: Grouping numbers
// groups by their first op).
struct ForkJoin {
  Machine machine = testing::toy_machine(4);
  testing::FlopsCostModel cost{machine};
  OpGraph graph = testing::fork_join(4, 5, 1e10, 1 << 20);
  Simulator sim{graph, cost};
  Grouping grouping;
  SearchSpace space{graph.num_ops(), {1, 2, 3, 4}};

  ForkJoin() {
    std::vector<GroupId> labels(graph.num_ops(), 4);
    for (OpId op = 0; op < graph.num_ops(); ++op) {
      const std::string& name = graph.op(op).name;
      if (name.starts_with("branch")) labels[op] = static_cast<GroupId>(name[6] - '0');
    }
    grouping = Grouping(std::move(labels));
  }
  double time(const Placement& ops) const { return sim.simulate(ops).step_time_s; }
  // The best of all 4^5 placements that keep the groups whole.
  double group_optimum() const {
    double best = INFINITY;
    Placement p(5);
    for (int code = 0; code < 1024; ++code) {
      for (int g = 0, c = code; g < 5; ++g, c /= 4) p[static_cast<std::size_t>(g)] = static_cast<DeviceId>(1 + c % 4);
      best = std::min(best, time(grouping.expand(p)));
    }
    return best;
  }
};

CritpathOptions from_first() {
  CritpathOptions o;
  o.start = "first";
  return o;
}

TrainSummary run(Learner& l, const ForkJoin& f, int64_t budget) {
  SimEnvironment env(f.sim);
  TrainerOptions o;
  o.sample_budget = budget;
  o.batch_size = 12;
  return train(l, Grouping::identity(f.graph.num_ops()), env, o);
}

TEST(Critpath, ReachesTheExhaustiveGroupOptimumOfAForkJoin) {
  const ForkJoin f;
  const double single = f.time(Placement(f.graph.num_ops(), 1)), optimum = f.group_optimum();
  for (bool op_moves : {true, false}) {
    CritpathOptions o = from_first();
    o.op_moves = op_moves;
    CritpathLearner l(f.space, o, 1, f.graph, f.sim, f.grouping);
    const TrainSummary s = run(l, f, 150);
    EXPECT_EQ(s.status, TrainSummary::Status::kFinished);
    EXPECT_NEAR(s.curve.front().step_time_s, single, 1e-15);  // the start is measured first
    EXPECT_LT(s.best_step_time_s, 0.4 * single);
    if (op_moves) {
      EXPECT_LE(s.best_step_time_s, optimum + 1e-12) << "single GPU " << single;
    } else {
      EXPECT_NEAR(s.best_step_time_s, optimum, 1e-12) << "single GPU " << single;
      // Whole groups only: its best placement keeps every group on one device.
      EXPECT_EQ(f.grouping.expand(f.grouping.contract(s.best_placement)), s.best_placement);
    }
  }
}

// From one GPU, all four branches queue on it: the path's first suggestions move a branch to an
// idle GPU, so the first candidate proposed after the start already moves a branch group.
TEST(Critpath, TriesThePathsMovesFirst) {
  const ForkJoin f;
  CritpathLearner l(f.space, from_first(), 1, f.graph, f.sim, f.grouping);
  l.set_sample_budget(100);
  const auto start = l.propose(12);
  ASSERT_EQ(start.size(), 1u);
  SimEnvironment env(f.sim);
  l.observe(start, env.evaluate(start));
  const auto first = l.propose(12);
  ASSERT_EQ(first.size(), 3u);  // options.step
  std::set<GroupId> moved;
  for (OpId op = 0; op < f.graph.num_ops(); ++op)
    if (first[0][op] != 1) moved.insert(f.grouping.group_of(op));
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_NE(*moved.begin(), f.grouping.group_of(f.graph.find("src").value())) << "a branch, not the source/sink group";
  EXPECT_LT(f.time(first[0]), f.time(start[0]));
}

TEST(Critpath, DeterministicBySeedAndResumesExactly) {
  const ForkJoin f;
  auto curve_of = [&](uint64_t seed) {
    std::unique_ptr<Learner> l =
        make_learner(LearnerConfig{"critpath", {{"start", std::string("first")}, {"kick", int64_t{2}}}},
                     LearnerContext{.space = f.space, .seed = seed, .graph = &f.graph, .simulator = &f.sim,
                                    .grouping = &f.grouping});
    std::vector<double> out;
    for (const CurvePoint& c : run(*l, f, 300).curve) out.push_back(c.step_time_s);
    return out;
  };
  EXPECT_EQ(curve_of(9), curve_of(9));
  EXPECT_NE(curve_of(9), curve_of(10));  // kicks draw from the seed once the search is stuck

  SimEnvironment env(f.sim);
  auto measure = [&](const std::vector<Placement>& ops) { return env.evaluate(ops); };
  CritpathLearner a(f.space, from_first(), 8, f.graph, f.sim, f.grouping);
  a.set_sample_budget(400);
  for (int i = 0; i < 23; ++i) {
    auto ps = a.propose(5);
    a.observe(ps, measure(ps));
  }
  CritpathLearner b(f.space, from_first(), 99, f.graph, f.sim, f.grouping);
  b.load_state(a.save_state());
  EXPECT_EQ(b.save_state(), a.save_state());
  for (int i = 0; i < 60; ++i) {
    auto pa = a.propose(3), pb = b.propose(3);
    ASSERT_EQ(pa, pb);
    auto ma = measure(pa);
    a.observe(pa, ma);
    b.observe(pb, ma);
  }
  EXPECT_EQ(a.save_state(), b.save_state());
  EXPECT_GT(a.kicks(), 0);
  CritpathLearner other(SearchSpace{f.graph.num_ops(), {1, 2, 3}}, from_first(), 1, f.graph, f.sim, f.grouping);
  EXPECT_THROW(other.load_state(a.save_state()), InputError);
}

TEST(Critpath, StartsFromTheBestBaselineAndValidatesItsOptions) {
  const ForkJoin f;
  const Placement start = f.grouping.expand(Placement{1, 2, 3, 4, 1});
  CritpathLearner l(f.space, CritpathOptions{}, 1, f.graph, f.sim, f.grouping, start);
  l.set_sample_budget(10);
  EXPECT_EQ(l.propose(4), std::vector<Placement>{start});
  // Whole groups only: the start is projected onto the groups (each on its ops' majority device).
  Placement split = start;
  split[f.graph.find("branch0/op3").value()] = 4;  // its group stays on its majority device
  CritpathOptions groups_only;
  groups_only.op_moves = false;
  CritpathLearner g(f.space, groups_only, 1, f.graph, f.sim, f.grouping, split);
  g.set_sample_budget(10);
  EXPECT_EQ(g.propose(4), std::vector<Placement>{start});
  // start: both — the projection first; once half the budget is spent, the baseline op for op.
  CritpathLearner both(f.space, CritpathOptions{}, 1, f.graph, f.sim, f.grouping, split);
  both.set_sample_budget(40);
  SimEnvironment env(f.sim);
  std::vector<Placement> proposed;
  while (both.samples_seen() < 40) {
    const auto ps = both.propose(3);
    proposed.insert(proposed.end(), ps.begin(), ps.end());
    both.observe(ps, env.evaluate(ps));
  }
  EXPECT_EQ(proposed.front(), start);
  const auto second = std::find(proposed.begin(), proposed.end(), split);
  ASSERT_NE(second, proposed.end());
  EXPECT_GE(second - proposed.begin(), 20);
  EXPECT_LE(second - proposed.begin(), 22);  // at the end of the step that reached half the budget
  EXPECT_THROW(CritpathLearner(f.space, CritpathOptions{}, 1, f.graph, f.sim, f.grouping), InputError);
  CritpathOptions o;
  o.step = 0;
  try {
    o.validate();
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "critpath.step = 0: must be in [1, 100000]");
  }
  o = {};
  o.start = "random";
  try {
    o.validate();
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "critpath.start = random: must be both, best_baseline, best_baseline_groups or first");
  }
}

}  // namespace
}  // namespace placelab
