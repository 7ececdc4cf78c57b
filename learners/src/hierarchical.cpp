#include "placelab/learners/hierarchical.h"

#include <algorithm>
#include <numeric>

#include "placelab/graph/error.h"
#include "registry_entries.h"
#include "require.h"
#include "seq2seq_options.h"
#include "state_json.h"

namespace placelab {

HierarchicalOptions::HierarchicalOptions() {
  samples_per_update = 1;
  order = "id";
}

void HierarchicalOptions::validate() const {
  const std::string o = "hierarchical";
  GrlOptions::validate(o);
  using detail::require;
  require(groups == 0 || (groups >= 2 && groups <= static_cast<int>(kMaxSeq2SeqGroups)), o, "groups",
          std::to_string(groups), "must be 0 (min(256, 20 x devices)) or in [2, " + std::to_string(kMaxSeq2SeqGroups) + "]");
  require(grouper_hidden >= 1 && grouper_hidden <= 4096, o, "grouper_hidden", std::to_string(grouper_hidden),
          "must be in [1, 4096]");
  require(grouper_activation == "relu" || grouper_activation == "tanh" || grouper_activation == "none", o,
          "grouper_activation", grouper_activation, "must be one of relu, tanh, none");
  require(inputs == "features", o, "inputs", inputs, "must be features (learned groups have no names)");
}

std::size_t HierarchicalOptions::group_count(std::size_t devices) const {
  return groups > 0 ? static_cast<std::size_t>(groups) : std::min<std::size_t>(256, 20 * devices);
}

namespace {

const HierarchicalOptions& validated(const HierarchicalOptions& o) {
  o.validate();
  return o;
}

SearchSpace checked_units(const SearchSpace& space, const PlacementProblem& units) {
  space.validate();
  if (units.num_groups != space.num_groups)
    throw InputError("hierarchical: the problem has " + std::to_string(units.num_groups) +
                     " units: must equal the search space's " + std::to_string(space.num_groups) + " groups");
  return space;
}

}  // namespace

HierarchicalLearner::HierarchicalLearner(SearchSpace space, const PlacementProblem& units, HierarchicalOptions options,
                                         uint64_t seed)
    // `space` is read by several arguments here (whose order is unspecified): none moves it.
    : GrlLearner(checked_units(space, units), validated(options).group_count(space.devices.size()),
                 group_feature_size(options.group_count(space.devices.size()), units.op_types.size()), options,
                 "hierarchical", seed),
      options_(std::move(options)),
      units_(units),
      unit_features_(unit_feature_matrix<float>(units_)) {
  GrouperOptions g;
  g.groups = decoded_groups();
  g.hidden = options_.grouper_hidden;
  g.activation = grouper_activation_from_string(options_.grouper_activation);
  grouper_ = std::make_unique<FeedForwardGrouper<float>>(g, unit_features_.rows(), rng_);
  add_trainable(grouper_->params());
}

void HierarchicalLearner::forward_grouper() const {
  if (grouper_current_) return;
  grouper_->forward(unit_features_);
  grouper_current_ = true;
}

nn::Matrix<float> HierarchicalLearner::group_inputs(std::span<const GroupId> grouping, std::vector<GroupId>& order) const {
  const PlacementProblem groups = merge_units(units_, grouping, steps_);
  if (options_.order == "topological") order = groups.topological_order;
  else {
    order.resize(steps_);
    std::iota(order.begin(), order.end(), GroupId{0});
  }
  return group_feature_matrix<float>(groups, order);
}

void HierarchicalLearner::set_batch_inputs() {
  const auto B = static_cast<nn::Index>(batch_size_), S = static_cast<nn::Index>(steps_);
  orders_.resize(batch_size_);
  for (std::size_t n = 0; n < batch_size_; ++n) {
    const nn::Matrix<float> f = group_inputs(groupings_[n], orders_[n]);
    if (n == 0) inputs_.resize(f.rows(), S * B);
    for (nn::Index s = 0; s < S; ++s) inputs_.col(s * B + static_cast<nn::Index>(n)) = f.col(s);
  }
}

void HierarchicalLearner::prepare_batch() {
  forward_grouper();
  groupings_.resize(batch_size_);
  for (std::vector<GroupId>& g : groupings_) grouper_->sample(rng_, g);
  set_batch_inputs();
}

Placement HierarchicalLearner::to_placement(std::span<const uint16_t> choice, std::size_t n) const {
  const std::vector<GroupId>& grouping = groupings_.at(n);
  const std::vector<GroupId>& order = orders_.at(n);
  std::vector<DeviceId> group_device(steps_);
  for (std::size_t i = 0; i < choice.size(); ++i) group_device[order[i]] = space_.devices[choice[i]];
  Placement p(space_.num_groups);
  for (std::size_t u = 0; u < p.size(); ++u) p[u] = group_device[grouping[u]];
  return p;
}

std::vector<GroupId> HierarchicalLearner::mode_grouping() const {
  forward_grouper();
  std::vector<GroupId> grouping;
  grouper_->greedy(grouping);
  return grouping;
}

Placement HierarchicalLearner::mode() const {
  const std::vector<GroupId> grouping = mode_grouping();
  std::vector<GroupId> order;
  const nn::Matrix<float> inputs = group_inputs(grouping, order);
  std::vector<uint16_t> choice;
  nn::Matrix<float> no_noise;
  policy_->forward(inputs, 1, DecodeMode::kGreedy, choice, no_noise);
  activations_current_ = false;
  std::vector<DeviceId> group_device(steps_);
  for (std::size_t i = 0; i < choice.size(); ++i) group_device[order[i]] = space_.devices[choice[i]];
  Placement p(space_.num_groups);
  for (std::size_t u = 0; u < p.size(); ++u) p[u] = group_device[grouping[u]];
  return p;
}

void HierarchicalLearner::backward_extra(std::span<const double> weights) {
  // The grouper's term of the same REINFORCE loss, Σ_n w_n log p(grouping n): one advantage for
  // both networks, as the paper and its code train them.
  forward_grouper();
  grouper_->backward(unit_features_, groupings_, weights);
  grouper_current_ = false;  // the Adam step that follows changes its weights
}

std::string HierarchicalLearner::save_extra() const {
  nlohmann::json e = nlohmann::json::parse(GrlLearner::save_extra());
  // The pending batch's groupings (its placements were drawn from them); none between updates.
  e["groupings"] = handed_out_ > 0 ? groupings_ : std::vector<std::vector<GroupId>>{};
  return e.dump();
}

void HierarchicalLearner::load_extra(const std::string& json) {
  GrlLearner::load_extra(json);
  try {
    groupings_ = nlohmann::json::parse(json).at("groupings").get<std::vector<std::vector<GroupId>>>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("learner state: hierarchical: ") + e.what());
  }
  grouper_current_ = false;
  if (handed_out_ == 0) {
    groupings_.clear();
    return;
  }
  const bool ok = groupings_.size() == batch_size_ && std::all_of(groupings_.begin(), groupings_.end(), [&](const auto& g) {
                    return g.size() == space_.num_groups &&
                           std::all_of(g.begin(), g.end(), [&](GroupId x) { return x < steps_; });
                  });
  if (!ok)
    throw InputError("learner state: hierarchical: groupings: must be " + std::to_string(batch_size_) +
                     " groupings of " + std::to_string(space_.num_groups) + " units into " + std::to_string(steps_) +
                     " groups");
  set_batch_inputs();
}

// ---- Registry entry ----------------------------------------------------------------------------

namespace {

const detail::OptionTable<HierarchicalOptions>& hierarchical_options() {
  using O = HierarchicalOptions;
  static const detail::OptionTable<O> kTable(
      "hierarchical",
      detail::with_policy<O>([] {
        std::vector<detail::OptionTable<O>::Field> own = {
            {"groups", &O::groups, "0 or in [2, 4096]", "learned groups; 0 = min(256, 20 x devices), the HP code's"},
            {"grouper_hidden", &O::grouper_hidden, "in [1, 4096]", "hidden units of the feed-forward grouper"},
            {"grouper_activation", &O::grouper_activation, "",
             "between the grouper's two layers; the papers name none, the HP code has none",
             {"relu", "tanh", "none"}},
        };
        auto grl = detail::grl_fields<O>();
        own.insert(own.end(), grl.begin(), grl.end());
        return own;
      }()));
  return kTable;
}

}  // namespace

LearnerEntry detail::hierarchical_learner_entry() {
  return {.name = "hierarchical",
          .aliases = {"hp"},
          .summary = "learned grouping and placement: a feed-forward grouper puts the scenario's units into groups, "
                     "a seq2seq LSTM places them; both trained by REINFORCE with one advantage (grl's algorithm)",
          .paper = "Mirhoseini et al., ICLR 2018 (Hierarchical Planner); unstated settings from its public code",
          .options = hierarchical_options().infos(),
          .policy_gradient = false,
          .needs_problem = true,
          .validate = [](const OptionValues& v) { hierarchical_options().build(v); },
          .make = [](const OptionValues& v, const LearnerContext& c) -> std::unique_ptr<Learner> {
            return std::make_unique<HierarchicalLearner>(c.space, *c.problem, hierarchical_options().build(v), c.seed);
          }};
}

}  // namespace placelab
