#include "placelab/learners/algorithms.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "placelab/learners/registry.h"
#include "placelab/learners/trainer.h"
#include "toy.h"

namespace placelab {
namespace {

using testing::AdditiveEnv;

std::vector<Measurement> times(std::initializer_list<double> ts) {
  std::vector<Measurement> out;
  for (double t : ts) out.push_back({t, false, "test"});
  return out;
}

double mean_time(const std::vector<CurvePoint>& curve, std::size_t from, std::size_t to) {
  double s = 0;
  for (std::size_t i = from; i < to; ++i) s += curve[i].oom ? 100.0 : curve[i].step_time_s;
  return s / static_cast<double>(to - from);
}


TEST(Post, ConvergesToTheKnownOptimumOfAnAdditiveEnvironment) {
  const std::size_t G = 12, D = 4;
  AdditiveEnv env(testing::random_costs(G, D, 11));
  PostLearner post(SearchSpace{G, testing::device_range(D)}, PostOptions{}, 3);
  const TrainSummary s = testing::train_on(post, env, 2400);
  EXPECT_EQ(s.status, TrainSummary::Status::kFinished);
  EXPECT_NEAR(s.best_step_time_s, env.optimum(), 1e-12);
  EXPECT_EQ(s.best_placement, env.argmin());
  EXPECT_EQ(post.mode(), env.argmin());
  // The policy has concentrated: the last 120 samples average within 2 % of the optimum.
  EXPECT_LT(mean_time(s.curve, 2280, 2400), 1.02 * env.optimum());
}

TEST(Post, AvoidsPlacementsThatRunOutOfMemory) {
  // The cheapest device of every group is device 0, but at most 4 groups fit on a device: the
  // optimum spreads the groups, and OOM samples (100 s) must teach the policy to.
  const std::size_t G = 8, D = 2;
  std::vector<std::vector<double>> cost(G, {0.1, 0.3});
  AdditiveEnv env(cost, 4);
  PostLearner post(SearchSpace{G, testing::device_range(D)}, PostOptions{}, 5);
  const TrainSummary s = testing::train_on(post, env, 1200);
  EXPECT_NEAR(s.best_step_time_s, 4 * 0.1 + 4 * 0.3, 1e-12);
  // Uniform sampling fits 70 of 256 placements (mean ≈ 73 s); at the end most samples fit and the
  // most probable placement is a feasible 4 + 4 split.
  EXPECT_LT(mean_time(s.curve, 1100, 1200), 0.25 * mean_time(s.curve, 0, 100));
  const Placement mode = post.mode();
  EXPECT_EQ(std::count(mode.begin(), mode.end(), DeviceId{0}), 4);
}

TEST(Post, FollowsAlgorithmOneScheduleAndCrossEntropyUpdate) {
  // K = 2, N = 4, ρ = 0.5, ε = 0.1 decaying over a budget of 8: samples 2 → PPO, 4 → CE.
  const std::size_t G = 2, D = 3;
  PostOptions o;
  o.ppo_every = 2;
  o.ce_every = 4;
  o.elite_fraction = 0.5;
  PostLearner post(SearchSpace{G, {0, 1, 2}}, o, 1);
  post.set_sample_budget(8);
  EXPECT_EQ(post.samples_until_update(), 2u);
  EXPECT_EQ(post.propose(10).size(), 2u);  // never beyond the update boundary
  post.observe(std::vector<Placement>{{0, 1}, {2, 1}}, times({1.0, 2.0}));
  EXPECT_NE(post.policy().probabilities(), SoftmaxTablePolicy(G, D).probabilities()) << "PPO ran at n = 2";
  const std::vector<Placement> second = {{1, 2}, {0, 0}};
  post.observe(second, times({0.5, 3.0}));
  // Elites: the best 2 of the 4 samples since the last CE: {1,2} (0.5 s) and {0,1} (1.0 s).
  // ε at n = 4 of 8 is 0.1 · (1 − 4/8) = 0.05.
  const double eps = 0.05;
  const std::vector<double> freq = {0.5, 0.5, 0.0, 0.0, 0.5, 0.5};
  const auto p = post.policy().probabilities();
  for (std::size_t i = 0; i < freq.size(); ++i) EXPECT_NEAR(p[i], (1 - eps) * freq[i] + eps / 3, 1e-9) << i;
  EXPECT_EQ(post.samples_until_update(), 2u);
}

TEST(Post, AdaptsBetaToTheKlTarget) {
  PostOptions o;
  o.kl_target = 1e-9;  // any real update overshoots: β must double
  PostLearner a(SearchSpace{2, {0, 1}}, o, 1);
  a.set_sample_budget(100);
  std::vector<Placement> ps(12, Placement{0, 1});
  ps[0] = {1, 0};
  std::vector<Measurement> ms(12, Measurement{1.0, false, "t"});
  ms[0].step_time_s = 0.2;
  a.observe(ps, ms);
  EXPECT_GT(a.last_kl(), 0.0);
  EXPECT_EQ(a.beta(), 2.0);
  o.kl_target = 1e9;  // any update undershoots: β must halve
  PostLearner b(SearchSpace{2, {0, 1}}, o, 1);
  b.set_sample_budget(100);
  b.observe(ps, ms);
  EXPECT_EQ(b.beta(), 0.5);
}

TEST(Ppo, ImprovesTheMeanStepTime) {
  const std::size_t G = 10, D = 4;
  AdditiveEnv env(testing::random_costs(G, D, 21));
  PpoLearner ppo(SearchSpace{G, testing::device_range(D)}, PpoOptions{}, 4);
  const TrainSummary s = testing::train_on(ppo, env, 1200);
  EXPECT_LT(mean_time(s.curve, 1080, 1200), 0.8 * mean_time(s.curve, 0, 120));
}

TEST(CrossEntropyLearner, ImprovesTheMeanStepTime) {
  const std::size_t G = 10, D = 4;
  AdditiveEnv env(testing::random_costs(G, D, 22));
  CrossEntropyLearner ce(SearchSpace{G, testing::device_range(D)}, CrossEntropyOptions{}, 4);
  const TrainSummary s = testing::train_on(ce, env, 1200);
  EXPECT_LT(mean_time(s.curve, 1080, 1200), 0.8 * mean_time(s.curve, 0, 120));
}

TEST(Reinforce, ImprovesTheMeanStepTime) {
  const std::size_t G = 10, D = 4;
  AdditiveEnv env(testing::random_costs(G, D, 23));
  ReinforceLearner pg(SearchSpace{G, testing::device_range(D)}, ReinforceOptions{}, 4);
  EXPECT_EQ(pg.baseline(), ReinforceOptions{}.failing_signal);  // starts at the failing signal
  const TrainSummary s = testing::train_on(pg, env, 1200);
  EXPECT_LT(mean_time(s.curve, 1080, 1200), 0.8 * mean_time(s.curve, 0, 120));
}

TEST(Reinforce, FailingSignalAndFeasibleOnlyPhase) {
  // K = 2: one placement that ran in 0.25 s (√T = 0.5) and one OOM (failing signal 10). B starts
  // at 10 and absorbs the batch sample by sample with decay 0.9; in the feasible-only phase the
  // OOM sample is ignored by both the gradient and B.
  const std::vector<Placement> batch = {{0}, {1}};
  std::vector<Measurement> ms = {{0.25, false, "t"}, {0, true, "t"}};
  for (double after : {0.0, 1.0}) {
    ReinforceOptions o;
    o.samples_per_update = 2;
    o.feasible_only_after = after;
    ReinforceLearner pg(SearchSpace{1, {0, 1}}, o, 1);
    pg.set_sample_budget(10);
    pg.observe(batch, ms);
    const auto p = pg.policy().probabilities();
    EXPECT_GT(p[0], 0.5) << "the placement that ran (lower √T than B) gains probability";
    if (after == 0.0) EXPECT_NEAR(pg.baseline(), 0.9 * 10 + 0.1 * 0.5, 1e-12);
    else EXPECT_NEAR(pg.baseline(), 0.9 * (0.9 * 10 + 0.1 * 0.5) + 0.1 * 10, 1e-12);
  }
}

TEST(Learners, SameSeedGivesIdenticalCurvesAndOtherSeedsDiffer) {
  const std::size_t G = 6, D = 3;
  auto curve_of = [&](const std::string& which, uint64_t seed, int64_t batch) {
    AdditiveEnv env(testing::random_costs(G, D, 31));
    SearchSpace space{G, testing::device_range(D)};
    std::unique_ptr<Learner> l = make_learner(LearnerConfig{which, {}}, LearnerContext{space, seed});
    std::vector<double> out;
    for (const CurvePoint& c : testing::train_on(*l, env, 300, batch).curve) out.push_back(c.step_time_s);
    return out;
  };
  for (const char* which : {"post", "ppo", "cross_entropy", "policy_gradient"}) {
    EXPECT_EQ(curve_of(which, 9, 12), curve_of(which, 9, 12)) << which;
    EXPECT_NE(curve_of(which, 9, 12), curve_of(which, 10, 12)) << which;
    // propose() stops at update boundaries, so the trainer's batch size cannot change the run.
    EXPECT_EQ(curve_of(which, 9, 12), curve_of(which, 9, 5)) << which;
  }
}

TEST(Learners, StateRoundTripContinuesIdentically) {
  const std::size_t G = 5;
  SearchSpace space{G, {0, 2, 4}};
  AdditiveEnv env(testing::random_costs(G, 5, 41));
  PostLearner a(space, PostOptions{}, 8);
  a.set_sample_budget(500);
  for (int i = 0; i < 17; ++i) {  // stop mid-batch: buffers and baselines must be saved too
    auto ps = a.propose(5);
    std::vector<Placement> ops(ps.begin(), ps.end());
    a.observe(ps, env.evaluate(ops));
  }
  PostLearner b(space, PostOptions{}, 99);
  b.load_state(a.save_state());
  EXPECT_EQ(b.save_state(), a.save_state());
  for (int i = 0; i < 20; ++i) {
    auto pa = a.propose(7), pb = b.propose(7);
    ASSERT_EQ(pa, pb);
    auto ma = env.evaluate(pa);
    a.observe(pa, ma);
    b.observe(pb, ma);
  }
  EXPECT_EQ(a.policy().logits().size(), b.policy().logits().size());
  EXPECT_TRUE(std::equal(a.policy().logits().begin(), a.policy().logits().end(), b.policy().logits().begin()));

  ReinforceLearner r(space, ReinforceOptions{}, 1);
  EXPECT_THROW(r.load_state(a.save_state()), InputError);  // another learner's state
  PostLearner other(SearchSpace{G, {0, 1, 2}}, PostOptions{}, 1);
  EXPECT_THROW(other.load_state(a.save_state()), InputError);  // another search space
}

TEST(Factory, BuildsEachLearnerByName) {
  for (const char* name : {"reinforce", "ppo", "cross_entropy", "post"})
    EXPECT_EQ(make_learner(LearnerConfig{name, {}}, LearnerContext{SearchSpace{2, {0, 1}}, 1})->name(), name);
  EXPECT_EQ(make_learner(LearnerConfig{"policy_gradient", {}}, LearnerContext{SearchSpace{2, {0, 1}}, 1})->name(),
            "reinforce");
  EXPECT_THROW(make_learner(LearnerConfig{"genetic", {}}, LearnerContext{SearchSpace{2, {0, 1}}, 1}), InputError);
  EXPECT_THROW(make_learner(LearnerConfig{"post", {{"epsilon", 2.0}}}, LearnerContext{SearchSpace{2, {0, 1}}, 1}),
               InputError);
}

TEST(Options, ValidateNamesFieldValueAndRule) {
  PostOptions p;
  p.ce_every = 50;
  try {
    p.validate();
    FAIL() << "ce_every = 50 with ppo_every = 12 must be rejected";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "post.ce_every = 50: must be a multiple of ppo_every (12)");
  }
  PpoOptions ppo;
  ppo.kl_target = -1;
  EXPECT_THROW(ppo.validate(), InputError);
  CrossEntropyOptions ce;
  ce.elite_fraction = 0;
  try {
    ce.validate();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "cross_entropy.elite_fraction = 0: must be in (0, 1]");
  }
  ReinforceOptions pg;
  pg.learning_rate = 0;
  EXPECT_THROW(ReinforceLearner(SearchSpace{1, {0}}, pg, 1), InputError);
  EXPECT_THROW(PostLearner(SearchSpace{0, {0}}, PostOptions{}, 1), InputError);
  EXPECT_THROW(PostLearner(SearchSpace{2, {1, 1}}, PostOptions{}, 1), InputError);
}

}  // namespace
}  // namespace placelab
