// Finite-difference gradient checks for learners/nn and the neural policies, in double precision:
// every parameter of a ParamSet is perturbed by ±h and ±2h and the fourth-order central difference
// of the loss is compared with the analytic gradient, tensor by tensor, as a norm-wise relative
// error. (The second-order difference's rounding error, ~1e-16·|loss|/h, is too large beside the
// smallest gradients of a deep policy to resolve 1e-6.)
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "placelab/learners/nn/tensor.h"
#include "placelab/learners/random.h"

namespace placelab::testing {

// Fills m with uniform values in [−scale, scale).
inline void fill_uniform(nn::Matrix<double>& m, Rng& rng, double scale = 1.0) {
  for (nn::Index i = 0; i < m.size(); ++i) m.data()[i] = scale * (2 * uniform01(rng) - 1);
}

// ‖analytic − numeric‖ / max(‖analytic‖, ‖numeric‖, 1e-12) for every parameter of `params`:
// `loss` runs the forward pass and returns the loss; `gradients` zeroes the gradients and runs
// forward and backward. Fails the test when a tensor's error exceeds `tolerance` (the issue's
// 1e-6) or when every gradient is zero (a check that cannot fail).
inline void expect_gradients_match(nn::ParamSet<double>& params, const std::function<double()>& loss,
                                   const std::function<void()>& gradients, double tolerance = 1e-6,
                                   double h = 1e-4) {
  gradients();
  double total = 0;
  for (nn::Param<double>* p : params.params()) {
    const nn::Matrix<double> analytic = p->grad;
    nn::Matrix<double> numeric(p->value.rows(), p->value.cols());
    for (nn::Index i = 0; i < p->value.size(); ++i) {
      const double keep = p->value.data()[i];
      const auto at = [&](double dx) {
        p->value.data()[i] = keep + dx;
        return loss();
      };
      numeric.data()[i] = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h);
      p->value.data()[i] = keep;
    }
    const double scale = std::max({analytic.norm(), numeric.norm(), 1e-12});
    const double error = (analytic - numeric).norm() / scale;
    total += analytic.norm();
    EXPECT_LT(error, tolerance) << p->name << ": analytic " << analytic.norm() << ", numeric " << numeric.norm();
  }
  EXPECT_GT(total, 0) << "every gradient is zero";
}

}  // namespace placelab::testing
