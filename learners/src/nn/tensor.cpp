#include "placelab/learners/nn/tensor.h"

#include "placelab/graph/error.h"

namespace placelab::nn {

template <typename T>
Index ParamSet<T>::num_values() const {
  Index n = 0;
  for (const Param<T>* p : params_) n += p->size();
  return n;
}

template <typename T>
void ParamSet<T>::zero_grad() {
  for (Param<T>* p : params_) p->grad.setZero();
}

template <typename T>
double ParamSet<T>::grad_norm() const {
  double sum = 0;
  for (const Param<T>* p : params_) sum += p->grad.template cast<double>().squaredNorm();
  return std::sqrt(sum);
}

template <typename T>
void ParamSet<T>::scale_grad(T factor) {
  for (Param<T>* p : params_) p->grad *= factor;
}

template <typename T>
std::vector<T> ParamSet<T>::values() const {
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(num_values()));
  for (const Param<T>* p : params_) out.insert(out.end(), p->value.data(), p->value.data() + p->size());
  return out;
}

template <typename T>
std::vector<T> ParamSet<T>::grads() const {
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(num_values()));
  for (const Param<T>* p : params_) out.insert(out.end(), p->grad.data(), p->grad.data() + p->size());
  return out;
}

template <typename T>
void ParamSet<T>::set_values(std::span<const T> values) {
  PLACELAB_CHECK(static_cast<Index>(values.size()) == num_values())
      << values.size() << " values for " << num_values() << " parameters";
  const T* src = values.data();
  for (Param<T>* p : params_) {
    std::copy(src, src + p->size(), p->value.data());
    src += p->size();
  }
}

template class ParamSet<float>;
template class ParamSet<double>;

}  // namespace placelab::nn
