#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "placelab/core/error.h"
#include "placelab/learners/nn/layers.h"

namespace placelab::nn {

namespace {
// The `steps` columns of an A-row matrix with memory_batch columns per step that belong to query b:
// column j·memory_batch + b (or j when the memory is shared), a strided map without copying.
template <typename M>
auto columns_of(M& m, Index steps, Index memory_batch, Index b) {
  using Scalar = typename std::remove_const_t<M>::Scalar;
  using Plain = std::conditional_t<std::is_const_v<M>, const Matrix<Scalar>, Matrix<Scalar>>;
  const Index first = memory_batch == 1 ? 0 : b;
  return Eigen::Map<Plain, 0, Eigen::OuterStride<>>(m.data() + first * m.rows(), m.rows(), steps,
                                                    Eigen::OuterStride<>(m.rows() * memory_batch));
}
}  // namespace

template <typename T>
Attention<T>::Attention(std::string name, Index memory_size, Index query_size, Index attention_size) {
  PLACELAB_CHECK(memory_size > 0 && query_size > 0 && attention_size > 0) << "Attention " << name << " sizes";
  W1.name = name + ".W1";
  W1.resize(attention_size, memory_size);
  W2.name = name + ".W2";
  W2.resize(attention_size, query_size);
  v.name = name + ".v";
  v.resize(attention_size, 1);
}

template <typename T>
void Attention<T>::register_params(ParamSet<T>& set) {
  set.add(W1);
  set.add(W2);
  set.add(v);
}

template <typename T>
void Attention<T>::init(Rng& rng) {
  glorot_uniform(W1.value, rng);
  glorot_uniform(W2.value, rng);
  glorot_uniform(v.value, rng);
}

template <typename T>
void Attention<T>::set_memory(const In<T>& M, Index steps, Index memory_batch) {
  PLACELAB_CHECK(steps > 0 && memory_batch > 0 && M.rows() == memory_size() && M.cols() == steps * memory_batch)
      << "attention memory " << M.rows() << " × " << M.cols() << " for " << steps << " steps of " << memory_batch;
  steps_ = steps;
  memory_batch_ = memory_batch;
  M_ = M;
  K_.resize(W1.value.rows(), M.cols());
  K_.noalias() = W1.value * M_;
  dK_.setZero(K_.rows(), K_.cols());
  queries_ = 0;
  if (P_.rows() != steps) P_.resize(steps, P_.cols());
}

template <typename T>
void Attention<T>::forward(const In<T>& Q, Out<T> probs, Out<T> context) {
  const Index B = Q.cols();
  PLACELAB_CHECK(steps_ > 0 && (memory_batch_ == 1 || memory_batch_ == B)) << "attention: memory for "
                                                                           << memory_batch_ << ", " << B << " queries";
  PLACELAB_CHECK(probs.rows() == steps_ && probs.cols() == B && context.rows() == memory_size() && context.cols() == B)
      << "attention output shapes";
  U_.resize(W2.value.rows(), B);
  multiply(U_, W2.value, Q);
  scores_.resize(steps_);
  const auto w = v.value.col(0);
  for (Index b = 0; b < B; ++b) {
    // One fused pass per memory column (tanh, then the dot with v): the S × A matrix of tanh
    // values is never stored, here or in backward.
    const auto keys = columns_of(std::as_const(K_), steps_, memory_batch_, b);
    for (Index j = 0; j < steps_; ++j) scores_(j) = w.dot((keys.col(j) + U_.col(b)).array().tanh().matrix());
    const T mx = scores_.maxCoeff();
    auto p = probs.col(b);
    p.array() = (scores_.array() - mx).exp();
    p /= p.sum();
  }
  if (memory_batch_ == 1) multiply(context, M_, probs);
  else
    for (Index b = 0; b < B; ++b)
      context.col(b).noalias() = columns_of(std::as_const(M_), steps_, memory_batch_, b) * probs.col(b);
}

template <typename T>
void Attention<T>::backward(const In<T>& Q, const In<T>& probs, const In<T>& dcontext, Out<T> dQ) {
  const Index B = Q.cols(), A = W2.value.rows();
  U_.resize(A, B);
  multiply(U_, W2.value, Q);
  dU_.setZero(A, B);
  // context = M a: da = Mᵀ dc now, and dM += dc aᵀ in memory_backward from the kept dc and a.
  PLACELAB_CHECK(queries_ % B == 0 && (memory_batch_ == 1 || memory_batch_ == B))
      << "attention backward: " << B << " queries after " << queries_;
  if (queries_ + B > dC_.cols()) {
    const Index capacity = std::max(2 * dC_.cols(), queries_ + B);
    dC_.conservativeResize(M_.rows(), capacity);
    P_.conservativeResize(steps_, capacity);
  }
  dC_.middleCols(queries_, B) = dcontext;
  P_.middleCols(queries_, B) = probs;
  queries_ += B;
  DA_.resize(steps_, B);
  if (memory_batch_ == 1) multiply(DA_, M_.transpose(), dcontext);
  else
    for (Index b = 0; b < B; ++b)
      DA_.col(b).noalias() = columns_of(std::as_const(M_), steps_, memory_batch_, b).transpose() * dcontext.col(b);
  const auto w = v.value.col(0);
  auto dw = v.grad.col(0);
  t_.resize(A);
  for (Index b = 0; b < B; ++b) {
    const auto a = probs.col(b);
    // softmax: dscore = a ⊙ (da − aᵀda); then per memory column, with t = tanh(k_j + u):
    // dv += dscore_j t, and g = dscore_j v ⊙ (1 − t²) reaches both k_j and u.
    dscore_ = a.array() * (DA_.col(b).array() - a.dot(DA_.col(b)));
    const auto keys = columns_of(std::as_const(K_), steps_, memory_batch_, b);
    auto dkeys = columns_of(dK_, steps_, memory_batch_, b);
    auto du = dU_.col(b);
    for (Index j = 0; j < steps_; ++j) {
      const T ds = dscore_(j);
      t_.array() = (keys.col(j) + U_.col(b)).array().tanh();
      // One pass for the three sums (Eigen would make one pass per statement).
      T* __restrict dkj = dkeys.col(j).data();
      T* __restrict dup = du.data();
      T* __restrict dwp = dw.data();
      const T* __restrict tp = t_.data();
      const T* __restrict wp = w.data();
      for (Index r = 0; r < A; ++r) {
        dwp[r] += ds * tp[r];
        const T g = ds * wp[r] * (T(1) - tp[r] * tp[r]);
        dkj[r] += g;
        dup[r] += g;
      }
    }
  }
  W2.grad.noalias() += dU_ * Q.transpose();
  multiply(dQ, W2.value.transpose(), dU_);
}

template <typename T>
void Attention<T>::memory_backward(Matrix<T>& dM) {
  W1.grad.noalias() += dK_ * M_.transpose();
  // The context's part, Σ over queries of dc aᵀ, as one product per memory (a query's columns of
  // dC_ and P_ are every memory_batch-th from its own).
  dMctx_.setZero(M_.rows(), M_.cols());
  if (memory_batch_ == 1) {
    dMctx_.noalias() += dC_.leftCols(queries_) * P_.leftCols(queries_).transpose();
  } else {
    const Index calls = queries_ / memory_batch_;
    for (Index b = 0; b < memory_batch_ && calls > 0; ++b)
      columns_of(dMctx_, steps_, memory_batch_, b).noalias() +=
          columns_of(std::as_const(dC_), calls, memory_batch_, b) *
          columns_of(std::as_const(P_), calls, memory_batch_, b).transpose();
  }
  dM.resize(M_.rows(), M_.cols());
  dM.noalias() = W1.value.transpose() * dK_;
  dM += dMctx_;
}

template class Attention<float>;
template class Attention<double>;

}  // namespace placelab::nn
