#include "placelab/learners/nn/functions.h"

#include "placelab/core/error.h"

namespace placelab::nn {

template <typename T>
void softmax_columns(const In<T>& Z, Out<T> P) {
  for (Index c = 0; c < Z.cols(); ++c) {
    const T mx = Z.col(c).maxCoeff();
    P.col(c).array() = (Z.col(c).array() - mx).exp();
    P.col(c) /= P.col(c).sum();
  }
}

template <typename T>
void log_softmax_columns(const In<T>& Z, Out<T> L) {
  for (Index c = 0; c < Z.cols(); ++c) {
    const T mx = Z.col(c).maxCoeff();
    const T lse = mx + std::log((Z.col(c).array() - mx).exp().sum());
    L.col(c).array() = Z.col(c).array() - lse;
  }
}

template <typename T>
void softmax_and_log_columns(const In<T>& Z, Out<T> P, Out<T> L) {
  for (Index c = 0; c < Z.cols(); ++c) {
    const T mx = Z.col(c).maxCoeff();
    P.col(c).array() = (Z.col(c).array() - mx).exp();
    const T sum = P.col(c).sum();
    P.col(c) *= T(1) / sum;
    L.col(c).array() = Z.col(c).array() - (mx + std::log(sum));
  }
}

template <typename T>
void shape_logits(const In<T>& Z, T temperature, T tanh_constant, Out<T> Y) {
  PLACELAB_CHECK(temperature > 0) << "temperature " << temperature;
  if (tanh_constant > 0) Y.array() = tanh_constant * (Z.array() / temperature).tanh();
  else Y = Z / temperature;
}

template <typename T>
void shape_logits_backward(const In<T>& Y, const In<T>& dY, T temperature, T tanh_constant, Out<T> dZ) {
  if (tanh_constant > 0)
    dZ.array() = dY.array() * (tanh_constant / temperature) * (T(1) - (Y.array() / tanh_constant).square());
  else dZ = dY / temperature;
}

#define PLACELAB_NN_FUNCTIONS(T)                                       \
  template void softmax_columns<T>(const In<T>&, Out<T>);             \
  template void log_softmax_columns<T>(const In<T>&, Out<T>);         \
  template void softmax_and_log_columns<T>(const In<T>&, Out<T>, Out<T>); \
  template void shape_logits<T>(const In<T>&, T, T, Out<T>);           \
  template void shape_logits_backward<T>(const In<T>&, const In<T>&, T, T, Out<T>);
PLACELAB_NN_FUNCTIONS(float)
PLACELAB_NN_FUNCTIONS(double)
#undef PLACELAB_NN_FUNCTIONS

}  // namespace placelab::nn
