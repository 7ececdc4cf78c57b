#include "placelab/learners/policy.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "placelab/core/error.h"

namespace placelab {
namespace {

SoftmaxTablePolicy random_policy(std::size_t groups, std::size_t devices, uint64_t seed, double scale) {
  SoftmaxTablePolicy p(groups, devices);
  Rng rng(seed);
  for (double& u : p.mutable_logits()) u = scale * (2 * uniform01(rng) - 1);
  return p;
}

TEST(SoftmaxTablePolicy, StartsUniform) {
  SoftmaxTablePolicy p(3, 4);
  for (double x : p.probabilities()) EXPECT_DOUBLE_EQ(x, 0.25);
}

TEST(SoftmaxTablePolicy, SetProbabilitiesRoundTrips) {
  SoftmaxTablePolicy p(1, 3);
  const std::vector<double> want = {0.7, 0.2, 0.1};
  p.set_probabilities(0, want);
  const auto got = p.probabilities();
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(got[j], want[j], 1e-15);
}

TEST(SoftmaxTablePolicy, SampleFrequenciesMatchProbabilities) {
  SoftmaxTablePolicy p(1, 3);
  p.set_probabilities(0, std::vector<double>{0.6, 0.3, 0.1});
  Rng rng(42);
  std::vector<int> count(3, 0);
  Choice c(1);
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    p.sample(rng, c);
    ++count[c[0]];
  }
  // Binomial standard deviation at n = 2e5 is ≤ 0.0011; 5 sigma.
  EXPECT_NEAR(count[0] / double(n), 0.6, 0.0055);
  EXPECT_NEAR(count[1] / double(n), 0.3, 0.0055);
  EXPECT_NEAR(count[2] / double(n), 0.1, 0.0055);
}

TEST(SoftmaxTablePolicy, LogProbGradientMatchesFiniteDifferences) {
  SoftmaxTablePolicy p = random_policy(4, 5, 7, 2.0);
  const Choice c = {0, 3, 4, 1};
  std::vector<double> grad(20, 0.0);
  p.add_log_prob_gradient(c, 1.0, grad);
  const double h = 1e-6;
  for (std::size_t i = 0; i < 20; ++i) {
    SoftmaxTablePolicy plus = p, minus = p;
    plus.mutable_logits()[i] += h;
    minus.mutable_logits()[i] -= h;
    const double fd = (plus.log_prob(c) - minus.log_prob(c)) / (2 * h);
    EXPECT_NEAR(grad[i], fd, 1e-8) << "logit " << i;
  }
}

TEST(PpoObjective, GradientMatchesFiniteDifferences) {
  const std::size_t G = 3, D = 4;
  const SoftmaxTablePolicy old_policy = random_policy(G, D, 1, 1.5);
  const SoftmaxTablePolicy policy = random_policy(G, D, 2, 1.5);
  const std::vector<double> old_probs = old_policy.probabilities();
  const std::vector<Choice> choices = {{0, 1, 2}, {3, 3, 0}, {1, 0, 2}, {2, 2, 1}};
  const std::vector<double> adv = {0.4, -1.3, 0.2, 0.9};
  for (double beta : {0.0, 1.0, 7.5}) {
    std::vector<double> grad(G * D);
    ppo_objective(policy, old_probs, choices, adv, beta, grad);
    const double h = 1e-6;
    for (std::size_t i = 0; i < G * D; ++i) {
      SoftmaxTablePolicy plus = policy, minus = policy;
      plus.mutable_logits()[i] += h;
      minus.mutable_logits()[i] -= h;
      const double fd = (ppo_objective(plus, old_probs, choices, adv, beta, {}) -
                         ppo_objective(minus, old_probs, choices, adv, beta, {})) /
                        (2 * h);
      EXPECT_NEAR(grad[i], fd, 1e-7) << "beta " << beta << " logit " << i;
    }
  }
}

TEST(PpoObjective, AtTheOldPolicyIsTheMeanAdvantageTimesGroupsAndHasNoKl) {
  // Ratios are 1 and KL is 0 at u = u_old: J = 1/K Σ_n Σ_m A_n = M · mean(A).
  const SoftmaxTablePolicy policy = random_policy(5, 3, 3, 1.0);
  const std::vector<Choice> choices = {{0, 1, 2, 0, 1}, {2, 2, 2, 1, 0}};
  const std::vector<double> adv = {1.0, -3.0};
  EXPECT_NEAR(ppo_objective(policy, policy.probabilities(), choices, adv, 10.0, {}), 5 * -1.0, 1e-12);
}

TEST(CrossEntropy, ClosedFormIsEliteFrequency) {
  const std::vector<Choice> elites = {{0, 2}, {1, 2}, {0, 0}, {0, 2}};
  const auto p = cross_entropy_solution(elites, 2, 3);
  const std::vector<double> want = {0.75, 0.25, 0.0, 0.25, 0.0, 0.75};
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(p[i], want[i]);
}

TEST(CrossEntropy, ClosedFormMaximisesTheEliteLikelihood) {
  // Post Theorem 1: the frequencies minimise −Σ_p log f(d_p); any perturbation does worse.
  const std::vector<Choice> elites = {{0, 1}, {1, 1}, {0, 2}, {0, 1}, {2, 1}};
  SoftmaxTablePolicy best(2, 3);
  const auto p = cross_entropy_solution(elites, 2, 3);
  for (std::size_t m = 0; m < 2; ++m) best.set_probabilities(m, std::span<const double>(p).subspan(m * 3, 3));
  auto nll = [&](const SoftmaxTablePolicy& pol) {
    double s = 0;
    for (const auto& e : elites) s -= pol.log_prob(e);
    return s;
  };
  Rng rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    SoftmaxTablePolicy other = best;
    for (double& u : other.mutable_logits()) u += 0.3 * (2 * uniform01(rng) - 1);
    EXPECT_GT(nll(other), nll(best));
  }
}

TEST(MeanKl, ZeroForEqualAndPositiveOtherwise) {
  const std::vector<double> p = {0.5, 0.5, 0.2, 0.8};
  const std::vector<double> q = {0.4, 0.6, 0.2, 0.8};
  EXPECT_EQ(mean_kl(p, p, 2), 0.0);
  EXPECT_NEAR(mean_kl(p, q, 2), (0.5 * std::log(0.5 / 0.4) + 0.5 * std::log(0.5 / 0.6)) / 2, 1e-15);
}

TEST(SoftmaxTablePolicy, TextFormIsBitExact) {
  const SoftmaxTablePolicy p = random_policy(3, 7, 9, 3.0);
  const SoftmaxTablePolicy q = SoftmaxTablePolicy::from_string(p.to_string());
  ASSERT_EQ(q.logits().size(), p.logits().size());
  for (std::size_t i = 0; i < p.logits().size(); ++i) EXPECT_EQ(p.logits()[i], q.logits()[i]);
  EXPECT_THROW(SoftmaxTablePolicy::from_string("3 7 1 2"), InputError);
  EXPECT_THROW(SoftmaxTablePolicy::from_string("garbage"), InputError);
}

}  // namespace
}  // namespace placelab
