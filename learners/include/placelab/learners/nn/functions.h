// The parameter-free functions of the neural placers' output heads: column-wise (log-)softmax and
// the logit shaping of the Hierarchical Planner's public code — a temperature and an optional tanh
// bound, z' = C·tanh(z/τ) — each with its backward pass.
#pragma once

#include "placelab/learners/nn/tensor.h"

namespace placelab::nn {

// P = softmax of each column of Z (max subtracted first: stable for any finite logits).
template <typename T>
void softmax_columns(const In<T>& Z, Out<T> P);

// log softmax of each column (stable: z − max − log Σ exp(z − max)).
template <typename T>
void log_softmax_columns(const In<T>& Z, Out<T> L);

// Both at once, one exp per entry: P = softmax and L = log softmax of each column of Z.
template <typename T>
void softmax_and_log_columns(const In<T>& Z, Out<T> P, Out<T> L);

// Logit shaping: Y = Z/τ, or C·tanh(Z/τ) when tanh_constant C > 0. τ > 0.
template <typename T>
void shape_logits(const In<T>& Z, T temperature, T tanh_constant, Out<T> Y);
// Its backward given the shaped logits Y: dZ = dY/τ, or dY·(C/τ)·(1 − (Y/C)²) with the bound.
template <typename T>
void shape_logits_backward(const In<T>& Y, const In<T>& dY, T temperature, T tanh_constant, Out<T> dZ);

// The category whose cumulative probability first exceeds u ∈ [0, 1), for probabilities p[0..n),
// summed in double; the last category takes any rounding remainder. The one inverse-CDF draw of
// every sampling policy (the placers' devices, the groupers' groups), so a seed means the same.
template <typename T>
Index sample_category(const T* p, Index n, double u) {
  double acc = 0;
  Index k = 0;
  for (; k + 1 < n; ++k) {
    acc += static_cast<double>(p[k]);
    if (u < acc) break;
  }
  return k;
}

}  // namespace placelab::nn
