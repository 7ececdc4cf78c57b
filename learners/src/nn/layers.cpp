#include "placelab/learners/nn/layers.h"

#include <cmath>

#include "placelab/core/error.h"

namespace placelab::nn {

template <typename T>
void glorot_uniform(Matrix<T>& m, Rng& rng) {
  const double a = std::sqrt(6.0 / static_cast<double>(m.rows() + m.cols()));
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(a * (2.0 * uniform01(rng) - 1.0));
}

// ---- Linear ------------------------------------------------------------------------------------

template <typename T>
Linear<T>::Linear(std::string name, Index in, Index out, bool bias) : bias_(bias) {
  PLACELAB_CHECK(in > 0 && out > 0) << "Linear " << name << ": " << in << " → " << out;
  W.name = name + ".W";
  W.resize(out, in);
  b.name = name + ".b";
  b.resize(bias ? out : 0, bias ? 1 : 0);
}

template <typename T>
void Linear<T>::register_params(ParamSet<T>& set) {
  set.add(W);
  if (bias_) set.add(b);
}

template <typename T>
void Linear<T>::init(Rng& rng) {
  glorot_uniform(W.value, rng);
  b.value.setZero();
}

template <typename T>
void Linear<T>::forward(const In<T>& X, Out<T> Y) const {
  multiply(Y, W.value, X);
  if (bias_) Y.colwise() += b.value.col(0);
}

template <typename T>
void Linear<T>::backward(const In<T>& X, const In<T>& dY, Matrix<T>* dX) {
  W.grad.noalias() += dY * X.transpose();
  if (bias_) b.grad.col(0) += dY.rowwise().sum();
  if (dX) {
    dX->resize(W.value.cols(), dY.cols());
    multiply(*dX, W.value.transpose(), dY);
  }
}

// ---- Embedding ---------------------------------------------------------------------------------

template <typename T>
Embedding<T>::Embedding(std::string name, Index vocabulary, Index dim) {
  PLACELAB_CHECK(vocabulary > 0 && dim > 0) << "Embedding " << name << ": " << vocabulary << " × " << dim;
  E.name = name + ".E";
  E.resize(dim, vocabulary);
}

template <typename T>
void Embedding<T>::register_params(ParamSet<T>& set) {
  set.add(E);
}

template <typename T>
void Embedding<T>::init(Rng& rng) {
  glorot_uniform(E.value, rng);
}

// ---- LstmCell ----------------------------------------------------------------------------------

template <typename T>
LstmCell<T>::LstmCell(std::string name, Index input, Index hidden, T forget_bias) : forget_bias_(forget_bias) {
  PLACELAB_CHECK(input > 0 && hidden > 0) << "LstmCell " << name << ": input " << input << ", hidden " << hidden;
  Wx.name = name + ".Wx";
  Wx.resize(4 * hidden, input);
  Wh.name = name + ".Wh";
  Wh.resize(4 * hidden, hidden);
  b.name = name + ".b";
  b.resize(4 * hidden, 1);
}

template <typename T>
void LstmCell<T>::register_params(ParamSet<T>& set) {
  set.add(Wx);
  set.add(Wh);
  set.add(b);
}

template <typename T>
void LstmCell<T>::init(Rng& rng) {
  glorot_uniform(Wx.value, rng);
  glorot_uniform(Wh.value, rng);
  const Index H = hidden_size();
  b.value.setZero();
  b.value.middleRows(H, H).setConstant(forget_bias_);
}

template <typename T>
void LstmCell<T>::project_input(const In<T>& X, Out<T> P) const {
  multiply(P, Wx.value, X);
  P.colwise() += b.value.col(0);
}

namespace {
template <typename A>
auto sigmoid(const A& x) {
  using S = typename A::Scalar;
  return (S(1) + (-x).exp()).inverse();
}
}  // namespace

template <typename T>
void LstmCell<T>::step(const In<T>& P, const In<T>& h_prev, const In<T>& c_prev, Out<T> gates, Out<T> c,
                       Out<T> h) const {
  const Index H = hidden_size();
  multiply(gates, Wh.value, h_prev);
  gates += P;
  auto i = gates.topRows(H).array();
  auto f = gates.middleRows(H, H).array();
  auto g = gates.middleRows(2 * H, H).array();
  auto o = gates.bottomRows(H).array();
  i = sigmoid(i);
  f = sigmoid(f);
  g = g.tanh();
  o = sigmoid(o);
  c.array() = f * c_prev.array() + i * g;
  h.array() = o * c.array().tanh();
}

template <typename T>
void LstmCell<T>::step_backward(const In<T>& gates, const In<T>& c_prev, const In<T>& c, const In<T>& dh, Out<T> dc,
                                Out<T> dP) const {
  const Index H = hidden_size();
  const auto i = gates.topRows(H).array();
  const auto f = gates.middleRows(H, H).array();
  const auto g = gates.middleRows(2 * H, H).array();
  const auto o = gates.bottomRows(H).array();
  // dP's o rows first hold tanh(c'), then (elementwise, in place) the o gradient.
  auto tc = dP.bottomRows(H).array();
  tc = c.array().tanh();
  dc.array() += dh.array() * o * (T(1) - tc.square());  // the whole gradient reaching c'
  dP.topRows(H).array() = dc.array() * g * i * (T(1) - i);
  dP.middleRows(H, H).array() = dc.array() * c_prev.array() * f * (T(1) - f);
  dP.middleRows(2 * H, H).array() = dc.array() * i * (T(1) - g.square());
  tc = dh.array() * tc * o * (T(1) - o);
  dc.array() *= f;
}

template <typename T>
void LstmCell<T>::recurrent_backward(const In<T>& dP, Out<T> dh_prev) const {
  multiply(dh_prev, Wh.value.transpose(), dP);
}

template <typename T>
void LstmCell<T>::accumulate_recurrent(const In<T>& dP, const In<T>& H_prev) {
  Wh.grad.noalias() += dP * H_prev.transpose();
}

template <typename T>
void LstmCell<T>::project_input_backward(const In<T>& X, const In<T>& dP, Matrix<T>* dX) {
  Wx.grad.noalias() += dP * X.transpose();
  b.grad.col(0) += dP.rowwise().sum();
  if (dX) {
    dX->resize(Wx.value.cols(), dP.cols());
    multiply(*dX, Wx.value.transpose(), dP);
  }
}

// ---- LstmLayer ---------------------------------------------------------------------------------

template <typename T>
LstmLayer<T>::LstmLayer(std::string name, Index input, Index hidden, bool reverse, T forget_bias)
    : cell_(std::move(name), input, hidden, forget_bias), reverse_(reverse) {}

template <typename T>
void LstmLayer<T>::forward(const In<T>& X, Index steps, Index batch, const Matrix<T>* h0, const Matrix<T>* c0) {
  const Index H = hidden_size();
  PLACELAB_CHECK(steps > 0 && batch > 0 && X.rows() == input_size() && X.cols() == steps * batch)
      << "LstmLayer input " << X.rows() << " × " << X.cols() << " for " << steps << " steps of " << batch;
  steps_ = steps;
  batch_ = batch;
  init_cols_ = 0;
  h0_.setZero(H, batch);
  c0_.setZero(H, batch);
  for (auto [given, state] : {std::pair{h0, &h0_}, std::pair{c0, &c0_}}) {
    if (!given) continue;
    PLACELAB_CHECK(given->rows() == H && (given->cols() == 1 || given->cols() == batch)) << "initial state shape";
    init_cols_ = given->cols();
    if (given->cols() == 1) state->colwise() = given->col(0);
    else *state = *given;
  }
  P_.resize(4 * H, steps * batch);
  gates_.resize(4 * H, steps * batch);
  C_.resize(H, steps * batch);
  H_.resize(H, steps * batch);
  cell_.project_input(X, P_);
  for (Index k = 0; k < steps; ++k) {
    const Index s = reverse_ ? steps - 1 - k : k;
    const Index prev = reverse_ ? s + 1 : s - 1;
    const In<T> h_prev = k == 0 ? In<T>(h0_) : In<T>(H_.middleCols(prev * batch, batch));
    const In<T> c_prev = k == 0 ? In<T>(c0_) : In<T>(C_.middleCols(prev * batch, batch));
    cell_.step(P_.middleCols(s * batch, batch), h_prev, c_prev, gates_.middleCols(s * batch, batch),
               C_.middleCols(s * batch, batch), H_.middleCols(s * batch, batch));
  }
}

template <typename T>
void LstmLayer<T>::backward(const In<T>& X, const Matrix<T>* dH, const Matrix<T>* dh_final, const Matrix<T>* dc_final,
                            Matrix<T>* dX, Matrix<T>* dh0, Matrix<T>* dc0) {
  const Index H = hidden_size(), S = steps_, B = batch_;
  PLACELAB_CHECK(S > 0) << "LstmLayer::backward before forward";
  PLACELAB_CHECK(!dH || (dH->rows() == H && dH->cols() == S * B)) << "dH shape";
  if (dh_final) dh_step_ = *dh_final;
  else dh_step_.setZero(H, B);
  if (dc_final) dc_ = *dc_final;
  else dc_.setZero(H, B);
  dP_.resize(4 * H, S * B);
  dh_.resize(H, B);
  for (Index k = S - 1; k >= 0; --k) {
    const Index s = reverse_ ? S - 1 - k : k;
    const Index prev = reverse_ ? s + 1 : s - 1;
    dh_ = dh_step_;
    if (dH) dh_ += dH->middleCols(s * B, B);
    const In<T> c_prev = k == 0 ? In<T>(c0_) : In<T>(C_.middleCols(prev * B, B));
    cell_.step_backward(gates_.middleCols(s * B, B), c_prev, C_.middleCols(s * B, B), dh_, dc_, dP_.middleCols(s * B, B));
    cell_.recurrent_backward(dP_.middleCols(s * B, B), dh_step_);
  }
  // dWh: each step's dP against the state before it, as two GEMMs.
  if (S > 1) {
    if (reverse_) cell_.accumulate_recurrent(dP_.leftCols((S - 1) * B), H_.rightCols((S - 1) * B));
    else cell_.accumulate_recurrent(dP_.rightCols((S - 1) * B), H_.leftCols((S - 1) * B));
  }
  if (init_cols_ > 0) cell_.accumulate_recurrent(reverse_ ? dP_.rightCols(B) : dP_.leftCols(B), h0_);
  cell_.project_input_backward(X, dP_, dX);
  for (auto [out, grad] : {std::pair{dh0, &dh_step_}, std::pair{dc0, &dc_}}) {
    if (!out) continue;
    if (init_cols_ == 1) *out = grad->rowwise().sum();
    else *out = *grad;
  }
}

// ---- BiLstm ------------------------------------------------------------------------------------

template <typename T>
BiLstm<T>::BiLstm(std::string name, Index input, Index hidden, bool pair_reversed, T forget_bias)
    : fw_(name + ".fw", input, hidden, false, forget_bias),
      bw_(name + ".bw", input, hidden, true, forget_bias),
      pair_reversed_(pair_reversed) {}

template <typename T>
void BiLstm<T>::register_params(ParamSet<T>& set) {
  fw_.register_params(set);
  bw_.register_params(set);
}

template <typename T>
void BiLstm<T>::init(Rng& rng) {
  fw_.init(rng);
  bw_.init(rng);
}

template <typename T>
void BiLstm<T>::forward(const In<T>& X, Index steps, Index batch, const Matrix<T>* h0, const Matrix<T>* c0) {
  const Index H = fw_.hidden_size();
  // A given initial state stacks the two directions' (2H rows).
  Matrix<T> h0f, h0b, c0f, c0b;
  if (h0) h0f = h0->topRows(H), h0b = h0->bottomRows(H);
  if (c0) c0f = c0->topRows(H), c0b = c0->bottomRows(H);
  fw_.forward(X, steps, batch, h0 ? &h0f : nullptr, c0 ? &c0f : nullptr);
  bw_.forward(X, steps, batch, h0 ? &h0b : nullptr, c0 ? &c0b : nullptr);
  steps_ = steps;
  batch_ = batch;
  H_.resize(2 * H, steps * batch);
  H_.topRows(H) = fw_.outputs();
  for (Index s = 0; s < steps; ++s) {
    const Index from = pair_reversed_ ? steps - 1 - s : s;
    H_.bottomRows(H).middleCols(s * batch, batch) = bw_.outputs().middleCols(from * batch, batch);
  }
  final_h_.resize(2 * H, batch);
  final_c_.resize(2 * H, batch);
  final_h_.topRows(H) = fw_.final_h();
  final_h_.bottomRows(H) = bw_.final_h();
  final_c_.topRows(H) = fw_.final_c();
  final_c_.bottomRows(H) = bw_.final_c();
}

template <typename T>
void BiLstm<T>::backward(const In<T>& X, const Matrix<T>* dH, const Matrix<T>* dh_final, const Matrix<T>* dc_final,
                         Matrix<T>* dX, Matrix<T>* dh0, Matrix<T>* dc0) {
  const Index H = fw_.hidden_size(), S = steps_, B = batch_;
  if (dH) {
    dHf_ = dH->topRows(H);
    dHb_.resize(H, S * B);
    for (Index s = 0; s < S; ++s) {
      const Index from = pair_reversed_ ? S - 1 - s : s;
      dHb_.middleCols(from * B, B) = dH->bottomRows(H).middleCols(s * B, B);
    }
  }
  if (dh_final) dhf_ = dh_final->topRows(H), dhb_ = dh_final->bottomRows(H);
  if (dc_final) dcf_ = dc_final->topRows(H), dcb_ = dc_final->bottomRows(H);
  Matrix<T> dh0f, dh0b, dc0f, dc0b;
  fw_.backward(X, dH ? &dHf_ : nullptr, dh_final ? &dhf_ : nullptr, dc_final ? &dcf_ : nullptr, dX,
               dh0 ? &dh0f : nullptr, dc0 ? &dc0f : nullptr);
  bw_.backward(X, dH ? &dHb_ : nullptr, dh_final ? &dhb_ : nullptr, dc_final ? &dcb_ : nullptr, dX ? &dX2_ : nullptr,
               dh0 ? &dh0b : nullptr, dc0 ? &dc0b : nullptr);
  if (dX) *dX += dX2_;
  if (dh0) {
    dh0->resize(2 * H, dh0f.cols());
    dh0->topRows(H) = dh0f;
    dh0->bottomRows(H) = dh0b;
  }
  if (dc0) {
    dc0->resize(2 * H, dc0f.cols());
    dc0->topRows(H) = dc0f;
    dc0->bottomRows(H) = dc0b;
  }
}

template void glorot_uniform<float>(Matrix<float>&, Rng&);
template void glorot_uniform<double>(Matrix<double>&, Rng&);
template class Linear<float>;
template class Linear<double>;
template class Embedding<float>;
template class Embedding<double>;
template class LstmCell<float>;
template class LstmCell<double>;
template class LstmLayer<float>;
template class LstmLayer<double>;
template class BiLstm<float>;
template class BiLstm<double>;

}  // namespace placelab::nn
