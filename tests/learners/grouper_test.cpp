// The learned groupers: gradients of the feed-forward grouper against finite differences (double,
// each activation, with and without the entropy term), sampling that follows its softmax, the unit
// feature layout of docs/learners.md, and merging units into learned groups.
#include "placelab/learners/grouper.h"

#include <gtest/gtest.h>

#include "gradient_check.h"
#include "placelab/core/error.h"
#include "toy.h"

namespace placelab {
namespace {

using testing::expect_gradients_match;
using testing::fill_uniform;

// Parameters: the activation, the entropy weight, and the number of units (more than one of the
// grouper's 256-unit blocks, with a partial last block, in the second case).
class GrouperGradient : public ::testing::TestWithParam<std::tuple<GrouperActivation, double, int>> {};

TEST_P(GrouperGradient, MatchesFiniteDifferences) {
  const auto [activation, entropy_weight, units] = GetParam();
  Rng rng(7);
  GrouperOptions o;
  o.groups = 4;
  o.hidden = 5;
  o.activation = activation;
  FeedForwardGrouper<double> grouper(o, /*features=*/6, rng);
  for (nn::Param<double>* p : grouper.params().params()) fill_uniform(p->value, rng, 0.8);  // biases too
  nn::Matrix<double> X(6, units);
  fill_uniform(X, rng);
  grouper.forward(X);
  std::vector<std::vector<GroupId>> drawn(3);
  for (auto& a : drawn) grouper.sample(rng, a);
  const std::vector<double> c{-0.7, 1.3, 0.4};
  const auto loss = [&] {
    grouper.forward(X);
    double l = entropy_weight * grouper.mean_entropy();
    for (std::size_t k = 0; k < drawn.size(); ++k) l += c[k] * grouper.log_prob(drawn[k]);
    return l;
  };
  expect_gradients_match(grouper.params(), loss, [&] {
    grouper.params().zero_grad();
    grouper.forward(X);
    grouper.backward(X, drawn, c, entropy_weight);
  });
}

INSTANTIATE_TEST_SUITE_P(Activations, GrouperGradient,
                         ::testing::Combine(::testing::Values(GrouperActivation::kRelu, GrouperActivation::kTanh,
                                                              GrouperActivation::kNone),
                                            ::testing::Values(0.0, 0.05), ::testing::Values(9, 600)),
                         [](const auto& test) {
                           return to_string(std::get<0>(test.param)) +
                                  (std::get<1>(test.param) > 0 ? "_entropy_" : "_") +
                                  std::to_string(std::get<2>(test.param)) + "units";
                         });

// EAGLE's PPO weighs each unit's choice by its own clipped ratio: a coefficient per grouping and unit.
TEST(Grouper, PerUnitCoefficientsMatchFiniteDifferences) {
  Rng rng(9);
  GrouperOptions o;
  o.groups = 3;
  o.hidden = 4;
  FeedForwardGrouper<double> grouper(o, 5, rng);
  for (nn::Param<double>* p : grouper.params().params()) fill_uniform(p->value, rng, 0.8);
  nn::Matrix<double> X(5, 300);
  fill_uniform(X, rng);
  grouper.forward(X);
  std::vector<std::vector<GroupId>> drawn(2);
  for (auto& a : drawn) grouper.sample(rng, a);
  std::vector<std::vector<double>> c(2, std::vector<double>(300));
  for (auto& row : c)
    for (double& x : row) x = 2 * uniform01(rng) - 1;
  const auto loss = [&] {
    grouper.forward(X);
    double l = -0.02 * grouper.mean_entropy();
    for (std::size_t k = 0; k < drawn.size(); ++k)
      for (nn::Index u = 0; u < 300; ++u)
        l += c[k][static_cast<std::size_t>(u)] * grouper.log_probs()(drawn[k][static_cast<std::size_t>(u)], u);
    return l;
  };
  expect_gradients_match(grouper.params(), loss, [&] {
    grouper.params().zero_grad();
    grouper.forward(X);
    grouper.backward(X, drawn, std::span<const std::vector<double>>(c), -0.02);
  });
}

TEST(Grouper, SamplesFollowTheSoftmaxAndReproduceFromTheSeed) {
  Rng rng(3);
  GrouperOptions o;
  o.groups = 5;
  o.hidden = 8;
  FeedForwardGrouper<double> grouper(o, 4, rng);
  nn::Matrix<double> X(4, 3);
  fill_uniform(X, rng, 2.0);
  grouper.forward(X);
  const int n = 40000;
  std::vector<int> hits(5, 0);
  std::vector<GroupId> a;
  Rng draw(11);
  for (int i = 0; i < n; ++i) {
    const double log_p = grouper.sample(draw, a);
    ++hits[a[1]];
    if (i < 10) {
      EXPECT_NEAR(log_p, grouper.log_prob(a), 1e-12);
    }
  }
  for (int g = 0; g < 5; ++g) {
    const double p = std::exp(grouper.log_probs()(g, 1));
    EXPECT_NEAR(hits[g] / double(n), p, 4 * std::sqrt(p * (1 - p) / n) + 1e-9) << "group " << g;
  }
  std::vector<GroupId> x, y;
  Rng r1(5), r2(5);
  grouper.sample(r1, x);
  grouper.sample(r2, y);
  EXPECT_EQ(x, y);
  grouper.greedy(x);
  for (nn::Index u = 0; u < 3; ++u) {
    nn::Index best = 0;
    grouper.log_probs().col(u).maxCoeff(&best);
    EXPECT_EQ(x[static_cast<std::size_t>(u)], static_cast<GroupId>(best));
  }
}

TEST(Grouper, OptionsAreChecked) {
  Rng rng(1);
  GrouperOptions o;
  o.groups = 0;
  try {
    FeedForwardGrouper<float> g(o, 3, rng);
    FAIL() << "groups 0 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("grouper.groups = 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(grouper_activation_from_string("sigmoid"), InputError);
  EXPECT_EQ(grouper_activation_from_string("none"), GrouperActivation::kNone);
}

// a → b → c, a → d; every op its own unit.
struct Chain {
  OpGraph g;
  Grouping units;
  PlacementProblem p;
  Chain() {
    const OpId a = g.add_op({.name = "a", .type = "MatMul", .kernel = KernelSignature::gemm(2, 3, 4), .flops = 48,
                             .output_bytes = 24});
    const OpId b = g.add_op({.name = "b", .type = "Relu", .kernel = KernelSignature::elementwise(6), .flops = 6,
                             .output_bytes = 24});
    const OpId c = g.add_op({.name = "c", .type = "MatMul", .kernel = KernelSignature::gemm(2, 5, 3), .flops = 60,
                             .output_bytes = 40});
    const OpId d = g.add_op({.name = "d", .type = "Add", .kernel = KernelSignature::elementwise(6, 2), .flops = 6});
    g.add_edge(a, b, {.bytes = 24});
    g.add_edge(b, c, {.bytes = 24});
    g.add_edge(a, d, {.bytes = 8});
    units = testing::identity_grouping(4);
    p = describe_problem(g, units);
  }
};

TEST(Grouper, UnitFeaturesFollowTheDocumentedLayout) {
  Chain s;
  const nn::Matrix<double> f = unit_feature_matrix<double>(s.p);
  const nn::Index T = 3;  // Add, MatMul, Relu
  ASSERT_EQ(f.rows(), unit_feature_size(s.p));
  ASSERT_EQ(f.rows(), T + kShapeSlots + 4 + 2 * kNeighbourSlots);
  // Unit a (id 0): one MatMul, shape [1, 2, 3] → each divided by (3 + 1).
  EXPECT_DOUBLE_EQ(f(1, 0), 1.0 / 4);
  EXPECT_DOUBLE_EQ(f(T + 2, 0), 3.0 / 4);
  // FLOPs: log(1 + 48) over the largest, log(1 + 60).
  EXPECT_DOUBLE_EQ(f(T + kShapeSlots, 0), std::log1p(48.0) / std::log1p(60.0));
  // Positions in the order of first readiness a, b, c, d (ties by id): a at 0, b at 1/4.
  const nn::Index pos = T + kShapeSlots + 3;
  std::vector<double> where(4);
  for (std::size_t i = 0; i < 4; ++i) where[s.p.topological_order[i]] = static_cast<double>(i);
  EXPECT_DOUBLE_EQ(f(pos, 1), where[1] / 4.0);
  // a's neighbours: b and d, consumers (+1), nearest first; then zero padding.
  const nn::Index n0 = pos + 1;
  EXPECT_DOUBLE_EQ(f(n0 + 1, 0), 1.0);
  EXPECT_DOUBLE_EQ(f(n0 + 3, 0), 1.0);
  EXPECT_DOUBLE_EQ(f(n0 + 4, 0), 0.0);
  EXPECT_LE(std::abs(f(n0, 0) - f(pos, 0)), std::abs(f(n0 + 2, 0) - f(pos, 0)));
  // c's one neighbour is its producer b (−1).
  EXPECT_DOUBLE_EQ(f(n0, 2), where[1] / 4.0);
  EXPECT_DOUBLE_EQ(f(n0 + 1, 2), -1.0);
}

TEST(Grouper, MergingUnitsSumsThemAndKeepsOnlyEdgesBetweenLearnedGroups) {
  Chain s;
  // Identity: the learned groups are the units, feature for feature.
  const std::vector<GroupId> same{0, 1, 2, 3};
  const PlacementProblem id = merge_units(s.p, same, 4);
  EXPECT_EQ(group_feature_matrix<double>(id, id.topological_order), group_feature_matrix<double>(s.p, s.p.topological_order));
  // {a, b} in group 2, {c} in 0, {d} in 1, group 3 empty.
  const std::vector<GroupId> a{2, 2, 0, 1};
  const PlacementProblem m = merge_units(s.p, a, 4);
  EXPECT_EQ(m.group_size, (std::vector<uint32_t>{1, 1, 2, 0}));
  EXPECT_EQ(m.group_flops, (std::vector<double>{60, 6, 54, 0}));
  EXPECT_EQ(m.group_type_counts[2 * 3 + 1], 1);  // a's MatMul
  EXPECT_EQ(m.group_type_counts[2 * 3 + 2], 1);  // b's Relu
  ASSERT_EQ(m.group_edges.size(), 2u);           // b → c and a → d; a → b is inside group 2
  EXPECT_EQ(m.group_edges[0].from, 2u);
  EXPECT_EQ(m.group_edges[0].to, 0u);
  EXPECT_EQ(m.group_edges[1].to, 1u);
  EXPECT_EQ(m.group_edges[1].bytes, 8);
  EXPECT_EQ(m.topological_order.front(), 2u);  // a is first ready
  EXPECT_EQ(m.topological_order.back(), 3u);   // the empty group last
  EXPECT_EQ(m.group_names[3], "g3");
  // As a Grouping of the ops: three non-empty groups, a and b together.
  const Grouping ops = compose_grouping(s.units, a);
  EXPECT_EQ(ops.num_groups(), 3u);
  EXPECT_EQ(ops.group_of(0), ops.group_of(1));
  EXPECT_NE(ops.group_of(2), ops.group_of(3));
}

}  // namespace
}  // namespace placelab
