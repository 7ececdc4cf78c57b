// What the learned-grouping placers (hierarchical.h, eagle.h) share: the scenario's units with their
// features, the feed-forward grouper over them, the groupings of an update's placements, and the
// placer's inputs and decode orders made from those groupings. A learner owns one and routes its
// Seq2SeqLearner hooks (prepare_batch, to_placement, mode, state) through it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "placelab/graph/placement.h"
#include "placelab/learners/grouper.h"
#include "placelab/learners/learner.h"
#include "placelab/learners/seq2seq.h"

namespace placelab {

// The grouper's options as the learned-grouping learners take them (hierarchical, eagle): one
// definition of the fields, of their check and of their translation into GrouperOptions.
struct LearnedGrouperFields {
  int groups = 256;                         // learned groups (EAGLE's 256)
  int grouper_hidden = 64;                  // both papers
  std::string grouper_activation = "relu";  // relu | tanh | none (papers silent; the HP code: none)
  // InputError naming owner.field. `zero_groups` admits groups = 0 and says what it stands for.
  void validate_grouper(const std::string& owner, const std::string& inputs, const char* zero_groups = nullptr) const;
  // The grouper of `groups_now` groups (groups, or what 0 stands for) with these fields.
  GrouperOptions grouper(std::size_t groups_now) const;
};

class LearnedGroups {
 public:
  // Checks a learned-grouping learner's search space against its units (InputError naming `owner`).
  static SearchSpace checked_space(const SearchSpace& space, const PlacementProblem& units, const std::string& owner);
  // `topological`: decode each grouping's groups in their order of first readiness; else in id order.
  LearnedGroups(const PlacementProblem& units, const GrouperOptions& options, bool topological, Rng& rng);

  std::size_t num_units() const { return units_.num_groups; }
  std::size_t num_groups() const { return grouper_->num_groups(); }
  // Rows of the placer's input per group.
  nn::Index input_rows() const { return group_feature_size(num_groups(), units_.op_types.size()); }
  FeedForwardGrouper<float>& grouper() { return *grouper_; }
  const FeedForwardGrouper<float>& grouper() const { return *grouper_; }
  const nn::Matrix<float>& unit_features() const { return unit_features_; }

  // The grouper's forward pass over every unit, unless it is current; stale() after its weights change.
  void forward() const;
  void stale() { current_ = false; }

  // Draws one grouping per placement of a batch (after forward()) and writes the placer's inputs:
  // input_rows() × num_groups()·batch, column s·batch + n.
  void sample(std::size_t batch, Rng& rng, nn::Matrix<float>& inputs);
  // The same from given groupings (a resumed batch); InputError when they do not fit.
  void set(std::vector<std::vector<GroupId>> groupings, nn::Matrix<float>& inputs);
  const std::vector<std::vector<GroupId>>& groupings() const { return groupings_; }
  void clear() { groupings_.clear(), orders_.clear(); }

  // The search-space placement of units for placement n's decoded device choices (decode order).
  Placement placement(std::span<const uint16_t> choice, std::size_t n, std::span<const DeviceId> devices) const;
  // The most probable grouping, its inputs (input_rows() × num_groups()) and decode order.
  std::vector<GroupId> greedy(nn::Matrix<float>& inputs, std::vector<GroupId>& order) const;
  // The most probable placement: the greedy grouping, then `placer`'s greedy decode of its groups.
  Placement mode(PlacerPolicy<float>& placer, std::span<const DeviceId> devices) const;
  // The units' placement for a grouping, its decode order and the decoded device choices.
  static Placement place(std::span<const GroupId> grouping, std::span<const GroupId> order,
                         std::span<const uint16_t> choice, std::size_t groups, std::span<const DeviceId> devices);

 private:
  nn::Matrix<float> inputs_of(std::span<const GroupId> grouping, std::vector<GroupId>& order) const;
  void write_inputs(nn::Matrix<float>& inputs);

  PlacementProblem units_;
  nn::Matrix<float> unit_features_;
  std::unique_ptr<FeedForwardGrouper<float>> grouper_;
  bool topological_;
  mutable bool current_ = false;
  std::vector<std::vector<GroupId>> groupings_, orders_;
};

}  // namespace placelab
