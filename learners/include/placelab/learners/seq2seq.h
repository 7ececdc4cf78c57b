// The attentional sequence-to-sequence placer of Mirhoseini et al. 2017, with the variants that
// Spotlight, the Hierarchical Planner and EAGLE use: an LSTM encoder (uni- or bidirectional,
// stacked) reads one input per group; an LSTM decoder emits one device per group, feeding the
// chosen device's learned embedding (a learned "go" vector first) to its next step; content-based
// attention over the encoder states is applied after the decoder LSTM (Mirhoseini; the
// Hierarchical Planner's code) or before it, its context joining the decoder's input (EAGLE).
// Logits = W [h; context] + b, then shaped as the Hierarchical Planner's code does (temperature,
// optional C·tanh bound, optional noise), then a softmax.
//
// The policy does not know about graphs: its inputs are a matrix with a column per step (group
// features in decode order, or nothing when each step has a learned embedding — Spotlight feeds
// the groups' names as vocabulary tokens). One forward pass decodes a batch of placements (sampled,
// greedy, or given for the log-probability and gradient of placements sampled earlier), keeping
// every activation for one backward pass that takes the gradient with respect to the logits.
//
//   Seq2SeqPolicy<float> policy(options, features.rows(), groups, devices, rng);
//   policy.forward(features, /*batch=*/12, DecodeMode::kSample, choices, noise, 0.0, &rng);
//   ... dlogits from policy.probs() and the rewards ...
//   policy.params().zero_grad();  policy.backward(dlogits);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "placelab/learners/learner.h"
#include "placelab/learners/nn/layers.h"
#include "placelab/learners/placer_policy.h"
#include "placelab/learners/random.h"

namespace placelab {

enum class AttentionPlacement { kNone, kBefore, kAfter };

struct Seq2SeqOptions {
  int hidden = 512;            // decoder LSTM units; the encoder's too (split over both directions)
  int layers = 1;              // stacked LSTM layers, encoder and decoder alike
  bool bidirectional = true;   // encoder reads both ways (the Hierarchical Planner, EAGLE)
  AttentionPlacement attention = AttentionPlacement::kAfter;
  // The Hierarchical Planner's code pairs the forward state of step i with the backward state of
  // step S−1−i in the attention memory (see NOTES.md): off = the paper's bidirectional states.
  bool hp_memory_pairing = false;
  double forget_bias = 1.0;    // initial forget-gate bias of every LSTM
  double temperature = 1.0;    // logits / temperature
  double tanh_constant = 0.0;  // > 0: logits = C·tanh(logits / temperature)
  // Zero the output layer so that every step starts uniform over the devices (Spotlight starts
  // from "uniformly random distributions").
  bool uniform_start = false;
  // Throws InputError naming `owner`.field, the value and the rule.
  void validate(const std::string& owner) const;
};

template <typename T>
class Seq2SeqPolicy final : public PlacerPolicy<T> {
 public:
  using Matrix = nn::Matrix<T>;

  // input_size: rows of the encoder's input matrix, or 0 for a learned embedding per step (then
  // forward ignores `inputs`). steps: groups to place (≥ 1); num_devices: 1..65535. Draws the
  // initial weights from `rng` (Glorot; LSTM forget biases at options.forget_bias).
  Seq2SeqPolicy(const Seq2SeqOptions& options, nn::Index input_size, nn::Index steps, nn::Index num_devices, Rng& rng);
  Seq2SeqPolicy(const Seq2SeqPolicy&) = delete;  // the ParamSet points into the layers
  Seq2SeqPolicy& operator=(const Seq2SeqPolicy&) = delete;

  nn::ParamSet<T>& params() override { return params_; }
  const nn::ParamSet<T>& params() const override { return params_; }
  nn::Index steps() const override { return steps_; }
  nn::Index num_devices() const override { return devices_; }
  const Seq2SeqOptions& options() const { return options_; }

  // Decodes `batch` placements. inputs: input_size × steps (every placement reads the same) or
  // input_size × steps·batch (column s·batch + b). choices: steps·batch device indices,
  // placement-major (choices[b·steps + s]), written in kSample and kGreedy, read in kGiven.
  // noise: D × steps·batch, written in kSample when noise_std > 0 (entry = noise_std · RMS of the
  // step's shaped logits over the batch · N(0, 1)), read in kGiven when non-empty, cleared
  // otherwise. rng: needed by kSample. Keeps every activation for backward().
  void forward(const Matrix& inputs, nn::Index batch, DecodeMode mode, std::vector<uint16_t>& choices, Matrix& noise,
               double noise_std = 0.0, Rng* rng = nullptr) override;
  nn::Index batch() const override { return batch_; }
  // D × steps·batch: the softmax of each step (column s·batch + b), as sampling used it.
  const Matrix& probs() const override { return probs_; }
  // Σ_s log p(choice) of each placement of the last forward, in double.
  const std::vector<double>& log_probs() const override { return log_probs_; }

  // Adds to params().grad the gradient of an objective whose gradient with respect to the logits
  // the softmaxes read (after shaping and noise) is dlogits (D × steps·batch).
  void backward(const Matrix& dlogits) override;

 private:
  void encode(const Matrix& inputs);
  void decode_step(nn::Index s, DecodeMode mode, std::vector<uint16_t>& choices, Matrix& noise, double noise_std,
                   Rng* rng);
  void encoder_backward();

  Seq2SeqOptions options_;
  nn::Index input_size_, steps_, devices_, hidden_;
  nn::ParamSet<T> params_;
  // Encoder: a learned input per step when input_size_ = 0, then `layers` LSTM or BiLSTM layers.
  nn::Embedding<T> step_embedding_;
  std::vector<nn::LstmLayer<T>> enc_uni_;
  std::vector<nn::BiLstm<T>> enc_bi_;
  // Decoder: device embeddings (column D = "go"), LSTM cells, attention, output layer.
  nn::Embedding<T> device_embedding_;
  std::vector<nn::LstmCell<T>> dec_;
  nn::Attention<T> attention_;
  nn::Linear<T> head_;

  // Activations of the last forward.
  nn::Index batch_ = 0, enc_batch_ = 1;
  Matrix X_;                                  // encoder input
  std::vector<Matrix> dec_h0_, dec_c0_;       // decoder initial state per layer, hidden × batch
  std::vector<Matrix> gates_, C_, H_;         // per decoder layer: 4H × S·B, H × S·B, H × S·B
  Matrix table_;                              // 4H × (D+1): layer 0's input part for each device and go
  Matrix P0_;                                 // 4H × B: one step's layer-0 input part
  std::vector<nn::Index> input_ids_;          // S·B: the table column each step read (D = go)
  Matrix att_probs_;                          // S × S·B
  Matrix head_in_;                            // [h_top; context] × S·B
  Matrix shaped_, probs_;                     // D × S·B: shaped logits (before noise), softmax
  Matrix logits_step_;                        // D × B
  std::vector<double> log_probs_;

  // Backward workspaces.
  Matrix dshaped_, dhead_in_, dq_, dtable_, dP_all_, dM_, dmem_;
  std::vector<Matrix> ddec_P_, dh_carry_, dc_carry_;
  Matrix dh_, dx_below_, dctx_;
};

}  // namespace placelab
