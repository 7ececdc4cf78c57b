// Training a ParamSet: Adam (Kingma & Ba 2015) with bias correction, as TensorFlow's AdamOptimizer
// that the papers' code used, and global gradient-norm clipping (Pascanu et al. 2013; every
// placer of the papers clips, the Hierarchical Planner at norm 1.0). Adam's moments and step count
// save and load bit-exactly with the learner's state.
#pragma once

#include <cstdint>
#include <vector>

#include "placelab/learners/nn/tensor.h"

namespace placelab::nn {

struct AdamOptions {
  double beta1 = 0.9;     // TensorFlow's defaults
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

template <typename T>
class Adam {
 public:
  Adam() = default;
  // Moments sized for `params` (which must outlive the optimiser and keep their shapes).
  Adam(const ParamSet<T>& params, AdamOptions options = {});
  // Descends: value −= lr · m̂ / (√v̂ + ε) with the current gradients. To ascend, negate the
  // gradients first.
  void step(double learning_rate);
  int64_t steps() const { return t_; }

  // The moments, flattened in the ParamSet's order, and the step count; set_state checks sizes
  // (returns false when they do not match).
  std::vector<T> first_moments() const;
  std::vector<T> second_moments() const;
  bool set_state(const std::vector<T>& m, const std::vector<T>& v, int64_t t);

 private:
  const ParamSet<T>* params_ = nullptr;
  AdamOptions options_;
  std::vector<Matrix<T>> m_, v_;
  int64_t t_ = 0;
};

// Scales every gradient by min(1, max_norm / ‖g‖) where ‖g‖ is the global L2 norm, and returns
// ‖g‖ before clipping. max_norm ≤ 0 disables clipping (the norm is still returned).
template <typename T>
double clip_grad_norm(ParamSet<T>& params, double max_norm);

}  // namespace placelab::nn
