// The interface of a learner's placer network (PlacerPolicy) and how it decodes (DecodeMode):
// the seq2seq LSTM (seq2seq.h) and the graph convolutions (gcn.h) implement it, and the
// policy-gradient learners use either through it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "placelab/learners/learner.h"
#include "placelab/learners/nn/layers.h"
#include "placelab/learners/random.h"

namespace placelab {

enum class DecodeMode {
  kSample,  // draw each device from the step's softmax (and the noise, when asked)
  kGreedy,  // the most probable device at each step, no noise
  kGiven,   // teacher forcing: the devices in `choices`, the noise in `noise`
};

// What a learner needs of its placer network, whatever its kind (the seq2seq LSTM here, the graph
// convolutions of gcn.h): decode a batch of placements — sampled, greedy, or given — keeping the
// activations, the per-decision softmaxes and each placement's log-probability, and one backward
// pass from the gradient with respect to the logits. Layouts as Seq2SeqPolicy documents them.
template <typename T>
class PlacerPolicy {
 public:
  using Matrix = nn::Matrix<T>;
  virtual ~PlacerPolicy() = default;
  virtual nn::ParamSet<T>& params() = 0;
  virtual const nn::ParamSet<T>& params() const = 0;
  virtual nn::Index steps() const = 0;
  virtual nn::Index num_devices() const = 0;
  virtual void forward(const Matrix& inputs, nn::Index batch, DecodeMode mode, std::vector<uint16_t>& choices,
                       Matrix& noise, double noise_std = 0.0, Rng* rng = nullptr) = 0;
  virtual nn::Index batch() const = 0;
  virtual const Matrix& probs() const = 0;
  virtual const std::vector<double>& log_probs() const = 0;
  virtual void backward(const Matrix& dlogits) = 0;
  // Asked between the steps of forward and backward (decode steps, layers); true throws
  // LearnerStopped (learner.h). Must outlive the policy's use of it; null: never asked.
  void set_stop_check(const std::function<bool()>* check) { stop_check_ = check; }

 protected:
  void check_stop() const {
    if (stop_check_ && *stop_check_ && (*stop_check_)()) throw LearnerStopped();
  }

 private:
  const std::function<bool()>* stop_check_ = nullptr;
};

}  // namespace placelab
