// The data of learners/nn: Eigen matrices, trainable parameters and the ordered set of a model's
// parameters. Every layer is a template over the scalar T: the learners run in float (Eigen's
// vectorised tanh and GEMM are several times faster than double's), and the gradient tests
// instantiate double so that finite differences can check every backward pass to 1e-6.
//
// Layout: a batch of B sequences of length S is one matrix with a column per (step, sequence),
// column s·B + b, so each step is a block of B contiguous columns: a step is a GEMM operand and the
// whole sequence feeds one GEMM where the recurrence allows it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

namespace placelab::nn {

using Index = Eigen::Index;
template <typename T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;  // column-major
template <typename T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
// Read-only and writable views of a matrix or of a block of columns of one.
template <typename T>
using In = Eigen::Ref<const Matrix<T>>;
template <typename T>
using Out = Eigen::Ref<Matrix<T>>;

// The recurrences' products in float — a weight matrix times one step's few columns: C (m × n) =
// or += A·X with 4 ≤ n ≤ 16, A column-major (A(i, p) at A[i + p·lda]) or, with `a_transposed`,
// the transpose of a column-major matrix (A(i, p) at A[p + i·lda]). Eigen's GEMM packs all of A on
// every call, which for a 2048 × 512 weight and 10 columns is most of the product's memory traffic;
// these kernels read A once, unpacked, and allocate nothing (bench BM_SmallProduct: 1.3× and
// 1.8× the speed of Eigen's product, forwards and transposed). Returns false, leaving C alone,
// where the shape is out of range or the build lacks AVX2 + FMA.
bool small_product(Index m, Index n, Index k, const float* A, Index lda, bool a_transposed, const float* X, Index ldx,
                   float* C, Index ldc, bool accumulate);
inline constexpr Index kSmallProductMinColumns = 4, kSmallProductMaxColumns = 16;

// C = A·B, or C += A·B with `accumulate`. In float, products with a few columns go to
// small_product. Otherwise, for the products inside a recurrence, Eigen's GEMM packs all of A into
// a buffer that it takes from the heap above EIGEN_STACK_ALLOCATION_LIMIT (128 KB; 2 MB for a
// 2048 × 512 float LSTM weight), so such a product runs in row panels small enough to pack on the
// stack: a time step allocates nothing (tests/learners/alloc_test.cpp), at the price of repacking
// B's few columns per panel. Wide products (a whole sequence at once) go to Eigen in one piece.
template <typename DC, typename DA, typename DB>
void multiply(DC&& C, const DA& A, const DB& B, bool accumulate = false) {
  using T = typename std::decay_t<DA>::Scalar;
  using CT = std::decay_t<DC>;
  using AT = std::decay_t<DA>;
  using BT = std::decay_t<DB>;
  if constexpr (std::is_same_v<T, float> && (AT::Flags & Eigen::DirectAccessBit) && (BT::Flags & Eigen::DirectAccessBit) &&
                (CT::Flags & Eigen::DirectAccessBit) && !BT::IsRowMajor && !CT::IsRowMajor) {
    if (B.cols() >= kSmallProductMinColumns && B.cols() <= kSmallProductMaxColumns && A.innerStride() == 1 &&
        B.innerStride() == 1 && C.innerStride() == 1 && C.rows() == A.rows() && C.cols() == B.cols() &&
        small_product(A.rows(), B.cols(), A.cols(), A.data(), A.outerStride(), AT::IsRowMajor, B.data(), B.outerStride(),
                      C.data(), C.outerStride(), accumulate))
      return;
  }
  constexpr Index kPanelValues = EIGEN_STACK_ALLOCATION_LIMIT / static_cast<Index>(sizeof(T)) / 2;
  const Index panel = std::max<Index>(8, kPanelValues / std::max<Index>(A.cols(), 1) / 8 * 8);
  const Index step = B.cols() <= 64 ? panel : A.rows();
  for (Index r = 0; r < A.rows(); r += step) {
    const Index n = std::min(step, A.rows() - r);
    if (accumulate) C.middleRows(r, n).noalias() += A.middleRows(r, n) * B;
    else C.middleRows(r, n).noalias() = A.middleRows(r, n) * B;
  }
}

// A trainable tensor: its value and the gradient that backward passes accumulate into (they add;
// ParamSet::zero_grad clears). `name` identifies it in saved state and test messages.
template <typename T>
struct Param {
  std::string name;
  Matrix<T> value;
  Matrix<T> grad;
  void resize(Index rows, Index cols) {
    value.setZero(rows, cols);
    grad.setZero(rows, cols);
  }
  Index size() const { return value.size(); }
};

// The parameters of a model in a fixed order — the order of saved state, of Adam's moments and of
// the flat vectors the gradient tests perturb. Holds pointers: the layers own their Params and
// must outlive (and not move after) the set.
template <typename T>
class ParamSet {
 public:
  void add(Param<T>& param) { params_.push_back(&param); }
  std::span<Param<T>* const> params() const { return params_; }
  std::size_t size() const { return params_.size(); }
  // Total number of scalars.
  Index num_values() const;
  void zero_grad();
  // The global L2 norm of all gradients (accumulated in double).
  double grad_norm() const;
  // Multiplies every gradient by `factor`.
  void scale_grad(T factor);
  // All values (or gradients) in order, flattened column-major; set_values is the inverse.
  std::vector<T> values() const;
  std::vector<T> grads() const;
  void set_values(std::span<const T> values);

 private:
  std::vector<Param<T>*> params_;
};

}  // namespace placelab::nn
