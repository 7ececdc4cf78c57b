// EAGLE (Lan, Chen, Li: "EAGLE: Expediting Device Placement with Automatic Grouping for Large
// Models"): the Hierarchical Planner's learned grouping (learned_groups.h) with EAGLE's placer —
// a bidirectional LSTM encoder, attention applied before the decoder LSTM — trained by PPO-clip
// (ε = 0.3, entropy 0.01, 10 placements per minibatch, 4 updates per minibatch, Adam 0.01, norm
// clip 1.0, reward −√t against an exponential moving average); `eagle_ce` adds a cross-entropy
// update every 50 placements toward the 5 best placements found so far.
//
//   EagleLearner eagle(SearchSpace{units.num_groups, devices}, units, EagleOptions{}, /*seed=*/1);
#pragma once

#include <string>
#include <vector>

#include "placelab/learners/learned_groups.h"
#include "placelab/learners/seq2seq_learners.h"

namespace placelab {

struct EagleOptions : Seq2SeqPolicyOptions, LearnedGrouperFields {
  // EAGLE §IV.C: hidden 512, bidirectional encoder, attention before the decoder; decode order and
  // the rest of the policy as the Hierarchical Planner's code (EAGLE re-implemented it). 256
  // groups, a grouper of 64 hidden units (LearnedGrouperFields' defaults).
  EagleOptions();
  int samples_per_update = 10;   // placements per PPO minibatch
  int ppo_epochs = 4;            // updates per minibatch
  double clip = 0.3;             // ε of the clipped ratio
  double entropy = 0.01;         // coefficient of the mean per-decision entropy
  double learning_rate = 0.01;   // Adam
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  double grad_clip = 1.0;
  double baseline_decay = 0.9;   // B ← decay·B + (1−decay)·R per placement (decay not stated: ours)
  double failing_signal = 10.0;  // an OOM placement's −R (√100 s, as grl)
  int ce_every = 0;              // eagle_ce: a cross-entropy update every this many placements; 0 = none
  int elites = 5;                // the best placements so far that it moves toward
  int ce_steps = 4;              // Adam steps per cross-entropy update (not stated: as PPO's 4)
  void validate(const std::string& owner = "eagle") const;
};

class EagleLearner final : public Seq2SeqLearner {
 public:
  // `name`: "eagle", or "eagle_ce" for the registry's cross-entropy variant (ce_every > 0).
  EagleLearner(SearchSpace space, const PlacementProblem& units, EagleOptions options, uint64_t seed,
               std::string name = "eagle");
  std::string name() const override { return name_; }
  Placement mode() const override;
  std::span<const uint32_t> proposed_grouping(std::size_t i) const override {
    return groups_.groupings().at(last_propose_start_ + i);
  }

  const FeedForwardGrouper<float>& grouper() const { return groups_.grouper(); }
  const std::vector<GroupId>& batch_grouping(std::size_t n) const { return groups_.groupings().at(n); }
  double baseline() const { return baseline_; }
  // The clipped surrogate (mean over decisions, entropy included) before each of the last update's steps.
  const std::vector<double>& last_objectives() const { return objectives_; }

 private:
  struct Elite {
    double time_s;
    std::vector<GroupId> grouping;
    std::vector<uint16_t> choice;  // decode order
  };
  void prepare_batch() override;
  Placement to_placement(std::span<const uint16_t> choice, std::size_t n) const override;
  void update() override;
  std::string save_extra() const override;
  void load_extra(const std::string& json) override;
  // One PPO step's gradients (both networks) for advantages `A`; returns the surrogate objective.
  double ppo_gradients(const nn::Matrix<float>& old_probs, const std::vector<std::vector<float>>& old_unit_logp,
                       std::span<const double> A);
  void remember_elites();
  void cross_entropy_update();

  std::string name_;
  EagleOptions options_;
  LearnedGroups groups_;
  double baseline_ = 0;
  bool has_baseline_ = false;
  std::vector<Elite> elites_;  // best first
  std::vector<double> objectives_;
};

}  // namespace placelab
