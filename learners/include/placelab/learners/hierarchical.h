// The Hierarchical Planner (Mirhoseini et al., ICLR 2018): a feed-forward grouper (grouper.h)
// puts the scenario's units into learned groups, the seq2seq placer (seq2seq.h) places those
// groups, and both learn together by REINFORCE with one advantage — grl's algorithm (√T reward,
// moving-average baseline from the failing signal, feasible-only updates, Adam, clipping) over
// both networks' parameters. Each placement of a batch has its own grouping, so the placer reads
// per-placement inputs. Where the public code departs from the paper (NOTES.md), the paper is the
// default and the code's form an option (docs/learners.md).
//
//   PlacementProblem units = describe_problem(graph, make_grouping(graph, "colocation"));
//   HierarchicalLearner hp(SearchSpace{units.num_groups, devices}, units, HierarchicalOptions{}, 1);
#pragma once

#include <string>
#include <vector>

#include "placelab/learners/learned_groups.h"
#include "placelab/learners/seq2seq_learners.h"

namespace placelab {

struct HierarchicalOptions : GrlOptions, LearnedGrouperFields {
  // The Hierarchical Planner code's settings where they are the learner's own: one placement per
  // update, groups decoded in id order, groups = 0 (min(256, 20 × devices), the HP code's). grl's
  // other settings (and its departures from that code: docs/learners.md) stand.
  HierarchicalOptions();
  void validate() const;
  // The learned-group count for `devices` devices.
  std::size_t group_count(std::size_t devices) const;
};

class HierarchicalLearner final : public GrlLearner {
 public:
  // `units`: the problem over the scenario's groups, which the grouper assigns to learned groups.
  HierarchicalLearner(SearchSpace space, const PlacementProblem& units, HierarchicalOptions options, uint64_t seed);
  std::string name() const override { return "hierarchical"; }
  // The most probable grouping, then the most probable placement of its groups.
  Placement mode() const override;
  std::span<const uint32_t> proposed_grouping(std::size_t i) const override {
    return groups_.groupings().at(last_propose_start_ + i);
  }

  const FeedForwardGrouper<float>& grouper() const { return groups_.grouper(); }
  // The grouping (unit → learned group) of the pending batch's placement n.
  const std::vector<GroupId>& batch_grouping(std::size_t n) const { return groups_.groupings().at(n); }

 private:
  void prepare_batch() override;
  Placement to_placement(std::span<const uint16_t> choice, std::size_t n) const override;
  void backward_extra(std::span<const double> weights) override;
  std::string save_extra() const override;
  void load_extra(const std::string& json) override;

  HierarchicalOptions options_;
  LearnedGroups groups_;
};

}  // namespace placelab
