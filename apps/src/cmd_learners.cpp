// `placelab learners [name]`: the learner and baseline registry (learners/registry.h) — names,
// aliases, papers and every learner option with its default and rule — as tables or JSON. Nothing
// here names a learner: what it prints is what the registry holds.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "placelab/core/error.h"
#include "placelab/core/keys.h"
#include "placelab/learners/registry.h"

namespace placelab::cli {
namespace {

using nlohmann::json;


std::string title(const std::string& name, const std::vector<std::string>& aliases) {
  return aliases.empty() ? name : fmt::format("{} (alias {})", name, join_names(aliases));
}

json default_json(const OptionInfo& o) {
  switch (o.kind) {
    case OptionKind::kInt: return std::stoll(o.default_value);
    case OptionKind::kReal: return std::stod(o.default_value);
    case OptionKind::kBool: return o.default_value == "true";
    case OptionKind::kChoice: return o.default_value;
  }
  return o.default_value;
}

json learner_json(const LearnerEntry& e) {
  json options = json::array();
  for (const OptionInfo& o : e.options) {
    json j = {{"key", o.key},
              {"kind", std::string(option_kind_name(o.kind))},
              {"default", default_json(o)},
              {"rule", o.rule},
              {"help", o.help}};
    if (!o.choices.empty()) j["choices"] = o.choices;
    options.push_back(j);
  }
  return {{"name", e.name},       {"aliases", e.aliases},
          {"summary", e.summary}, {"paper", e.paper},
          {"policy_gradient", e.policy_gradient}, {"needs_problem", e.needs_problem}, {"needs_simulator", e.needs_simulator}, {"places_ops", e.places_ops},
          {"options", options}};
}

json baseline_json(const BaselineEntry& e) {
  return {{"name", e.name}, {"aliases", e.aliases}, {"summary", e.summary}, {"paper", e.paper}, {"argument", e.argument}};
}

// The options as aligned columns: key, [kind,] default, rule, help.
void print_options(const LearnerEntry& e, bool with_kind) {
  if (e.options.empty()) {
    fmt::print("  (no options)\n");
    return;
  }
  std::size_t key_w = 6, kind_w = 4, default_w = 7, rule_w = 4;
  for (const OptionInfo& o : e.options) {
    key_w = std::max(key_w, o.key.size());
    kind_w = std::max(kind_w, option_kind_name(o.kind).size());
    default_w = std::max(default_w, o.default_value.size());
    rule_w = std::max(rule_w, o.rule.size());
  }
  auto row = [&](const std::string& key, const std::string& kind, const std::string& def, const std::string& rule,
                 const std::string& help) {
    std::string line = fmt::format("  {:<{}}  ", key, key_w);
    if (with_kind) line += fmt::format("{:<{}}  ", kind, kind_w);
    line += fmt::format("{:<{}}  {:<{}}  {}", def, default_w, rule, rule_w, help);
    fmt::print("{}\n", line);
  };
  row("option", "kind", "default", "rule", "help");
  for (const OptionInfo& o : e.options) row(o.key, std::string(option_kind_name(o.kind)), o.default_value, o.rule, o.help);
}

void print_learner(const LearnerEntry& e, bool full) {
  fmt::print("{}\n  {}\n  paper: {}\n", title(e.name, e.aliases), e.summary, e.paper);
  if (e.policy_gradient) fmt::print("  the report's \"vs policy gradient\" reference\n");
  if (e.needs_problem) fmt::print("  reads the graph through the grouping (a neural policy)\n");
  if (e.needs_simulator) fmt::print("  reads the simulated schedules of the placements it measured (critical paths)\n");
  if (e.places_ops) fmt::print("  places single ops; the scenario's groups are moves it makes whole\n");
  if (full) fmt::print("\n");
  print_options(e, full);
  if (full && !e.options.empty()) {
    const OptionInfo& o = e.options.front();
    fmt::print("\nIn a scenario (options left out keep their defaults):\n  learners:\n    {}: {{{}: {}}}\n", e.name, o.key,
               o.default_value);
  }
}

void print_baseline(const BaselineEntry& e, bool full) {
  fmt::print("{}\n  {}\n  paper: {}\n", title(e.name, e.aliases), e.summary, e.paper);
  if (!e.argument.empty()) fmt::print("  also {}:{}\n", e.name, e.argument);
  if (full)
    fmt::print("\nIn a scenario:  baselines: [{}]\nOn the command line:  placelab simulate ... --placement {}\n", e.name,
               e.argument.empty() ? e.name : e.name + ":" + e.argument);
}

void run_learners(const std::string& name, bool as_json) {
  if (!name.empty()) {
    if (const LearnerEntry* e = find_learner(name)) {
      if (as_json) {
        json j = learner_json(*e);
        j["type"] = "learner";
        std::cout << j.dump(2) << "\n";
      } else {
        print_learner(*e, true);
      }
      return;
    }
    if (const BaselineEntry* e = find_baseline(name)) {
      if (as_json) {
        json j = baseline_json(*e);
        j["type"] = "baseline";
        std::cout << j.dump(2) << "\n";
      } else {
        print_baseline(*e, true);
      }
      return;
    }
    throw InputError("learners " + name + ": no learner or baseline of that name; expected one of " + learner_names() +
                     ", " + baseline_names());
  }
  if (as_json) {
    json learners = json::array(), baselines = json::array();
    for (const LearnerEntry& e : learner_registry()) learners.push_back(learner_json(e));
    for (const BaselineEntry& e : baseline_registry()) baselines.push_back(baseline_json(e));
    std::cout << json{{"learners", learners}, {"baselines", baselines}}.dump(2) << "\n";
    return;
  }
  fmt::print("LEARNERS: a scenario's `learners:` keys; every option defaults to the paper's value\n\n");
  for (const LearnerEntry& e : learner_registry()) {
    print_learner(e, false);
    fmt::print("\n");
  }
  fmt::print("BASELINES: a scenario's `baselines:` entries and the rules of `--placement`\n\n");
  for (const BaselineEntry& e : baseline_registry()) {
    print_baseline(e, false);
    fmt::print("\n");
  }
  fmt::print("`placelab learners <name>` shows one in full; docs/learners.md describes them.\n");
}

}  // namespace

void add_learners_command(CLI::App& app) {
  struct Args {
    std::string name;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("learners", "List the learners and baselines: papers, options, defaults and rules");
  cmd->add_option("name", args->name, "One learner or baseline (a name or an alias) to show in full");
  cmd->add_flag("--json", args->json, "Print the registry (or the one entry) as JSON");
  // The examples name registry entries through the registry, so they stay true when it changes.
  const std::string learner = learner_registry().front().name;
  const BaselineEntry& baseline = baseline_registry().back();
  cmd->footer(fmt::format(
      "Examples:\n"
      "  placelab learners                  # every learner with its options, then every baseline\n"
      "  placelab learners {}{:<{}}# one in full, with a scenario snippet\n"
      "  placelab learners {} --json\n"
      "  placelab learners --json",
      learner, "", std::max<int>(1, 17 - static_cast<int>(learner.size())), baseline.name));
  cmd->callback([args] { run_learners(args->name, args->json); });
}

}  // namespace placelab::cli
