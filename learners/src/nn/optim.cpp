#include "placelab/learners/nn/optim.h"

#include <cmath>

#include "placelab/core/error.h"

namespace placelab::nn {

template <typename T>
Adam<T>::Adam(const ParamSet<T>& params, AdamOptions options) : params_(&params), options_(options) {
  for (const Param<T>* p : params.params()) {
    m_.push_back(Matrix<T>::Zero(p->value.rows(), p->value.cols()));
    v_.push_back(Matrix<T>::Zero(p->value.rows(), p->value.cols()));
  }
}

template <typename T>
void Adam<T>::step(double learning_rate) {
  PLACELAB_CHECK(params_ && params_->size() == m_.size()) << "Adam over a changed parameter set";
  ++t_;
  const auto b1 = static_cast<T>(options_.beta1), b2 = static_cast<T>(options_.beta2);
  const auto c1 = static_cast<T>(1.0 - std::pow(options_.beta1, static_cast<double>(t_)));
  const auto c2 = static_cast<T>(1.0 - std::pow(options_.beta2, static_cast<double>(t_)));
  const auto lr = static_cast<T>(learning_rate), eps = static_cast<T>(options_.epsilon);
  for (std::size_t i = 0; i < m_.size(); ++i) {
    Param<T>& p = *params_->params()[i];
    m_[i] = b1 * m_[i] + (T(1) - b1) * p.grad;
    v_[i].array() = b2 * v_[i].array() + (T(1) - b2) * p.grad.array().square();
    p.value.array() -= lr * (m_[i].array() / c1) / ((v_[i].array() / c2).sqrt() + eps);
  }
}

namespace {
template <typename T>
std::vector<T> flatten(const std::vector<Matrix<T>>& ms) {
  std::vector<T> out;
  for (const Matrix<T>& m : ms) out.insert(out.end(), m.data(), m.data() + m.size());
  return out;
}
template <typename T>
bool unflatten(const std::vector<T>& flat, std::vector<Matrix<T>>& ms) {
  std::size_t n = 0;
  for (const Matrix<T>& m : ms) n += static_cast<std::size_t>(m.size());
  if (flat.size() != n) return false;
  const T* src = flat.data();
  for (Matrix<T>& m : ms) {
    std::copy(src, src + m.size(), m.data());
    src += m.size();
  }
  return true;
}
}  // namespace

template <typename T>
std::vector<T> Adam<T>::first_moments() const {
  return flatten(m_);
}
template <typename T>
std::vector<T> Adam<T>::second_moments() const {
  return flatten(v_);
}
template <typename T>
bool Adam<T>::set_state(const std::vector<T>& m, const std::vector<T>& v, int64_t t) {
  if (t < 0) return false;
  std::vector<Matrix<T>> m2 = m_, v2 = v_;
  if (!unflatten(m, m2) || !unflatten(v, v2)) return false;
  m_ = std::move(m2);
  v_ = std::move(v2);
  t_ = t;
  return true;
}

template <typename T>
double clip_grad_norm(ParamSet<T>& params, double max_norm) {
  const double norm = params.grad_norm();
  if (max_norm > 0 && norm > max_norm) params.scale_grad(static_cast<T>(max_norm / norm));
  return norm;
}

template class Adam<float>;
template class Adam<double>;
template double clip_grad_norm<float>(ParamSet<float>&, double);
template double clip_grad_norm<double>(ParamSet<double>&, double);

}  // namespace placelab::nn
