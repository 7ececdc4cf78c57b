#include "placelab/learners/gcn.h"

#include "decide.h"
#include "placelab/core/error.h"
#include "placelab/learners/nn/functions.h"

namespace placelab {

using nn::Index;

template <typename T>
GcnPolicy<T>::GcnPolicy(const Seq2SeqOptions& options, Index input_size, nn::GraphAdjacency adjacency, Index num_devices,
                        Rng& rng)
    : options_(options), adjacency_(std::move(adjacency)), input_size_(input_size), devices_(num_devices) {
  options_.validate("gcn");
  PLACELAB_CHECK(input_size >= 1 && adjacency_.nodes >= 1 && num_devices >= 1 && num_devices <= 65535)
      << "gcn of " << adjacency_.nodes << " groups over " << num_devices << " devices, input " << input_size;
  conv1_ = nn::GraphConv<T>("gcn.conv1", input_size, options_.hidden);
  conv2_ = nn::GraphConv<T>("gcn.conv2", options_.hidden, options_.hidden);
  head_ = nn::Linear<T>("output", options_.hidden, num_devices);
  conv1_.register_params(params_);
  conv2_.register_params(params_);
  head_.register_params(params_);
  conv1_.init(rng);
  conv2_.init(rng);
  head_.init(rng);
  if (options_.uniform_start) head_.W.value.setZero();
}

template <typename T>
void GcnPolicy<T>::forward(const Matrix& inputs, Index batch, DecodeMode mode, std::vector<uint16_t>& choices,
                           Matrix& noise, double noise_std, Rng* rng) {
  const Index S = steps(), D = devices_, B = batch;
  detail::prepare_decisions<T>(mode, S, B, D, choices, noise, noise_std, rng);
  PLACELAB_CHECK(inputs.rows() == input_size_ && (inputs.cols() == S || inputs.cols() == S * B))
      << "gcn inputs " << inputs.rows() << " × " << inputs.cols() << " for " << S << " groups of " << B;
  batch_ = B;
  net_batch_ = inputs.cols() / S;
  const Index N = inputs.cols(), H = options_.hidden;
  X_ = inputs;
  Z1_.resize(H, N);
  this->check_stop();
  conv1_.forward(X_, adjacency_, net_batch_, Z1_);
  H1_ = Z1_.cwiseMax(T(0));
  Z2_.resize(H, N);
  this->check_stop();
  conv2_.forward(H1_, adjacency_, net_batch_, Z2_);
  H2_ = Z2_.cwiseMax(T(0));
  logits_.resize(D, N);
  head_.forward(H2_, logits_);
  shaped_net_.resize(D, N);
  nn::shape_logits<T>(logits_, static_cast<T>(options_.temperature), static_cast<T>(options_.tanh_constant), shaped_net_);

  shaped_.resize(D, S * B);
  probs_.resize(D, S * B);
  log_probs_.assign(static_cast<std::size_t>(B), 0.0);
  for (Index s = 0; s < S; ++s) {
    auto block = shaped_.middleCols(s * B, B);
    if (net_batch_ == 1) block.colwise() = shaped_net_.col(s);
    else block = shaped_net_.middleCols(s * B, B);
    detail::decide_step<T>(block, s, S, mode, choices, noise, noise_std, rng, logits_step_, probs_.middleCols(s * B, B),
                           log_probs_);
  }
}

template <typename T>
void GcnPolicy<T>::backward(const Matrix& dlogits) {
  const Index S = steps(), D = devices_, B = batch_;
  PLACELAB_CHECK(B > 0 && dlogits.rows() == D && dlogits.cols() == S * B)
      << "dlogits " << dlogits.rows() << " × " << dlogits.cols() << " after a forward of " << S << " × " << B;
  // The noise is added, so the shaped logits take dlogits as they are; placements that shared the
  // network's output add up.
  if (net_batch_ == 1) {
    dshaped_net_.resize(D, S);
    for (Index s = 0; s < S; ++s) dshaped_net_.col(s) = dlogits.middleCols(s * B, B).rowwise().sum();
  } else {
    dshaped_net_ = dlogits;
  }
  dlogits_net_.resize(D, dshaped_net_.cols());
  nn::shape_logits_backward<T>(shaped_net_, dshaped_net_, static_cast<T>(options_.temperature),
                               static_cast<T>(options_.tanh_constant), dlogits_net_);
  this->check_stop();
  head_.backward(H2_, dlogits_net_, &dH2_);
  dH2_ = (Z2_.array() > T(0)).select(dH2_, T(0));
  this->check_stop();
  conv2_.backward(H1_, adjacency_, net_batch_, dH2_, &dH1_);
  dH1_ = (Z1_.array() > T(0)).select(dH1_, T(0));
  this->check_stop();
  conv1_.backward(X_, adjacency_, net_batch_, dH1_, nullptr);
}

template class GcnPolicy<float>;
template class GcnPolicy<double>;

}  // namespace placelab
