// The MCMC learner (FlexFlow's search): finds a known optimum, follows the Metropolis rule,
// is deterministic by seed and resumes exactly.
#include "placelab/learners/mcmc.h"

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "placelab/learners/grouping.h"
#include "placelab/learners/registry.h"
#include "placelab/learners/trainer.h"
#include "toy.h"

namespace placelab {
namespace {

using testing::AdditiveEnv;


TEST(Mcmc, FindsTheKnownOptimumOfAnAdditiveEnvironment) {
  const std::size_t G = 12, D = 4;
  AdditiveEnv env(testing::random_costs(G, D, 11));
  McmcLearner mcmc(SearchSpace{G, testing::device_range(D)}, McmcOptions{}, 3);
  const TrainSummary s = testing::train_on(mcmc, env, 2400);
  EXPECT_EQ(s.status, TrainSummary::Status::kFinished);
  EXPECT_NEAR(s.best_step_time_s, env.optimum(), 1e-12);
  EXPECT_EQ(s.best_placement, env.argmin());
  EXPECT_GT(mcmc.accepted(), 0);
  EXPECT_LT(mcmc.accepted(), 2400);
}

// The first sample is the start (every group on the first device); each later proposal moves
// exactly one group; a faster proposal is always accepted, a much slower one (β·f = 20·1) almost
// never.
TEST(Mcmc, StartsOnTheFirstDeviceAndMovesOneGroupAtATime) {
  const std::size_t G = 5;
  McmcLearner m(SearchSpace{G, {2, 5, 7}}, McmcOptions{}, 1);
  m.set_sample_budget(100);
  auto p = m.propose(8);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], Placement(G, 2));
  m.observe(p, std::vector<Measurement>{{1.0, false, "t"}});
  for (int i = 0; i < 50; ++i) {
    const Placement before = m.mode();
    auto q = m.propose(1);
    int moved = 0;
    for (std::size_t g = 0; g < G; ++g) moved += q[0][g] != before[g];
    EXPECT_EQ(moved, 1);
    const bool faster = i % 2 == 0;
    const double t = faster ? m.current_time_s() * 0.99 : m.current_time_s() * 2;
    m.observe(q, std::vector<Measurement>{{t, false, "t"}});
    if (faster) {
      EXPECT_EQ(m.mode(), q[0]);
    }
  }
  McmcOptions random_start;
  random_start.start = "random";
  McmcLearner r(SearchSpace{64, {0, 1}}, random_start, 4);
  const Placement start = r.mode();
  EXPECT_NE(std::count(start.begin(), start.end(), DeviceId{0}), 0);
  EXPECT_NE(std::count(start.begin(), start.end(), DeviceId{1}), 0);
}

TEST(Mcmc, DeterministicBySeedAndResumesExactly) {
  const std::size_t G = 6, D = 3;
  auto curve_of = [&](uint64_t seed) {
    AdditiveEnv env(testing::random_costs(G, D, 31));
    std::unique_ptr<Learner> l = make_learner(LearnerConfig{"mcmc", {}}, LearnerContext{SearchSpace{G, testing::device_range(D)}, seed});
    std::vector<double> out;
    for (const CurvePoint& c : testing::train_on(*l, env, 300).curve) out.push_back(c.step_time_s);
    return out;
  };
  EXPECT_EQ(curve_of(9), curve_of(9));
  EXPECT_NE(curve_of(9), curve_of(10));

  SearchSpace space{G, {0, 2, 4}};
  AdditiveEnv env(testing::random_costs(G, 5, 41));
  McmcLearner a(space, McmcOptions{}, 8);
  a.set_sample_budget(500);
  for (int i = 0; i < 17; ++i) {
    auto ps = a.propose(5);
    a.observe(ps, env.evaluate(ps));
  }
  McmcLearner b(space, McmcOptions{}, 99);
  b.load_state(a.save_state());
  EXPECT_EQ(b.save_state(), a.save_state());
  for (int i = 0; i < 40; ++i) {
    auto pa = a.propose(1), pb = b.propose(1);
    ASSERT_EQ(pa, pb);
    auto ma = env.evaluate(pa);
    a.observe(pa, ma);
    b.observe(pb, ma);
  }
  EXPECT_EQ(a.save_state(), b.save_state());
  McmcLearner other(SearchSpace{G, {0, 1, 2}}, McmcOptions{}, 1);
  EXPECT_THROW(other.load_state(a.save_state()), InputError);
}

// A baseline's op placement as a start: each group on the device most of its ops are on.
TEST(Mcmc, StartsFromTheBestBaselineProjectedOntoTheGroups) {
  const Grouping grouping(std::vector<GroupId>{0, 0, 0, 1, 1, 2});
  const std::vector<DeviceId> gpus{1, 2};
  // Group 0: two ops on 2, one on 1 → 2. Group 1: one each → the earlier of `gpus`, 1. Group 2:
  // its op on the CPU (0, not in the space) → gpus[0].
  const Placement start = grouping.majority(Placement{2, 1, 2, 2, 1, 0}, gpus);
  EXPECT_EQ(start, (Placement{2, 1, 1}));
  McmcOptions o;
  o.start = "best_baseline";
  McmcLearner m(SearchSpace{3, gpus}, o, 1, start);
  EXPECT_EQ(m.mode(), start);
  m.set_sample_budget(10);
  EXPECT_EQ(m.propose(1)[0], start);
  EXPECT_THROW(McmcLearner(SearchSpace{3, gpus}, o, 1), InputError);  // no baseline in the run
  EXPECT_EQ(make_learner(LearnerConfig{"mcmc", {{"start", std::string("best_baseline")}}},
                         LearnerContext{SearchSpace{3, gpus}, 1, nullptr, start})
                ->mode(),
            start);
}

TEST(Mcmc, OptionsAreValidated) {
  McmcOptions o;
  o.beta = 0;
  EXPECT_THROW(o.validate(), InputError);
  o = {};
  o.start = "expert";
  try {
    o.validate();
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "mcmc.start = expert: must be first, random or best_baseline");
  }
}

}  // namespace
}  // namespace placelab
