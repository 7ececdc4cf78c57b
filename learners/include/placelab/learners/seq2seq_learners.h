// The neural placers over the seq2seq policy (seq2seq.h), each as its paper states it:
//   GrlLearner       — Mirhoseini et al., ICML 2017 ("GRL" in Spotlight, "PG" in Post): REINFORCE
//                      on √T with a moving-average baseline that starts at the failing signal, the
//                      failing signal for OOM, only placements that ran after a set point, Adam,
//                      gradient clipping; where the paper is silent, the public Hierarchical
//                      Planner code's settings (../shared/papers/NOTES.md).
//   SpotlightLearner — Gao, Chen, Li, ICML 2018: the KL-penalised stage objective (Eq. 15, β = 1),
//                      10 gradient-ascent steps per iteration of 5 placements, R̄ the mean time of
//                      earlier trials; the trainer keeps the best placement.
// Both draw a whole update's placements from one forward pass of the policy (the policy does not
// change before the update, so this is the same distribution; it also makes the result independent
// of the trainer's batch size), and save and load their whole state — weights, Adam moments,
// baselines, the RNG and an update's pending placements — so a resumed run ends bit-identical.
//
//   PlacementProblem problem = describe_problem(graph, grouping);
//   GrlLearner grl(SearchSpace{grouping.num_groups(), gpus}, problem, GrlOptions{}, /*seed=*/1);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "placelab/learners/learner.h"
#include "placelab/learners/nn/optim.h"
#include "placelab/learners/problem.h"
#include "placelab/learners/seq2seq.h"

namespace placelab {

// The policy and the inputs it reads, as the scenario options name them (docs/learners.md). The
// learners' Options derive from it, so every seq2seq learner takes the same policy options.
struct Seq2SeqPolicyOptions {
  // The placer network: the seq2seq LSTM (seq2seq.h), or EAGLE's graph convolutions (gcn.h; over
  // the scenario's groups only, reading their features without the adjacency rows).
  std::string placer = "seq2seq";      // seq2seq | gcn
  int hidden = 512;                    // LSTM units (the Hierarchical Planner's code); the GCN's width
  int layers = 1;
  bool bidirectional = true;           // the Hierarchical Planner's code
  std::string attention = "after";     // after | before | none
  std::string inputs = "features";     // features (group features) | names (a learned embedding per group)
  std::string order = "topological";   // topological | id: the order groups are read and placed in
  double temperature = 1.0;
  // The Hierarchical Planner's code bounds logits to 1.0·tanh and adds noise of 0.5 × their RMS
  // for 750 steps; both are off here (docs/learners.md: with the code's learning rate the tanh
  // saturated and froze the policy, and without them grl learned faster on Inception-V3).
  double tanh_constant = 0.0;          // C·tanh(logits/τ); 0 = unbounded
  double logit_noise = 0.0;            // noise std as a fraction of the logits' RMS; 0 = none
  int64_t noise_until = 750;           // samples after which sampling is noise-free
  double forget_bias = 1.0;
  bool hp_memory_pairing = false;      // the Hierarchical Planner code's attention memory (NOTES.md)
  bool uniform_start = false;          // zero output layer: uniform over the devices at first
  // Throws InputError naming owner.field, value and rule.
  void validate_policy(const std::string& owner) const;
  Seq2SeqOptions seq2seq() const;
};

// The most groups a seq2seq learner places: one decoder step each, attention over all of them
// (time and memory grow with the square).
inline constexpr std::size_t kMaxSeq2SeqGroups = 4096;

struct GrlOptions : Seq2SeqPolicyOptions {
  int samples_per_update = 12;         // K placements per gradient step (Post ran its PG with 12 workers)
  // Adam. The Hierarchical Planner's code uses 0.1: its first updates, whose advantages are all
  // far below the baseline (it starts at the failing signal), then saturate the policy in a few
  // steps (docs/learners.md); not stated by Mirhoseini et al. 2017.
  double learning_rate = 0.001;
  double lr_decay = 0.95;              // × lr_decay every lr_decay_every samples ...
  int64_t lr_decay_every = 50;
  int64_t lr_decay_after = 400;        // ... after this many samples (staircase)
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  double grad_clip = 1.0;              // global gradient norm; 0 = no clipping
  double baseline_decay = 0.9;         // B ← decay·B + (1−decay)·√T per sample
  double failing_signal = 10.0;        // √T of an OOM placement (√100 s) and the baseline's start
  int64_t feasible_only_after = 1000;  // samples after which only placements that ran update
  void validate(const std::string& owner = "grl") const;
};

struct SpotlightOptions : Seq2SeqPolicyOptions {
  // Spotlight's policy: a two-layer seq2seq LSTM that reads the groups' names as vocabulary
  // tokens and starts uniform; its hidden size is not stated (ours: 256); no logit shaping or noise.
  SpotlightOptions();
  int samples_per_update = 5;          // placements per iteration (Spotlight's 5 workers)
  int sga_steps = 10;                  // gradient-ascent steps on Eq. 15 per iteration
  double beta = 1.0;                   // KL penalty (fixed, as the paper)
  double learning_rate = 0.001;        // Adam (not stated by the paper: ours)
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  double grad_clip = 1.0;              // ours
  double oom_time_s = kDefaultOomTimeS;  // step time of an OOM placement (Post, the same authors)
  // The advantage R̄ − R divided by R̄ ("relative"), or in seconds as Eq. 15 writes it. With a fixed
  // β the unit of R decides between the ratio and the KL terms; the paper's R, a ten-step time of
  // ~1 s on CIFAR-10, made β = 1 and β = R̄ the same, which "relative" keeps at any step time (in
  // seconds: KL-bound on a 0.02 s CIFAR-10 step, collapsing on an OOM-heavy NMT; docs/learners.md).
  std::string advantage = "relative";
  void validate() const;
};

// The machinery the seq2seq learners share: the policy over the problem's groups (or over groups a
// subclass learns), Adam over every trainable parameter, the RNG, the pending update batch and
// state I/O. Subclasses implement update().
class Seq2SeqLearner : public Learner {
 public:
  ~Seq2SeqLearner() override;
  const SearchSpace& space() const override { return space_; }
  void set_sample_budget(int64_t samples) override;
  int64_t samples_seen() const override { return samples_seen_; }
  std::size_t samples_until_update() const override { return batch_size_ - observed_; }
  std::vector<Placement> propose(std::size_t max_count) override;
  void observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) override;
  Placement mode() const override;
  std::string save_state() const override;
  void load_state(const std::string& state) override;
  // Asked by the policy between decode steps and layers, and between an update's steps.
  void set_stop_check(std::function<bool()> check) override;

  const PlacerPolicy<float>& policy() const { return *policy_; }
  // Groups the policy decodes per placement: the search space's, or a subclass's learned groups.
  std::size_t decoded_groups() const { return steps_; }
  // The decode order: position i of a decoded sequence places group order()[i].
  const std::vector<GroupId>& order() const { return order_; }

 protected:
  Seq2SeqLearner(SearchSpace space, const PlacementProblem& problem, const Seq2SeqPolicyOptions& policy,
                 std::size_t batch_size, nn::AdamOptions adam, const std::string& owner, uint64_t seed);
  // For a subclass that decodes `decoded_groups` groups of its own, whose inputs (input_rows ×
  // decoded_groups per placement) it writes into inputs_ in prepare_batch().
  Seq2SeqLearner(SearchSpace space, std::size_t decoded_groups, nn::Index input_rows, const Seq2SeqPolicyOptions& policy,
                 std::size_t batch_size, nn::AdamOptions adam, const std::string& owner, uint64_t seed);
  // Adds a subclass's parameters to those Adam, clipping and the saved state cover (before any
  // update or load).
  void add_trainable(nn::ParamSet<float>& more);
  // Called when a new batch starts, before the policy samples it.
  virtual void prepare_batch() {}
  // The search-space placement of the batch's placement n, from its decoded choices.
  virtual Placement to_placement(std::span<const uint16_t> choice, std::size_t n) const;
  // After the policy's backward pass in a policy-gradient update with these per-placement weights
  // (of Σ_n w_n log p(placement n)): a subclass adds its own modules' gradients.
  virtual void backward_extra(std::span<const double> /*weights*/) {}
  // Called when the batch's batch_size placements are all observed (times in seconds; oom flags).
  virtual void update() = 0;
  // The subclass's state as JSON text, and its inverse (InputError on a mismatch).
  virtual std::string save_extra() const = 0;
  virtual void load_extra(const std::string& json) = 0;
  // Makes the policy's activations those of the pending batch at the current weights (a teacher-
  // forced forward pass when something else ran since).
  void forward_batch();
  // Clips the gradients, takes an Adam step, and marks the activations stale.
  void descend(double learning_rate, double grad_clip);
  // Gradient of Σ_n w_n log p(placement n) with respect to the logits (for the batch's choices).
  void log_prob_gradient(std::span<const double> weights, nn::Matrix<float>& dlogits) const;
  // Samples at the start of the pending batch.
  int64_t batch_start() const { return samples_seen_ - static_cast<int64_t>(observed_); }

  SearchSpace space_;
  Seq2SeqPolicyOptions policy_options_;
  std::size_t steps_;                         // decoded groups per placement
  std::vector<GroupId> order_;
  // features × groups in decode order (empty for names), or × groups·batch (column s·B + n) when
  // each placement has inputs of its own
  nn::Matrix<float> inputs_;
  Rng rng_;
  std::unique_ptr<PlacerPolicy<float>> policy_;
  std::function<bool()> stop_check_;  // the policy holds a pointer to it
  // Throws LearnerStopped when the stop check says so: between an update's steps.
  void check_stop() const {
    if (stop_check_ && stop_check_()) throw LearnerStopped();
  }
  nn::ParamSet<float> params_;                // the policy's, then add_trainable's
  nn::AdamOptions adam_options_;
  nn::Adam<float> adam_;
  std::size_t batch_size_;
  int64_t budget_ = 0;
  int64_t samples_seen_ = 0;
  // The pending batch: its decoded choices (placement-major, decode order), the logit noise, how
  // many were handed out and observed, and the measurements.
  std::vector<uint16_t> choices_;
  nn::Matrix<float> noise_;
  std::size_t handed_out_ = 0, observed_ = 0;
  std::size_t last_propose_start_ = 0;  // handed_out_ when the last propose began
  std::vector<double> times_;
  std::vector<uint8_t> oom_;
  mutable bool activations_current_ = false;  // the policy's activations are the pending batch's

 private:
  void make_policy(nn::Index input_rows);
  void adopt_policy();  // its parameters into params_, Adam over them
};

class GrlLearner : public Seq2SeqLearner {
 public:
  GrlLearner(SearchSpace space, const PlacementProblem& problem, GrlOptions options, uint64_t seed);
  std::string name() const override { return "grl"; }
  double baseline() const { return baseline_; }
  // The learning rate an update at `samples` uses (the Hierarchical Planner's staircase decay).
  double learning_rate_at(int64_t samples) const;

 protected:
  // For the Hierarchical Planner (hierarchical.h): the same algorithm over learned groups.
  GrlLearner(SearchSpace space, std::size_t decoded_groups, nn::Index input_rows, GrlOptions options,
             const std::string& owner, uint64_t seed);
  void update() override;
  std::string save_extra() const override;
  void load_extra(const std::string& json) override;

 private:
  GrlOptions options_;
  double baseline_;
};

class SpotlightLearner final : public Seq2SeqLearner {
 public:
  SpotlightLearner(SearchSpace space, const PlacementProblem& problem, SpotlightOptions options, uint64_t seed);
  std::string name() const override { return "spotlight"; }
  // R̄: the mean step time of every placement observed before the current batch (OOM counted at
  // oom_time_s); none before the first batch ends.
  std::optional<double> mean_time() const;
  // The last update's objective (Eq. 15, averaged over stages and placements) at each of its
  // gradient steps, before the step.
  const std::vector<double>& last_objectives() const { return objectives_; }

 private:
  void update() override;
  double objective(const nn::Matrix<float>& old_probs, std::span<const double> advantages,
                   nn::Matrix<float>* dlogits) const;
  std::string save_extra() const override;
  void load_extra(const std::string& json) override;
  SpotlightOptions options_;
  double time_sum_ = 0;
  int64_t time_count_ = 0;
  std::vector<double> objectives_;
};

}  // namespace placelab
