#include "placelab/learners/hierarchical.h"

#include <algorithm>

#include "placelab/core/error.h"
#include "registry_entries.h"
#include "require.h"
#include "seq2seq_options.h"
#include "state_json.h"

namespace placelab {

HierarchicalOptions::HierarchicalOptions() {
  samples_per_update = 1;
  order = "id";
  groups = 0;
}

void HierarchicalOptions::validate() const {
  GrlOptions::validate("hierarchical");
  validate_grouper("hierarchical", inputs, "min(256, 20 x devices)");
}

std::size_t HierarchicalOptions::group_count(std::size_t devices) const {
  return groups > 0 ? static_cast<std::size_t>(groups) : std::min<std::size_t>(256, 20 * devices);
}

HierarchicalLearner::HierarchicalLearner(SearchSpace space, const PlacementProblem& units, HierarchicalOptions options,
                                         uint64_t seed)
    // `space` is read by several arguments here (whose order is unspecified): none moves it.
    : GrlLearner(LearnedGroups::checked_space(space, units, "hierarchical"), detail::validated(options).group_count(space.devices.size()),
                 group_feature_size(options.group_count(space.devices.size()), units.op_types.size()), options,
                 "hierarchical", seed),
      options_(std::move(options)),
      groups_(units, options_.grouper(decoded_groups()), options_.order == "topological", rng_) {
  add_trainable(groups_.grouper().params());
}

void HierarchicalLearner::prepare_batch() { groups_.sample(batch_size_, rng_, inputs_); }

Placement HierarchicalLearner::to_placement(std::span<const uint16_t> choice, std::size_t n) const {
  return groups_.placement(choice, n, space_.devices);
}

Placement HierarchicalLearner::mode() const {
  activations_current_ = false;  // the greedy pass replaces the batch's activations
  return groups_.mode(*policy_, space_.devices);
}

void HierarchicalLearner::backward_extra(std::span<const double> weights) {
  // The grouper's term of the same REINFORCE loss, Σ_n w_n log p(grouping n): one advantage for
  // both networks, as the paper and its code train them.
  groups_.forward();
  groups_.grouper().backward(groups_.unit_features(), groups_.groupings(), weights);
  groups_.stale();  // the Adam step that follows changes its weights
}

std::string HierarchicalLearner::save_extra() const {
  nlohmann::json e = nlohmann::json::parse(GrlLearner::save_extra());
  // The pending batch's groupings (its placements were drawn from them); none between updates.
  e["groupings"] = handed_out_ > 0 ? groups_.groupings() : std::vector<std::vector<GroupId>>{};
  return e.dump();
}

void HierarchicalLearner::load_extra(const std::string& json) {
  GrlLearner::load_extra(json);
  std::vector<std::vector<GroupId>> groupings;
  try {
    groupings = nlohmann::json::parse(json).at("groupings").get<std::vector<std::vector<GroupId>>>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("learner state: hierarchical: ") + e.what());
  }
  groups_.stale();
  groups_.clear();
  if (handed_out_ == 0) return;
  if (groupings.size() != batch_size_)
    throw InputError("learner state: hierarchical: groupings: must be " + std::to_string(batch_size_));
  groups_.set(std::move(groupings), inputs_);
}

// ---- Registry entry ----------------------------------------------------------------------------

namespace {

const detail::OptionTable<HierarchicalOptions>& hierarchical_options() {
  using O = HierarchicalOptions;
  static const detail::OptionTable<O> kTable(
      "hierarchical",
      detail::with_policy<O>([] {
        std::vector<detail::OptionTable<O>::Field> own = detail::grouper_fields<O>(
            "0 or in [2, 4096]", "learned groups; 0 = min(256, 20 x devices), the HP code's");
        auto grl = detail::grl_fields<O>();
        own.insert(own.end(), grl.begin(), grl.end());
        return own;
      }(), /*learned_groups=*/true));
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
