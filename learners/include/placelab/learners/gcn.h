// EAGLE's graph-convolution placer (Lan, Chen, Li, §III.C and Fig. 3b; layers of Kipf & Welling
// 2017): two graph convolutions with ReLU over the group graph, then a linear layer to one logit
// per device for each group, shaped as the seq2seq placer's (temperature, optional tanh bound,
// optional noise), a softmax per group. It decides every group at once, each independently of the
// others' devices — the difference EAGLE's Table II measures against the seq2seq placer.
//
// Inputs as Seq2SeqPolicy's: a column per group in decode order (every placement reads the same
// inputs, or each its own: column s·batch + b), the adjacency over those positions. EAGLE drops the
// adjacency rows from the group features (the graph carries it); the learner does that.
//
//   GcnPolicy<float> gcn(options, features.rows(), nn::GraphAdjacency::normalized(G, edges), D, rng);
//   gcn.forward(features, /*batch=*/10, DecodeMode::kSample, choices, noise, 0.0, &rng);
#pragma once

#include <cstdint>
#include <vector>

#include "placelab/learners/nn/layers.h"
#include "placelab/learners/placer_policy.h"
#include "placelab/learners/seq2seq.h"  // Seq2SeqOptions: the logit shaping both policies share

namespace placelab {

template <typename T>
class GcnPolicy final : public PlacerPolicy<T> {
 public:
  using Matrix = nn::Matrix<T>;

  // options: hidden (both convolutions' width), temperature, tanh_constant and uniform_start are
  // read; the LSTM and attention fields are not. adjacency: over the steps, in decode order.
  GcnPolicy(const Seq2SeqOptions& options, nn::Index input_size, nn::GraphAdjacency adjacency, nn::Index num_devices,
            Rng& rng);
  GcnPolicy(const GcnPolicy&) = delete;  // the ParamSet points into the layers
  GcnPolicy& operator=(const GcnPolicy&) = delete;

  nn::ParamSet<T>& params() override { return params_; }
  const nn::ParamSet<T>& params() const override { return params_; }
  nn::Index steps() const override { return adjacency_.nodes; }
  nn::Index num_devices() const override { return devices_; }
  void forward(const Matrix& inputs, nn::Index batch, DecodeMode mode, std::vector<uint16_t>& choices, Matrix& noise,
               double noise_std = 0.0, Rng* rng = nullptr) override;
  nn::Index batch() const override { return batch_; }
  const Matrix& probs() const override { return probs_; }
  const std::vector<double>& log_probs() const override { return log_probs_; }
  void backward(const Matrix& dlogits) override;

 private:
  Seq2SeqOptions options_;
  nn::GraphAdjacency adjacency_;
  nn::Index input_size_, devices_;
  nn::ParamSet<T> params_;
  nn::GraphConv<T> conv1_, conv2_;
  nn::Linear<T> head_;

  // Activations of the last forward. The network runs once per distinct input: over one column per
  // group when every placement reads the same inputs (net_batch_ 1), else over all of them.
  nn::Index batch_ = 0, net_batch_ = 1;
  Matrix X_, Z1_, H1_, Z2_, H2_, logits_, shaped_net_;  // network: × S·net_batch
  Matrix shaped_, probs_, logits_step_;                 // D × S·batch, D × batch
  std::vector<double> log_probs_;
  Matrix dshaped_net_, dlogits_net_, dH2_, dH1_;
};

}  // namespace placelab
