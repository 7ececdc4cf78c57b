// The learned groupers of the Hierarchical Planner (Mirhoseini et al., ICLR 2018) and EAGLE (Lan et
// al. 2021): a feed-forward network reads each unit's features and gives a softmax over G groups;
// a grouping is one draw per unit. The units are the groups of the scenario's grouping — ops with
// `grouping: op`, TensorFlow's colocation sets with `colocation` — so a learned grouping never
// splits what the scenario keeps together. The placer then sees the learned groups through
// merge_units, in the same feature layout as fixed groups (problem.h).
//
//   FeedForwardGrouper<float> grouper(GrouperOptions{}, unit_feature_size(units), rng);
//   nn::Matrix<float> X = unit_feature_matrix<float>(units);
//   grouper.forward(X);
//   std::vector<GroupId> assignment;
//   double log_p = grouper.sample(rng, assignment);
//   PlacementProblem groups = merge_units(units, assignment, grouper.num_groups());
#pragma once

#include <span>
#include <string>
#include <vector>

#include "placelab/learners/grouping.h"
#include "placelab/learners/nn/layers.h"
#include "placelab/learners/problem.h"
#include "placelab/learners/random.h"

namespace placelab {

// Neighbours per unit in its features (the Hierarchical Planner's code keeps 10).
inline constexpr int kNeighbourSlots = 10;

// A grouper's input: one column per unit (a group of `units`), F = T + kShapeSlots + 3 + 1 +
// 2·kNeighbourSlots rows:
//   [0, T)          op-type counts        } each column's [0, T+5) divided by (its max + 1), as
//   [T, T+5)        summed output shapes  } the Hierarchical Planner's code scales its features
//   [T+5, T+8)      log(1 + FLOPs), log(1 + output bytes), log(1 + persistent bytes), each divided
//                   by its largest value over the units
//   [T+8]           the unit's position in `units.topological_order`, divided by the unit count
//   [T+9, +20)      up to kNeighbourSlots neighbours (units joined by a data edge, either way),
//                   nearest in that order first: (position / units, +1 consumer or −1 producer)
//                   pairs, zero padded — the Hierarchical Planner's adjacency slots.
template <typename T>
nn::Matrix<T> unit_feature_matrix(const PlacementProblem& units);
nn::Index unit_feature_size(const PlacementProblem& units);

// The problem whose groups are `groups` learned groups made of `units`' groups by `assignment`
// (assignment[u] = the learned group of unit u, < groups): type counts, shapes, FLOPs, bytes and
// sizes summed; edges between distinct learned groups with their op-edge counts and bytes; the
// order of first readiness; names "g<k>" (an empty group has size 0 and zero features). Linear in
// units + unit edges + groups²; op_types is copied from `units`, the op-level fields are left empty
// (the placer reads only groups; merge_units runs once per sampled placement).
PlacementProblem merge_units(const PlacementProblem& units, std::span<const GroupId> assignment, std::size_t groups);

// The same learned grouping as a Grouping of the graph's ops, for evaluation and reports:
// op v goes to assignment[its unit]; empty learned groups drop out and the rest are renumbered as
// Grouping does (by each group's smallest op).
Grouping compose_grouping(const Grouping& units, std::span<const GroupId> assignment);

// Between the grouper's two matrices. The papers say "feed-forward" and give no activation; the
// Hierarchical Planner's code has none (a linear map before the softmax).
enum class GrouperActivation { kRelu, kTanh, kNone };
std::string to_string(GrouperActivation a);
GrouperActivation grouper_activation_from_string(const std::string& name);  // InputError otherwise

struct GrouperOptions {
  std::size_t groups = 256;  // EAGLE: 256; the Hierarchical Planner's code: min(256, 20·devices)
  nn::Index hidden = 64;     // both papers
  GrouperActivation activation = GrouperActivation::kRelu;
  // Throws InputError naming the field: groups in [1, 65535], hidden in [1, 4096].
  void validate() const;
};

// logits = W₂ act(W₁ x + b₁) + b₂ per unit; p(group | unit) = softmax of its column. One forward
// pass serves every grouping drawn until the weights change; backward takes the policy-gradient
// coefficients of the drawn groupings directly (no G × units one-hot matrices).
template <typename T>
class FeedForwardGrouper {
 public:
  FeedForwardGrouper(const GrouperOptions& options, nn::Index features, Rng& rng);
  FeedForwardGrouper(const FeedForwardGrouper&) = delete;  // the ParamSet points into the layers
  FeedForwardGrouper& operator=(const FeedForwardGrouper&) = delete;

  const GrouperOptions& options() const { return options_; }
  std::size_t num_groups() const { return options_.groups; }
  nn::ParamSet<T>& params() { return params_; }
  const nn::ParamSet<T>& params() const { return params_; }

  // Logits, log-probabilities and probabilities of every unit (columns of X).
  void forward(const nn::In<T>& X);
  const nn::Matrix<T>& log_probs() const { return log_probs_; }  // groups × units
  nn::Index num_units() const { return log_probs_.cols(); }

  // Draws a grouping (one group per unit, from the last forward) and returns its log-probability.
  double sample(Rng& rng, std::vector<GroupId>& assignment) const;
  // Each unit's most probable group.
  void greedy(std::vector<GroupId>& assignment) const;
  // The log-probability of a given grouping under the last forward.
  double log_prob(std::span<const GroupId> assignment) const;
  // Mean over units of each unit's softmax entropy (nats), for entropy bonuses.
  double mean_entropy() const;

  // Adds to the gradients of L = Σ_k coefficient[k] · log p(assignments[k]) + entropy_weight ·
  // mean_entropy(), for X of the last forward. The Hierarchical Planner's REINFORCE is one
  // assignment with coefficient −(R − b); EAGLE's PPO passes its clipped ratios' weights.
  void backward(const nn::In<T>& X, std::span<const std::vector<GroupId>> assignments,
                std::span<const double> coefficients, double entropy_weight = 0.0);
  // The same with a coefficient per grouping and unit (unit_coefficients[k][u]): EAGLE's PPO, whose
  // clipped ratios differ from unit to unit.
  void backward(const nn::In<T>& X, std::span<const std::vector<GroupId>> assignments,
                std::span<const std::vector<double>> unit_coefficients, double entropy_weight);

 private:
  void activate(nn::Out<T> Z) const;
  // Both backward passes: coefficient(k, u) of grouping k at unit u, total(u) = Σ_k coefficient(k, u).
  template <typename Coefficient, typename Total>
  void backward_impl(const nn::In<T>& X, std::span<const std::vector<GroupId>> assignments,
                     const Coefficient& coefficient, const Total& total, double entropy_weight);

  GrouperOptions options_;
  nn::Linear<T> hidden_, output_;
  nn::ParamSet<T> params_;
  nn::Matrix<T> act_, log_probs_, probs_;  // hidden activations, and the softmax, of every unit
  nn::Matrix<T> dlogits_, dact_;            // one block's gradients
  nn::Vector<T> ones_;
};

}  // namespace placelab
