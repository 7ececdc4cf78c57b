// The learner and baseline registry: one entry per placement algorithm and per baseline, defined
// beside its implementation and listed once in learners/src/registry.cpp. The command line reads it
// for scenario validation, `--placement` rules, `placelab learners` and the report's policy-gradient
// reference, so a learner's name, options and factory are spelled in one place. Adding a learner
// touches learners/ only: its own files, one `<name>_learner_entry()` in registry_entries.h and one
// line in registry.cpp's list (docs/learners.md, "Adding a learner").
//
//   LearnerConfig config{"post", {{"ce_every", int64_t{120}}}};   // other options: the paper's
//   std::unique_ptr<Learner> l = make_learner(config, LearnerContext{space, /*seed=*/7});
//   Placement p = place_baseline("random:3", BaselineContext{graph, machine, cost, /*seed=*/1, {}});
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine.h"
#include "placelab/learners/grouping.h"
#include "placelab/learners/learner.h"
#include "placelab/sim/simulator.h"

namespace placelab {

// ---- Options -----------------------------------------------------------------------------------

// How an option's value is written: an integer, a real number, true/false, or one of `choices`.
enum class OptionKind { kInt, kReal, kBool, kChoice };

// "integer", "number", "true or false", "choice": for tables and JSON.
std::string_view option_kind_name(OptionKind kind);

// One option of a learner, as a user sets it in a scenario's `learners: {name: {key: value}}`.
struct OptionInfo {
  std::string key;
  OptionKind kind = OptionKind::kInt;
  std::string default_value;         // as text: "12", "0.1", "1e-08", "true"; the paper's value
  std::string rule;                  // what validation demands: ">= 1", "in [0, 1)", "one of a, b"
  std::string help;                  // one line
  std::vector<std::string> choices;  // kChoice only
};

// A value a user set. An int64_t is accepted for a kReal option; any other kind mismatch is an
// InputError.
using OptionValue = std::variant<int64_t, double, bool, std::string>;
// The options a user set, by key; every other option takes its default.
using OptionValues = std::map<std::string, OptionValue>;

// The value as a user would write it: 12, 0.1, true, adam.
std::string option_value_text(const OptionValue& value);

// ---- Learners ----------------------------------------------------------------------------------

// The graph seen through the grouping, for learners whose policy reads the graph (neural
// learners); defined in problem.h. Table learners ignore it.
struct PlacementProblem;

class Grouping;

// What a learner is built for. `problem` is borrowed: it must outlive the learner.
struct LearnerContext {
  SearchSpace space;
  uint64_t seed = 1;
  const PlacementProblem* problem = nullptr;  // the graph seen through the grouping; neural learners need it, table learners ignore it
  // The run's baselines for this seed projected onto `space`'s groups (each group on the device most
  // of its ops are on), the fastest of them once projected, when one fits: a start for search
  // learners (mcmc, critpath).
  std::optional<Placement> best_baseline;
  // For learners that read simulated schedules (critpath): the graph, the scenario's simulator of it
  // and the scenario's grouping (behind `space`, or, for a learner that places ops, the groups it
  // moves whole). They re-read the schedule of placements already measured.
  const OpGraph* graph = nullptr;
  const Simulator* simulator = nullptr;
  const Grouping* grouping = nullptr;
};

struct LearnerEntry {
  std::string name;                  // canonical: the scenario key, the result row's name, Learner::name()
  std::vector<std::string> aliases;  // other names a scenario or `placelab learners` accepts
  std::string summary;               // one line: what the algorithm does
  std::string paper;                 // where it comes from: authors, venue, section
  std::vector<OptionInfo> options;   // every option, with the paper's defaults
  bool policy_gradient = false;      // the report's "vs policy gradient" reference
  bool needs_problem = false;        // make needs LearnerContext::problem
  bool needs_simulator = false;      // make needs LearnerContext::graph, simulator and grouping
  // The learner places single ops: its space is the graph's ops, and LearnerContext::grouping holds
  // the scenario's groups, which it moves whole as well (critpath).
  bool places_ops = false;
  // For a learner that places ops: the option values under which it keeps every group on one device,
  // for groups that must not be split (PyTorch modules: grouping "module"). A scenario applies them
  // and refuses a user's value that contradicts them.
  OptionValues whole_groups;
  // Throws InputError "<name>.<key> = <value>: must be <rule>" for an unknown key, a value of the
  // wrong kind or one that breaks its rule.
  std::function<void(const OptionValues&)> validate;
  // Builds the learner (validating the values as `validate` does).
  std::function<std::unique_ptr<Learner>(const OptionValues&, const LearnerContext&)> make;
};

// A learner to build: its canonical name and the options a user set.
struct LearnerConfig {
  std::string name;
  OptionValues values;
};

// Every learner, in a fixed order: post, ppo, cross_entropy, grl, spotlight, hierarchical, eagle,
// eagle_ce, reinforce, mcmc, critpath.
std::span<const LearnerEntry> learner_registry();
// The entry whose name or alias is `name_or_alias`, or nullptr.
const LearnerEntry* find_learner(std::string_view name_or_alias);
// "post, ppo, cross_entropy, reinforce (policy_gradient)": for "expected one of" messages.
std::string learner_names();

// Builds the learner `config.name` (a name or an alias) for `context`. Throws InputError for an
// unknown name (listing the names), bad values (as LearnerEntry::validate), or a learner that needs
// the problem when context.problem is null.
std::unique_ptr<Learner> make_learner(const LearnerConfig& config, const LearnerContext& context);

// ---- Baselines ---------------------------------------------------------------------------------

// What a baseline places. References are borrowed for the call.
struct BaselineContext {
  const OpGraph& graph;
  const Machine& machine;
  const CostModel& cost;  // over `machine`
  uint64_t seed = 1;      // the run's seed: feeds the randomised baselines (metis, scotch, mincut, random)
  // The graph's expert placement; empty when the graph has none (a graph file rather than a zoo
  // model). learners/ cannot include models/, so the caller passes the zoo's in.
  std::function<Placement()> expert;
  // The scenario's grouping, for baselines that place groups (exact); null: the baseline's own
  // default (exact: scope_units). Borrowed for the call.
  const Grouping* grouping = nullptr;
  // Where a baseline has more to report than its placement (exact: the solver's status, bound and
  // gap), it writes one line here when not null; a run puts it in the result row's note.
  std::string* note = nullptr;
};

struct BaselineEntry {
  std::string name;                  // canonical: the rule, the scenario's list entry, the result row's name
  std::vector<std::string> aliases;
  std::string summary;               // one line
  std::string paper;
  std::string argument;              // "" (takes none) or how to write it, e.g. "<seed>" for `random:<seed>`
  // For a baseline that takes an argument: the argument read by the baseline's rule and written
  // back in one form ("07" -> "7", "30.0" -> "30"), or InputError naming the rule. Scenarios check
  // their baselines with it before a run and compare them by it (canonical_baseline).
  std::function<std::string(const std::string& argument)> canonical_argument;
  // The op placement. `argument` is the text after "name:", absent when none was given; never
  // present when `argument` above is "". Throws InputError for a bad argument or a machine the
  // baseline cannot use.
  std::function<Placement(const BaselineContext&, const std::optional<std::string>& argument)> place;
};

// Every baseline, in a fixed order.
std::span<const BaselineEntry> baseline_registry();
// The entry whose name or alias is `name_or_alias` (without an argument), or nullptr.
const BaselineEntry* find_baseline(std::string_view name_or_alias);
// "single_gpu, single_cpu, expert, ...": for "expected one of" messages.
std::string baseline_names();
// "single_gpu | single_cpu | ... | random:<seed> | ... | <placement.json>": what --placement takes.
std::string placement_rules_help();

// `spec`, "name" or "name:argument", with the entry's canonical name and argument
// ("random:07" -> "random:7"). Throws InputError ("<field> = <spec>: ...") for an unknown name
// (listing the names), an argument the baseline does not take, or one its rule refuses.
std::string canonical_baseline(std::string_view spec, std::string_view field = "placement");
// Places by `spec` (canonical_baseline's rules). Throws InputError for what canonical_baseline
// refuses, or what the baseline throws.
Placement place_baseline(std::string_view spec, const BaselineContext& context);

}  // namespace placelab
