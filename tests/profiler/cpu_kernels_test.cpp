#include "placelab/profiler/cpu_kernels.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "placelab/core/error.h"

namespace placelab::cpu {
namespace {

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

TEST(CpuKernels, GemmMatchesNaiveLoop) {
  const int64_t m = 7, n = 5, k = 9, batch = 2;
  auto a = random_vector(static_cast<std::size_t>(m * k * batch), 1), b = random_vector(static_cast<std::size_t>(k * n * batch), 2);
  std::vector<float> c(static_cast<std::size_t>(m * n * batch)), ref(c.size());
  gemm(m, n, k, batch, a.data(), b.data(), c.data());
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += a[static_cast<std::size_t>(t * m * k + p * m + i)] * b[static_cast<std::size_t>(t * k * n + j * k + p)];
        ref[static_cast<std::size_t>(t * m * n + j * m + i)] = static_cast<float>(s);
      }
  expect_close(c, ref, 1e-4f);
}

class ConvTest : public ::testing::TestWithParam<KernelSignature> {};

TEST_P(ConvTest, Im2colMatchesDirectConvolution) {
  ConvShape sh = ConvShape::from(GetParam());
  auto x = random_vector(static_cast<std::size_t>(sh.input_size()), 3), f = random_vector(static_cast<std::size_t>(sh.filter_size()), 4);
  std::vector<float> y(static_cast<std::size_t>(sh.output_size())), ref(y.size()), cols(static_cast<std::size_t>(sh.cols_size()));
  conv2d_forward(sh, x.data(), f.data(), y.data(), cols.data());
  conv2d_direct(sh, x.data(), f.data(), ref.data());
  expect_close(y, ref, 1e-4f);
}

// The backprop kernels are the adjoints of the forward conv: for random dy,
// <dy, conv(x, f)> = <backprop_input(dy, f), x> = <backprop_filter(x, dy), f>.
TEST_P(ConvTest, BackpropKernelsAreAdjointsOfTheForwardConvolution) {
  ConvShape sh = ConvShape::from(GetParam());
  auto x = random_vector(static_cast<std::size_t>(sh.input_size()), 5), f = random_vector(static_cast<std::size_t>(sh.filter_size()), 6);
  auto dy = random_vector(static_cast<std::size_t>(sh.output_size()), 7);
  std::vector<float> y(dy.size()), dx(x.size()), df(f.size()), cols(static_cast<std::size_t>(sh.cols_size()));
  conv2d_direct(sh, x.data(), f.data(), y.data());
  conv2d_backprop_input(sh, dy.data(), f.data(), dx.data(), cols.data());
  conv2d_backprop_filter(sh, x.data(), dy.data(), df.data(), cols.data());
  auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
  };
  const double ref = dot(dy, y);
  EXPECT_NEAR(dot(dx, x), ref, 1e-3 * (1 + std::abs(ref)));
  EXPECT_NEAR(dot(df, f), ref, 1e-3 * (1 + std::abs(ref)));
  // And elementwise against the definition for one input entry: dx[0] = Σ dy · ∂y/∂x[0].
  std::vector<float> x1 = x;
  x1[0] += 1.0f;
  std::vector<float> y1(y.size());
  conv2d_direct(sh, x1.data(), f.data(), y1.data());
  double d0 = 0;
  for (std::size_t i = 0; i < y.size(); ++i) d0 += static_cast<double>(dy[i]) * (y1[i] - y[i]);
  EXPECT_NEAR(dx[0], d0, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvTest,
    ::testing::Values(KernelSignature::conv2d(KernelClass::kConv2D, 2, 3, 6, 5, 4, 3, 3, 1, 1),
                      KernelSignature::conv2d(KernelClass::kConv2D, 1, 2, 7, 7, 3, 3, 3, 2, 0),
                      KernelSignature::conv2d(KernelClass::kConv2D, 2, 1, 5, 6, 2, 1, 1, 1, 0),
                      KernelSignature::conv2d(KernelClass::kConv2D, 1, 4, 8, 8, 2, 5, 3, 2, 2)));

TEST(CpuKernels, SoftmaxRowsSumToOneAndMatchTheDefinition) {
  const int64_t rows = 3, cols = 17;
  auto in = random_vector(static_cast<std::size_t>(rows * cols), 8);
  in[5] = 80.0f;  // would overflow exp() without the max subtraction
  std::vector<float> out(in.size());
  softmax(rows, cols, in.data(), out.data());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0, z = 0, mx = -1e30;
    for (int64_t c = 0; c < cols; ++c) mx = std::max<double>(mx, in[static_cast<std::size_t>(r * cols + c)]);
    for (int64_t c = 0; c < cols; ++c) z += std::exp(in[static_cast<std::size_t>(r * cols + c)] - mx);
    for (int64_t c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * cols + c);
      sum += out[i];
      EXPECT_NEAR(out[i], std::exp(in[i] - mx) / z, 1e-6);
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(CpuKernels, ElementwiseReductionAndEmbedding) {
  auto in = random_vector(30, 9);
  std::vector<float> out(10);
  elementwise(10, 3, in.data(), 3, out.data());
  for (std::size_t j = 0; j < 10; ++j) EXPECT_NEAR(out[j], 0.5f * in[j] + in[10 + j] + in[20 + j], 1e-6);
  // Four inputs cycling through two arrays: in0, in1, in0, in1.
  elementwise(10, 4, in.data(), 2, out.data());
  for (std::size_t j = 0; j < 10; ++j) EXPECT_NEAR(out[j], 1.5f * in[j] + 2 * in[10 + j], 1e-6);
  EXPECT_EQ(elementwise_distinct_inputs(100, 4), 4);
  // 40 inputs of 128 MB: only two distinct 128 MB arrays (256 MB), not 5 GB.
  EXPECT_EQ(elementwise_distinct_inputs(int64_t{1} << 25, 40), 2);
  EXPECT_EQ(CpuKernel::required_bytes(KernelSignature::elementwise(int64_t{1} << 25, 40)), int64_t{3} << 27);

  // 10 elements into 3 outputs: inner = 4, two padding zeros at the end.
  std::vector<float> r_in = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 0}, r_out(3);
  reduction(10, 3, r_in.data(), r_out.data());
  EXPECT_EQ(r_out, (std::vector<float>{10, 26, 19}));

  std::vector<float> table = {0, 1, 10, 11, 20, 21};  // 3 rows × 2
  std::vector<int32_t> index = {2, 0, 2};
  std::vector<float> e_out(6);
  embedding(2, 3, table.data(), index.data(), e_out.data());
  EXPECT_EQ(e_out, (std::vector<float>{20, 21, 0, 1, 20, 21}));
}

TEST(CpuKernel, RunsEveryClassAndReductionSumsItsInput) {
  for (const KernelSignature& sig :
       {KernelSignature::noop(), KernelSignature::gemm(8, 4, 6, 2),
        KernelSignature::conv2d(KernelClass::kConv2DBackpropFilter, 1, 2, 5, 5, 3, 3, 3, 1, 1),
        KernelSignature::elementwise(100, 2), KernelSignature::reduction(100, 7), KernelSignature::embedding(50, 8, 20),
        KernelSignature::softmax(4, 9), KernelSignature::copy(1000)}) {
    CpuKernel k(sig);
    k.run();
    EXPECT_EQ(k.signature(), sig);
    EXPECT_LE(k.buffer_bytes(), CpuKernel::required_bytes(sig)) << to_string(sig);
    if (sig.cls == KernelClass::kSoftmax) {
      double s = 0;
      for (int64_t i = 0; i < 9; ++i) s += k.output()[i];
      EXPECT_NEAR(s, 1.0, 1e-5);
    }
  }
}

TEST(CpuKernel, RejectsAbsurdSizesBeforeAllocating) {
  const KernelSignature huge = KernelSignature::gemm(1 << 20, 1 << 20, 1 << 20);
  EXPECT_GT(CpuKernel::required_bytes(huge), int64_t{1} << 40);
  try {
    CpuKernel k(huge);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("above the limit"), std::string::npos) << e.what();
  }
  EXPECT_THROW(CpuKernel(KernelSignature::elementwise(-5, 1)), InputError);
  EXPECT_THROW(CpuKernel(KernelSignature::copy(1 << 20), 1000), InputError);
}

}  // namespace
}  // namespace placelab::cpu
