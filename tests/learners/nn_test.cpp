// learners/nn: every layer's backward pass against finite differences (double precision, relative
// error < 1e-6), the output-head functions, Adam and gradient clipping against hand computations.
#include <gtest/gtest.h>

#include <cmath>

#include "gradient_check.h"
#include "placelab/learners/nn/functions.h"
#include "placelab/learners/nn/layers.h"
#include "placelab/learners/nn/optim.h"

namespace placelab {
namespace {

using nn::Index;
using Mat = nn::Matrix<double>;
using testing::expect_gradients_match;
using testing::fill_uniform;

// Σ R ⊙ Y: a loss whose gradient with respect to Y is the random matrix R.
double dot(const Mat& r, const Mat& y) { return (r.array() * y.array()).sum(); }

// An input tensor under test: a Param so the checker perturbs it like a weight.
nn::Param<double> input(const std::string& name, Index rows, Index cols, Rng& rng) {
  nn::Param<double> p;
  p.name = name;
  p.resize(rows, cols);
  fill_uniform(p.value, rng);
  return p;
}

TEST(NnGradient, Linear) {
  Rng rng(1);
  nn::Linear<double> lin("lin", 5, 3);
  nn::ParamSet<double> params;
  lin.register_params(params);
  lin.init(rng);
  fill_uniform(lin.b.value, rng);
  nn::Param<double> X = input("X", 5, 4, rng);
  params.add(X);
  Mat R(3, 4), Y(3, 4), dX;
  fill_uniform(R, rng);
  auto loss = [&] {
    lin.forward(X.value, Y);
    return dot(R, Y);
  };
  expect_gradients_match(params, loss, [&] {
    params.zero_grad();
    loss();
    lin.backward(X.value, R, &dX);
    X.grad = dX;
  });
}

// Â of a path 0 – 1 – 2 plus an isolated node 3: degrees with self loops 2, 3, 2, 1.
TEST(NnGraphConv, NormalizedAdjacencyIsKipfAndWellings) {
  const std::vector<std::pair<Index, Index>> edges{{0, 1}, {2, 1}, {1, 0}, {1, 1}};  // a duplicate, a self loop
  const nn::GraphAdjacency a = nn::GraphAdjacency::normalized(4, edges);
  Mat dense = Mat::Zero(4, 4);
  for (Index j = 0; j < 4; ++j)
    for (Index e = a.offsets[static_cast<std::size_t>(j)]; e < a.offsets[static_cast<std::size_t>(j) + 1]; ++e)
      dense(a.neighbors[static_cast<std::size_t>(e)], j) = a.weights[static_cast<std::size_t>(e)];
  Mat expected(4, 4);
  const double s6 = 1 / std::sqrt(6.0);
  expected << 0.5, s6, 0, 0,  //
      s6, 1.0 / 3, s6, 0,     //
      0, s6, 0.5, 0,          //
      0, 0, 0, 1;
  EXPECT_LT((dense - expected).cwiseAbs().maxCoeff(), 1e-15) << dense;
}

// Two graph convolutions with a ReLU between (EAGLE's GCN placer) over a batch of 3 graphs that
// share a 5-node adjacency: every weight and the inputs against finite differences.
TEST(NnGradient, GraphConvolutions) {
  Rng rng(5);
  const Index N = 5, B = 3;
  const std::vector<std::pair<Index, Index>> edges{{0, 1}, {1, 2}, {2, 3}, {0, 3}, {3, 4}};
  const nn::GraphAdjacency A = nn::GraphAdjacency::normalized(N, edges);
  nn::GraphConv<double> g1("g1", 4, 6), g2("g2", 6, 2);
  nn::ParamSet<double> params;
  g1.register_params(params);
  g2.register_params(params);
  g1.init(rng);
  g2.init(rng);
  fill_uniform(g1.b.value, rng);
  fill_uniform(g2.b.value, rng);
  nn::Param<double> X = input("X", 4, N * B, rng);
  params.add(X);
  Mat R(2, N * B), Z1(6, N * B), H1(6, N * B), Y(2, N * B), dH1, dX;
  fill_uniform(R, rng);
  auto loss = [&] {
    g1.forward(X.value, A, B, Z1);
    H1 = Z1.cwiseMax(0.0);
    g2.forward(H1, A, B, Y);
    return dot(R, Y);
  };
  expect_gradients_match(params, loss, [&] {
    params.zero_grad();
    loss();
    g2.backward(H1, A, B, R, &dH1);
    const Mat dZ1 = (Z1.array() > 0).select(dH1, 0.0);
    g1.backward(X.value, A, B, dZ1, &dX);
    X.grad = dX;
  });
}

// One LSTM layer in either direction, with or without a given initial state (one column
// broadcast to the batch, or one per sequence): gradients of every weight, the inputs and the
// initial state, through the outputs and the final state.
struct LstmCase {
  bool reverse;
  Index init_cols;  // 0 = zero state
};
class NnLstmGradient : public ::testing::TestWithParam<LstmCase> {};

TEST_P(NnLstmGradient, LayerMatchesFiniteDifferences) {
  const auto [reverse, init_cols] = GetParam();
  const Index I = 3, H = 4, S = 5, B = 2;
  Rng rng(7);
  nn::LstmLayer<double> layer("lstm", I, H, reverse, 0.5);
  nn::ParamSet<double> params;
  layer.register_params(params);
  layer.init(rng);
  fill_uniform(layer.cell().b.value, rng, 0.5);
  nn::Param<double> X = input("X", I, S * B, rng);
  nn::Param<double> h0 = input("h0", H, std::max<Index>(init_cols, 1), rng);
  nn::Param<double> c0 = input("c0", H, std::max<Index>(init_cols, 1), rng);
  params.add(X);
  if (init_cols > 0) params.add(h0), params.add(c0);
  Mat R(H, S * B), Rh(H, B), Rc(H, B), dX, dh0, dc0;
  fill_uniform(R, rng);
  fill_uniform(Rh, rng);
  fill_uniform(Rc, rng);
  auto loss = [&] {
    layer.forward(X.value, S, B, init_cols ? &h0.value : nullptr, init_cols ? &c0.value : nullptr);
    return dot(R, layer.outputs()) + dot(Rh, Mat(layer.final_h())) + dot(Rc, Mat(layer.final_c()));
  };
  expect_gradients_match(params, loss, [&] {
    params.zero_grad();
    loss();
    layer.backward(X.value, &R, &Rh, &Rc, &dX, init_cols ? &dh0 : nullptr, init_cols ? &dc0 : nullptr);
    X.grad = dX;
    if (init_cols) h0.grad = dh0, c0.grad = dc0;
  });
}

INSTANTIATE_TEST_SUITE_P(Directions, NnLstmGradient,
                         ::testing::Values(LstmCase{false, 0}, LstmCase{true, 0}, LstmCase{false, 1},
                                           LstmCase{true, 2}));

class NnBiLstmGradient : public ::testing::TestWithParam<bool> {};

TEST_P(NnBiLstmGradient, MatchesFiniteDifferences) {
  const bool pair_reversed = GetParam();
  const Index I = 3, H = 3, S = 4, B = 2;
  Rng rng(11);
  nn::BiLstm<double> bi("bi", I, H, pair_reversed);
  nn::ParamSet<double> params;
  bi.register_params(params);
  bi.init(rng);
  nn::Param<double> X = input("X", I, S * B, rng);
  params.add(X);
  Mat R(2 * H, S * B), Rh(2 * H, B), dX;
  fill_uniform(R, rng);
  fill_uniform(Rh, rng);
  auto loss = [&] {
    bi.forward(X.value, S, B);
    return dot(R, bi.outputs()) + dot(Rh, bi.final_h());
  };
  expect_gradients_match(params, loss, [&] {
    params.zero_grad();
    loss();
    bi.backward(X.value, &R, &Rh, nullptr, &dX);
    X.grad = dX;
  });
}

INSTANTIATE_TEST_SUITE_P(Pairing, NnBiLstmGradient, ::testing::Bool());

TEST(NnBiLstm, PairedMemoryPutsBackwardStateOfTheMirrorStep) {
  Rng rng(3);
  nn::BiLstm<double> plain("a", 2, 2, false), paired("a", 2, 2, true);
  nn::ParamSet<double> p1, p2;
  plain.register_params(p1);
  paired.register_params(p2);
  plain.init(rng);
  p2.set_values(p1.values());
  Mat X(2, 3);
  fill_uniform(X, rng);
  plain.forward(X, 3, 1);
  paired.forward(X, 3, 1);
  for (Index s = 0; s < 3; ++s) {
    EXPECT_EQ(paired.outputs().col(s).head(2), plain.outputs().col(s).head(2));
    EXPECT_EQ(paired.outputs().col(s).tail(2), plain.outputs().col(2 - s).tail(2));
  }
}

// Attention over a memory shared by the batch or one per sequence, queried for several steps:
// gradients of W1, W2, v, the memory and every query, through the contexts.
class NnAttentionGradient : public ::testing::TestWithParam<Index> {};

TEST_P(NnAttentionGradient, MatchesFiniteDifferences) {
  const Index memory_batch = GetParam();
  const Index Hm = 4, Hq = 3, A = 5, S = 6, B = 2, steps = 3;
  Rng rng(5);
  nn::Attention<double> att("att", Hm, Hq, A);
  nn::ParamSet<double> params;
  att.register_params(params);
  att.init(rng);
  nn::Param<double> M = input("M", Hm, S * memory_batch, rng);
  nn::Param<double> Q = input("Q", Hq, steps * B, rng);
  params.add(M);
  params.add(Q);
  Mat Rc(Hm, steps * B), probs(S, steps * B), ctx(Hm, steps * B), dQ(Hq, B), dM;
  fill_uniform(Rc, rng);
  auto loss = [&] {
    att.set_memory(M.value, S, memory_batch);
    for (Index t = 0; t < steps; ++t)
      att.forward(Q.value.middleCols(t * B, B), probs.middleCols(t * B, B), ctx.middleCols(t * B, B));
    return dot(Rc, ctx);
  };
  expect_gradients_match(params, loss, [&] {
    params.zero_grad();
    loss();
    for (Index t = steps - 1; t >= 0; --t) {
      att.backward(Q.value.middleCols(t * B, B), probs.middleCols(t * B, B), Rc.middleCols(t * B, B), dQ);
      Q.grad.middleCols(t * B, B) = dQ;
    }
    att.memory_backward(dM);
    M.grad = dM;
  });
}

INSTANTIATE_TEST_SUITE_P(MemoryBatch, NnAttentionGradient, ::testing::Values(Index{1}, Index{2}));

// The float products of a recurrence step (nn::small_product, reached through nn::multiply) against
// a double product: every row and column tail of both kernels, blocks of larger matrices, and
// accumulation. A wrong index or a lost tail term is off by O(1); float rounding by ~1e-6 of Σ|a·x|.
TEST(NnSmallProduct, MatchesADoubleProductOnEveryTail) {
  Rng rng(7);
  using MatF = nn::Matrix<float>;
  int checked = 0;
  for (const bool transposed : {false, true})
    for (const Index m : {1, 3, 7, 8, 15, 16, 17, 40})
      for (const Index k : {1, 5, 8, 9, 31, 64})
        for (const Index n : {3, 4, 5, 6, 7, 10, 12, 13, 16, 17})
          for (const bool accumulate : {false, true}) {
            // A is a block of a larger matrix (an outer stride of rows + 3), as the decoder's
            // Wx.rightCols(H) is; C and X are column blocks.
            MatF big(transposed ? k + 3 : m + 3, transposed ? m + 2 : k + 2), Xbig(k, n + 2), C(m, n + 1);
            nn::Matrix<double> tmp;
            for (auto* mat : {&big, &Xbig, &C}) {
              tmp.resize(mat->rows(), mat->cols());
              fill_uniform(tmp, rng);
              *mat = tmp.cast<float>();
            }
            const auto X = Xbig.middleCols(1, n);
            const MatF C0 = C;
            nn::Matrix<double> expected, magnitude;
            if (transposed) {
              const auto A = big.block(2, 1, k, m).transpose();
              expected = A.cast<double>() * X.cast<double>();
              magnitude = A.cast<double>().cwiseAbs() * X.cast<double>().cwiseAbs();
              nn::multiply(C.leftCols(n), A, X, accumulate);
            } else {
              const auto A = big.block(2, 1, m, k);
              expected = A.cast<double>() * X.cast<double>();
              magnitude = A.cast<double>().cwiseAbs() * X.cast<double>().cwiseAbs();
              nn::multiply(C.leftCols(n), A, X, accumulate);
            }
            if (accumulate) expected += C0.leftCols(n).cast<double>();
            for (Index j = 0; j < n; ++j)
              for (Index i = 0; i < m; ++i)
                ASSERT_NEAR(C(i, j), expected(i, j), 1e-5 * (magnitude(i, j) + 1))
                    << (transposed ? "Aᵀ" : "A") << " " << m << " × " << k << " times " << n << " columns at (" << i
                    << ", " << j << ")" << (accumulate ? ", accumulating" : "");
            ASSERT_EQ(C.col(n), C0.col(n)) << "wrote past its columns";
            ++checked;
          }
  EXPECT_EQ(checked, 2 * 8 * 6 * 10 * 2);
  // The kernels decline what they are not for, leaving C to Eigen.
  std::vector<float> a(64, 1.0f), x(64, 1.0f), c(64, 0.0f);
  EXPECT_FALSE(nn::small_product(4, 3, 4, a.data(), 4, false, x.data(), 4, c.data(), 4, false));
  EXPECT_FALSE(nn::small_product(4, 17, 1, a.data(), 4, false, x.data(), 1, c.data(), 4, false));
}

TEST(NnFunctions, ShapedLogitsBackwardMatchesFiniteDifferences) {
  Rng rng(9);
  for (double c : {0.0, 2.5}) {
    nn::Param<double> Z = input("Z", 4, 3, rng);
    nn::ParamSet<double> params;
    params.add(Z);
    Mat R(4, 3), Y(4, 3), dZ(4, 3);
    fill_uniform(R, rng);
    auto loss = [&] {
      nn::shape_logits<double>(Z.value, 0.7, c, Y);
      return dot(R, Y);
    };
    expect_gradients_match(params, loss, [&] {
      params.zero_grad();
      loss();
      nn::shape_logits_backward<double>(Y, R, 0.7, c, dZ);
      Z.grad = dZ;
    });
  }
}

TEST(NnFunctions, SoftmaxIsStableAndLogSoftmaxAgrees) {
  Mat Z(3, 2);
  Z << 1000, -5, 1001, 0, 999, 5;
  Mat P(3, 2), L(3, 2);
  nn::softmax_columns<double>(Z, P);
  nn::log_softmax_columns<double>(Z, L);
  EXPECT_NEAR(P.col(0).sum(), 1.0, 1e-15);
  EXPECT_NEAR(P(1, 0), std::exp(1.0) / (1 + std::exp(1.0) + std::exp(-1.0)), 1e-15);
  for (Index i = 0; i < Z.size(); ++i) EXPECT_NEAR(std::log(P.data()[i]), L.data()[i], 1e-12);
}

TEST(NnOptim, AdamStepMatchesKingmaAndBa) {
  nn::Param<double> p;
  p.name = "p";
  p.resize(2, 1);
  p.value << 1.0, -2.0;
  nn::ParamSet<double> params;
  params.add(p);
  nn::Adam<double> adam(params, {.beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8});
  p.grad << 0.5, -4.0;
  adam.step(0.1);
  // First step: m̂ = g, v̂ = g², so each value moves by lr · g / (|g| + ε) ≈ ±lr.
  EXPECT_NEAR(p.value(0), 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-12);
  EXPECT_NEAR(p.value(1), -2.0 + 0.1 * 4.0 / (4.0 + 1e-8), 1e-12);
  p.grad << 0.5, 0.0;
  adam.step(0.1);
  const double m = 0.9 * 0.05 + 0.1 * 0.5, v = 0.999 * 0.00025 + 0.001 * 0.25;
  const double c1 = 1 - 0.81, c2 = 1 - 0.999 * 0.999;
  EXPECT_NEAR(p.value(0), 1.0 - 0.1 * 0.5 / (0.5 + 1e-8) - 0.1 * (m / c1) / (std::sqrt(v / c2) + 1e-8), 1e-12);
  // The state round-trips.
  nn::Adam<double> copy(params);
  ASSERT_TRUE(copy.set_state(adam.first_moments(), adam.second_moments(), adam.steps()));
  EXPECT_EQ(copy.first_moments(), adam.first_moments());
  EXPECT_FALSE(copy.set_state({1.0}, adam.second_moments(), 2));
}

TEST(NnOptim, ClipGradNormScalesOnlyAboveTheBound) {
  nn::Param<double> a, b;
  a.resize(1, 1);
  b.resize(2, 1);
  a.grad << 3.0;
  b.grad << 0.0, 4.0;
  nn::ParamSet<double> params;
  params.add(a);
  params.add(b);
  EXPECT_DOUBLE_EQ(nn::clip_grad_norm(params, 10.0), 5.0);
  EXPECT_DOUBLE_EQ(a.grad(0), 3.0);
  EXPECT_DOUBLE_EQ(nn::clip_grad_norm(params, 1.0), 5.0);
  EXPECT_NEAR(params.grad_norm(), 1.0, 1e-15);
  EXPECT_NEAR(b.grad(1), 0.8, 1e-15);
}

TEST(NnInit, GlorotIsBoundedAndSeeded) {
  Rng r1(4), r2(4);
  nn::Matrix<float> a(30, 20), b(30, 20);
  nn::glorot_uniform(a, r1);
  nn::glorot_uniform(b, r2);
  EXPECT_EQ(a, b);
  const float bound = std::sqrt(6.0f / 50.0f);
  EXPECT_LE(a.cwiseAbs().maxCoeff(), bound);
  EXPECT_GT(a.cwiseAbs().maxCoeff(), 0.8f * bound);
}

}  // namespace
}  // namespace placelab
