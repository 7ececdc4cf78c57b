#include "placelab/learners/registry.h"

#include <optional>
#include <set>
#include <string>
#include <utility>

#include "option_table.h"
#include "placelab/core/error.h"
#include "placelab/core/keys.h"
#include "placelab/core/numbers.h"
#include "registry_entries.h"

namespace placelab {

namespace {

// The one list of learners: a new learner adds its entry function here (and nowhere else outside
// its own files). The order is the order `placelab learners` prints and the report's reference
// search follows: grl, the paper's policy gradient, before reinforce, its softmax-table form.
const std::vector<LearnerEntry>& learner_list() {
  static const std::vector<LearnerEntry> kLearners{
      detail::post_learner_entry(),
      detail::ppo_learner_entry(),
      detail::cross_entropy_learner_entry(),
      detail::grl_learner_entry(),
      detail::spotlight_learner_entry(),
      detail::hierarchical_learner_entry(),
      detail::eagle_learner_entry(),
      detail::eagle_ce_learner_entry(),
      detail::reinforce_learner_entry(),
      detail::mcmc_learner_entry(),
      detail::critpath_learner_entry(),
  };
  return kLearners;
}

const std::vector<BaselineEntry>& baseline_list() {
  static const std::vector<BaselineEntry> kBaselines{
      detail::single_gpu_baseline_entry(), detail::single_cpu_baseline_entry(), detail::expert_baseline_entry(),
      detail::metis_baseline_entry(),      detail::scotch_baseline_entry(),     detail::mincut_baseline_entry(),
      detail::random_baseline_entry(),     detail::round_robin_baseline_entry(), detail::heft_baseline_entry(),
      detail::m_topo_baseline_entry(),     detail::m_etf_baseline_entry(),      detail::m_sct_baseline_entry(),
      detail::exact_baseline_entry(),
  };
  return kBaselines;
}

// Names and aliases must be unique across both lists: `placelab learners <name>` and the report
// look entries up by name without saying which list. Checked once, on first use.
void check_names_unique() {
  static const bool kChecked = [] {
    std::set<std::string> seen;
    auto add = [&](const std::string& name) {
      PLACELAB_CHECK(!name.empty() && seen.insert(name).second) << "registry name \"" << name << "\" is empty or repeated";
    };
    for (const LearnerEntry& e : learner_list()) {
      add(e.name);
      for (const auto& a : e.aliases) add(a);
    }
    for (const BaselineEntry& e : baseline_list()) {
      add(e.name);
      for (const auto& a : e.aliases) add(a);
      PLACELAB_CHECK(e.argument.empty() != static_cast<bool>(e.canonical_argument))
          << "baseline " << e.name << ": an argument needs its canonical_argument rule, and only one";
    }
    return true;
  }();
  (void)kChecked;
}

template <typename Entry>
const Entry* find_in(std::span<const Entry> entries, std::string_view name) {
  for (const Entry& e : entries) {
    if (e.name == name) return &e;
    for (const auto& a : e.aliases)
      if (a == name) return &e;
  }
  return nullptr;
}

template <typename Entry>
std::string names_of(std::span<const Entry> entries) {
  std::string out;
  for (const Entry& e : entries) {
    out += (out.empty() ? "" : ", ") + e.name;
    if (!e.aliases.empty()) out += " (" + join_names(e.aliases) + ")";
  }
  return out;
}

}  // namespace

std::string_view option_kind_name(OptionKind kind) {
  switch (kind) {
    case OptionKind::kInt: return "integer";
    case OptionKind::kReal: return "number";
    case OptionKind::kBool: return "true or false";
    case OptionKind::kChoice: return "choice";
  }
  return "?";
}

std::string option_value_text(const OptionValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value)) return format_exact(*d);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  return std::get<std::string>(value);
}

// ---- Learners ----------------------------------------------------------------------------------

std::span<const LearnerEntry> learner_registry() {
  check_names_unique();
  return learner_list();
}

const LearnerEntry* find_learner(std::string_view name_or_alias) {
  return find_in(learner_registry(), name_or_alias);
}

std::string learner_names() { return names_of(learner_registry()); }

std::unique_ptr<Learner> make_learner(const LearnerConfig& config, const LearnerContext& context) {
  const LearnerEntry* entry = find_learner(config.name);
  if (!entry) throw InputError("learner = " + config.name + ": unknown learner; expected one of " + learner_names());
  if (entry->needs_problem && !context.problem)
    throw InputError("learner = " + config.name + ": needs the placement problem (the graph through the grouping)");
  if (entry->needs_simulator && (!context.graph || !context.simulator || !context.grouping))
    throw InputError("learner = " + config.name + ": needs the graph, its simulator and the grouping");
  return entry->make(config.values, context);
}

// ---- Baselines ---------------------------------------------------------------------------------

std::span<const BaselineEntry> baseline_registry() {
  check_names_unique();
  return baseline_list();
}

const BaselineEntry* find_baseline(std::string_view name_or_alias) {
  return find_in(baseline_registry(), name_or_alias);
}

std::string baseline_names() { return names_of(baseline_registry()); }

std::string placement_rules_help() {
  std::string out;
  for (const BaselineEntry& e : baseline_registry())
    out += e.name + (e.argument.empty() ? "" : ":" + e.argument) + " | ";
  return out + "<placement.json>";
}

namespace {

// The entry `spec` names and its canonical argument (nullopt: none given).
std::pair<const BaselineEntry*, std::optional<std::string>> resolve_baseline(std::string_view spec,
                                                                             std::string_view field) {
  const std::size_t colon = spec.find(':');
  const BaselineEntry* entry = find_baseline(spec.substr(0, colon));
  std::string where(field);
  where += " = " + excerpt(spec) + ": ";
  if (!entry) throw InputError(where + "unknown baseline; expected one of " + baseline_names());
  if (colon == std::string_view::npos) return {entry, std::nullopt};
  if (entry->argument.empty()) throw InputError(where + entry->name + " takes no argument");
  try {
    return {entry, entry->canonical_argument(std::string(spec.substr(colon + 1)))};
  } catch (const InputError& e) {
    throw InputError(where + e.what());
  }
}

}  // namespace

std::string canonical_baseline(std::string_view spec, std::string_view field) {
  const auto [entry, argument] = resolve_baseline(spec, field);
  return argument ? entry->name + ":" + *argument : entry->name;
}

Placement place_baseline(std::string_view spec, const BaselineContext& context) {
  const auto [entry, argument] = resolve_baseline(spec, "placement");
  return entry->place(context, argument);
}

}  // namespace placelab
