// The decisions every placer policy makes the same way, one rule for the seq2seq LSTM and the GCN
// (seq2seq.h, gcn.h): checking or preparing a forward pass's choices and noise, and, per step,
// noise → softmax → choice → log-probability. Private to learners/.
#pragma once

#include <cstdint>
#include <vector>

#include "placelab/learners/nn/tensor.h"
#include "placelab/learners/random.h"
#include "placelab/learners/seq2seq.h"

namespace placelab::detail {

// Before a forward pass of `steps` decisions for `batch` placements over `devices` devices: in
// kGiven, checks the given choices and noise; otherwise sizes `choices` (zeros) and `noise`
// (D × steps·batch when sampling with noise_std > 0, else empty).
template <typename T>
void prepare_decisions(DecodeMode mode, nn::Index steps, nn::Index batch, nn::Index devices,
                       std::vector<uint16_t>& choices, nn::Matrix<T>& noise, double noise_std, const Rng* rng);

// Step s's decisions from its shaped logits (D × B): the step's noise added (drawn first when
// sampling: std = noise_std × the RMS of the step's shaped logits), the softmax into `probs`
// (D × B), each placement's choice drawn, taken greedily, or read (choices[b·steps + s]), and its
// log-probability, exact even where p underflows, added to log_probs[b]. `logits` is a workspace.
template <typename T>
void decide_step(const nn::In<T>& shaped, nn::Index s, nn::Index steps, DecodeMode mode, std::vector<uint16_t>& choices,
                 nn::Matrix<T>& noise, double noise_std, Rng* rng, nn::Matrix<T>& logits, nn::Out<T> probs,
                 std::vector<double>& log_probs);

}  // namespace placelab::detail
