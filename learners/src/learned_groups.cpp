#include "placelab/learners/learned_groups.h"

#include <algorithm>
#include <numeric>

#include "placelab/core/error.h"
#include "placelab/learners/seq2seq_learners.h"
#include "require.h"

namespace placelab {

void LearnedGrouperFields::validate_grouper(const std::string& o, const std::string& inputs,
                                            const char* zero_groups) const {
  using detail::require;
  std::string rule = "must be ";
  if (zero_groups) ((rule += "0 (") += zero_groups) += ") or ";
  ((rule += "in [2, ") += std::to_string(kMaxSeq2SeqGroups)) += "]";
  require((zero_groups && groups == 0) || (groups >= 2 && groups <= static_cast<int>(kMaxSeq2SeqGroups)), o, "groups",
          std::to_string(groups), rule);
  require(grouper_hidden >= 1 && grouper_hidden <= 4096, o, "grouper_hidden", std::to_string(grouper_hidden),
          "must be in [1, 4096]");
  require(grouper_activation == "relu" || grouper_activation == "tanh" || grouper_activation == "none", o,
          "grouper_activation", grouper_activation, "must be one of relu, tanh, none");
  require(inputs == "features", o, "inputs", inputs, "must be features (learned groups have no names)");
}

GrouperOptions LearnedGrouperFields::grouper(std::size_t groups_now) const {
  GrouperOptions g;
  g.groups = groups_now;
  g.hidden = grouper_hidden;
  g.activation = grouper_activation_from_string(grouper_activation);
  return g;
}

SearchSpace LearnedGroups::checked_space(const SearchSpace& space, const PlacementProblem& units, const std::string& owner) {
  space.validate();
  if (units.num_groups != space.num_groups)
    throw InputError(owner + ": the problem has " + std::to_string(units.num_groups) +
                     " units: must equal the search space's " + std::to_string(space.num_groups) + " groups");
  return space;
}

LearnedGroups::LearnedGroups(const PlacementProblem& units, const GrouperOptions& options, bool topological, Rng& rng)
    : units_(units), unit_features_(unit_feature_matrix<float>(units_)), topological_(topological) {
  grouper_ = std::make_unique<FeedForwardGrouper<float>>(options, unit_features_.rows(), rng);
}

void LearnedGroups::forward() const {
  if (current_) return;
  grouper_->forward(unit_features_);
  current_ = true;
}

nn::Matrix<float> LearnedGroups::inputs_of(std::span<const GroupId> grouping, std::vector<GroupId>& order) const {
  const std::size_t G = num_groups();
  const PlacementProblem groups = merge_units(units_, grouping, G);
  if (topological_) order = groups.topological_order;
  else {
    order.resize(G);
    std::iota(order.begin(), order.end(), GroupId{0});
  }
  return group_feature_matrix<float>(groups, order);
}

void LearnedGroups::write_inputs(nn::Matrix<float>& inputs) {
  const std::size_t batch = groupings_.size();
  const auto B = static_cast<nn::Index>(batch), S = static_cast<nn::Index>(num_groups());
  orders_.resize(batch);
  inputs.resize(input_rows(), S * B);
  for (std::size_t n = 0; n < batch; ++n) {
    const nn::Matrix<float> f = inputs_of(groupings_[n], orders_[n]);
    for (nn::Index s = 0; s < S; ++s) inputs.col(s * B + static_cast<nn::Index>(n)) = f.col(s);
  }
}

void LearnedGroups::sample(std::size_t batch, Rng& rng, nn::Matrix<float>& inputs) {
  forward();
  groupings_.resize(batch);
  for (std::vector<GroupId>& g : groupings_) grouper_->sample(rng, g);
  write_inputs(inputs);
}

void LearnedGroups::set(std::vector<std::vector<GroupId>> groupings, nn::Matrix<float>& inputs) {
  const std::size_t U = num_units(), G = num_groups();
  for (const std::vector<GroupId>& g : groupings)
    if (g.size() != U || std::any_of(g.begin(), g.end(), [&](GroupId x) { return x >= G; }))
      throw InputError("learner state: groupings: each must put " + std::to_string(U) + " units into " +
                       std::to_string(G) + " groups");
  groupings_ = std::move(groupings);
  write_inputs(inputs);
}

Placement LearnedGroups::place(std::span<const GroupId> grouping, std::span<const GroupId> order,
                               std::span<const uint16_t> choice, std::size_t groups, std::span<const DeviceId> devices) {
  std::vector<DeviceId> group_device(groups);
  for (std::size_t i = 0; i < choice.size(); ++i) group_device[order[i]] = devices[choice[i]];
  Placement p(grouping.size());
  for (std::size_t u = 0; u < p.size(); ++u) p[u] = group_device[grouping[u]];
  return p;
}

Placement LearnedGroups::placement(std::span<const uint16_t> choice, std::size_t n, std::span<const DeviceId> devices) const {
  return place(groupings_.at(n), orders_.at(n), choice, num_groups(), devices);
}

std::vector<GroupId> LearnedGroups::greedy(nn::Matrix<float>& inputs, std::vector<GroupId>& order) const {
  forward();
  std::vector<GroupId> grouping;
  grouper_->greedy(grouping);
  inputs = inputs_of(grouping, order);
  return grouping;
}

Placement LearnedGroups::mode(PlacerPolicy<float>& placer, std::span<const DeviceId> devices) const {
  nn::Matrix<float> inputs, no_noise;
  std::vector<GroupId> order;
  const std::vector<GroupId> grouping = greedy(inputs, order);
  std::vector<uint16_t> choice;
  placer.forward(inputs, 1, DecodeMode::kGreedy, choice, no_noise);
  return place(grouping, order, choice, num_groups(), devices);
}

}  // namespace placelab
