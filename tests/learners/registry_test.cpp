#include "placelab/learners/registry.h"

#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "placelab/learners/algorithms.h"
#include "placelab/learners/baselines.h"
#include "placelab/learners/grouping.h"
#include "placelab/learners/trainer.h"
#include "toy.h"

namespace placelab {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// The default as the value a user would set, parsed by the option's kind.
OptionValue parse_default(const OptionInfo& o) {
  switch (o.kind) {
    case OptionKind::kInt: return int64_t{std::stoll(o.default_value)};
    case OptionKind::kReal: return std::strtod(o.default_value.c_str(), nullptr);
    case OptionKind::kBool: return o.default_value == "true";
    case OptionKind::kChoice: return o.default_value;
  }
  return int64_t{0};
}

TEST(Registry, EveryEntryIsComplete) {
  ASSERT_FALSE(learner_registry().empty());
  ASSERT_FALSE(baseline_registry().empty());
  for (const LearnerEntry& e : learner_registry()) {
    EXPECT_FALSE(e.name.empty());
    EXPECT_FALSE(e.summary.empty()) << e.name;
    EXPECT_FALSE(e.paper.empty()) << e.name;
    EXPECT_TRUE(e.validate) << e.name;
    EXPECT_TRUE(e.make) << e.name;
    for (const OptionInfo& o : e.options) {
      EXPECT_FALSE(o.key.empty()) << e.name;
      EXPECT_FALSE(o.default_value.empty()) << e.name << "." << o.key;
      EXPECT_FALSE(o.rule.empty()) << e.name << "." << o.key;
      EXPECT_FALSE(o.help.empty()) << e.name << "." << o.key;
      EXPECT_EQ(o.kind == OptionKind::kChoice, !o.choices.empty()) << e.name << "." << o.key;
    }
  }
  for (const BaselineEntry& e : baseline_registry()) {
    EXPECT_FALSE(e.name.empty());
    EXPECT_FALSE(e.summary.empty()) << e.name;
    EXPECT_FALSE(e.paper.empty()) << e.name;
    EXPECT_TRUE(e.place) << e.name;
  }
}

TEST(Registry, NamesAndAliasesAreUniqueAcrossLearnersAndBaselines) {
  std::set<std::string> seen;
  for (const LearnerEntry& e : learner_registry()) {
    EXPECT_TRUE(seen.insert(e.name).second) << e.name;
    for (const auto& a : e.aliases) EXPECT_TRUE(seen.insert(a).second) << a;
    EXPECT_EQ(find_learner(e.name), &e);
    for (const auto& a : e.aliases) EXPECT_EQ(find_learner(a), &e);
  }
  for (const BaselineEntry& e : baseline_registry()) {
    EXPECT_TRUE(seen.insert(e.name).second) << e.name;
    for (const auto& a : e.aliases) EXPECT_TRUE(seen.insert(a).second) << a;
    EXPECT_EQ(find_baseline(e.name), &e);
  }
  EXPECT_EQ(find_learner("single_gpu"), nullptr);
  EXPECT_EQ(find_baseline("post"), nullptr);
}

TEST(Registry, LearnersInOrderWithPolicyGradientMarked) {
  // grl, the papers' policy gradient, precedes reinforce, its softmax-table form: the report takes
  // the first policy-gradient learner a run has results for as its reference.
  const auto learners = learner_registry();
  ASSERT_EQ(learners.size(), 11u);
  const char* order[] = {"post",  "ppo",      "cross_entropy", "grl",       "spotlight", "hierarchical",
                         "eagle", "eagle_ce", "reinforce",     "mcmc",      "critpath"};
  for (std::size_t i = 0; i < 11; ++i) EXPECT_EQ(learners[i].name, order[i]);
  EXPECT_EQ(find_learner("policy_gradient"), &learners[8]);
  EXPECT_EQ(find_learner("hp"), &learners[5]);
  EXPECT_EQ(find_learner("eagle-ce"), &learners[7]);
  for (const LearnerEntry& e : learners)
    EXPECT_EQ(e.policy_gradient, e.name == "reinforce" || e.name == "grl") << e.name;
  for (const LearnerEntry& e : learners)
    EXPECT_EQ(e.needs_problem, e.name != "post" && e.name != "ppo" && e.name != "cross_entropy" && e.name != "reinforce" &&
                                   e.name != "mcmc" && e.name != "critpath")
        << e.name;
  for (const LearnerEntry& e : learners) EXPECT_EQ(e.needs_simulator, e.name == "critpath") << e.name;
  for (const LearnerEntry& e : learners) EXPECT_EQ(e.places_ops, e.name == "critpath") << e.name;
}

// Each listed default against the field of a default-constructed Options struct. The keys are the
// ones scenario files use; the test lists them all, so a renamed or dropped key fails here.
void expect_defaults(const std::string& learner, const std::map<std::string, double>& expected) {
  const LearnerEntry* e = find_learner(learner);
  ASSERT_NE(e, nullptr) << learner;
  std::set<std::string> keys;
  for (const OptionInfo& o : e->options) {
    keys.insert(o.key);
    auto it = expected.find(o.key);
    ASSERT_NE(it, expected.end()) << learner << "." << o.key << " is not an option of the Options struct";
    const OptionValue v = parse_default(o);
    const double listed = std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v))
                          : std::holds_alternative<bool>(v)  ? (std::get<bool>(v) ? 1.0 : 0.0)
                                                             : std::get<double>(v);
    EXPECT_EQ(listed, it->second) << learner << "." << o.key << " lists " << o.default_value;
  }
  EXPECT_EQ(keys.size(), expected.size()) << learner << ": options missing from the registry";
}

TEST(Registry, ListedDefaultsAreTheOptionsStructs) {
  const PostOptions post;
  expect_defaults("post", {{"ppo_every", post.ppo_every},
                           {"ce_every", post.ce_every},
                           {"sga_steps", post.sga_steps},
                           {"learning_rate", post.learning_rate},
                           {"beta_init", post.beta_init},
                           {"kl_target", post.kl_target},
                           {"baseline_decay", post.baseline_decay},
                           {"elite_fraction", post.elite_fraction},
                           {"epsilon", post.epsilon},
                           {"decay_epsilon", post.decay_epsilon},
                           {"oom_time_s", post.oom_time_s}});
  const PpoOptions ppo;
  expect_defaults("ppo", {{"samples_per_update", ppo.samples_per_update},
                          {"sga_steps", ppo.sga_steps},
                          {"learning_rate", ppo.learning_rate},
                          {"beta_init", ppo.beta_init},
                          {"kl_target", ppo.kl_target},
                          {"baseline_decay", ppo.baseline_decay},
                          {"oom_time_s", ppo.oom_time_s}});
  const CrossEntropyOptions ce;
  expect_defaults("cross_entropy", {{"samples_per_update", ce.samples_per_update},
                                    {"elite_fraction", ce.elite_fraction},
                                    {"epsilon", ce.epsilon},
                                    {"decay_epsilon", ce.decay_epsilon},
                                    {"oom_time_s", ce.oom_time_s}});
  const ReinforceOptions pg;
  expect_defaults("reinforce", {{"samples_per_update", pg.samples_per_update},
                                {"learning_rate", pg.learning_rate},
                                {"adam_beta1", pg.adam_beta1},
                                {"adam_beta2", pg.adam_beta2},
                                {"adam_epsilon", pg.adam_epsilon},
                                {"baseline_decay", pg.baseline_decay},
                                {"failing_signal", pg.failing_signal},
                                {"feasible_only_after", pg.feasible_only_after}});
  // The papers' figures, as the docs quote them.
  auto default_of = [](const std::string& learner, const std::string& key) {
    for (const OptionInfo& o : find_learner(learner)->options)
      if (o.key == key) return o.default_value;
    return std::string("(none)");
  };
  EXPECT_EQ(default_of("post", "ppo_every"), "12");
  EXPECT_EQ(default_of("post", "ce_every"), "60");
  EXPECT_EQ(default_of("post", "epsilon"), "0.1");
  EXPECT_EQ(default_of("post", "decay_epsilon"), "true");
  EXPECT_EQ(default_of("reinforce", "adam_epsilon"), "1e-08");
}

// Runs a learner built from `values` on a toy environment; its curve and final state.
std::pair<std::vector<double>, std::string> trace_of(const std::string& learner, const OptionValues& values) {
  const std::size_t G = 5, D = 3;
  testing::AdditiveEnv env(testing::random_costs(G, D, 17), /*capacity=*/3);
  std::unique_ptr<Learner> l = make_learner({learner, values}, LearnerContext{SearchSpace{G, testing::device_range(D)}, 4});
  TrainerOptions o;
  o.sample_budget = 240;
  const TrainSummary s = train(*l, testing::identity_grouping(G), env, o);
  std::vector<double> curve;
  for (const CurvePoint& c : s.curve) curve.push_back(c.oom ? -1.0 : c.step_time_s);
  return {curve, l->save_state()};
}

TEST(Registry, EmptyValuesGiveTheListedDefaults) {
  for (const LearnerEntry& e : learner_registry()) {
    if (e.needs_problem || e.needs_simulator) continue;  // needs a graph; its own tests cover it
    OptionValues all;
    for (const OptionInfo& o : e.options) all[o.key] = parse_default(o);
    EXPECT_NO_THROW(e.validate(all)) << e.name;
    EXPECT_EQ(trace_of(e.name, {}), trace_of(e.name, all)) << e.name;
  }
}

// The first clause of a rule (">= 1 and a multiple of ppo_every" → ">= 1") and a value that
// breaks it, for the rule shapes the registry uses; nullopt for other rules.
std::optional<std::pair<std::string, OptionValue>> breaking(const OptionInfo& o) {
  const std::string clause = o.rule.substr(0, o.rule.find(" and "));
  auto number = [&](const std::string& text) -> OptionValue {
    const double x = std::strtod(text.c_str(), nullptr);
    if (o.kind == OptionKind::kInt) return static_cast<int64_t>(x);
    return x;
  };
  if (clause.rfind(">= ", 0) == 0) {
    const double bound = std::strtod(clause.c_str() + 3, nullptr);
    return std::pair{clause, o.kind == OptionKind::kInt ? OptionValue{static_cast<int64_t>(bound) - 1} : OptionValue{bound - 1}};
  }
  if (clause.rfind("> ", 0) == 0) return std::pair{clause, number(clause.substr(2))};
  if (clause.rfind("in ", 0) == 0) {
    // "in [a, b)", "in (a, b]", "in [a, b]": a value past the upper end.
    const std::size_t comma = clause.find(',');
    const double hi = std::strtod(clause.c_str() + comma + 1, nullptr);
    return std::pair{clause, number(std::to_string(hi + (clause.back() == ')' ? 0.0 : 1.0)))};
  }
  return std::nullopt;
}

TEST(Registry, BadValuesNameTheKeyValueAndRule) {
  int broken = 0;
  for (const LearnerEntry& e : learner_registry()) {
    for (const OptionInfo& o : e.options) {
      const auto b = breaking(o);
      if (!b) continue;
      ++broken;
      const std::string what = message_of([&] { e.validate({{o.key, b->second}}); });
      EXPECT_NE(what.find(e.name + "." + o.key + " = " + option_value_text(b->second)), std::string::npos) << what;
      EXPECT_NE(what.find("must be " + b->first), std::string::npos) << what;
      // make validates too.
      EXPECT_THROW(make_learner({e.name, {{o.key, b->second}}}, LearnerContext{SearchSpace{2, {0, 1}}, 1}), InputError);
    }
  }
  EXPECT_GE(broken, 25);  // every numeric option of the table learners
  const std::string wrong_kind = message_of([] { find_learner("post")->validate({{"ce_every", std::string("many")}}); });
  EXPECT_NE(wrong_kind.find("post.ce_every = many: must be an integer"), std::string::npos) << wrong_kind;
  const std::string fraction = message_of([] { find_learner("post")->validate({{"ce_every", 1.5}}); });
  EXPECT_NE(fraction.find("must be an integer"), std::string::npos) << fraction;
  EXPECT_NO_THROW(find_learner("post")->validate({{"learning_rate", int64_t{2}}}));  // an int is a fine real
  const std::string unknown = message_of([] { find_learner("post")->validate({{"speed", int64_t{3}}}); });
  EXPECT_NE(unknown.find("post.speed: unknown key; expected one of ppo_every, ce_every"), std::string::npos) << unknown;
}

TEST(Registry, MakesEveryLearnerAndRejectsUnknownNames) {
  for (const LearnerEntry& e : learner_registry()) {
    const LearnerContext context{SearchSpace{3, {0, 2}}, 5};
    if (e.needs_problem || e.needs_simulator) {
      EXPECT_THROW(make_learner({e.name, {}}, context), InputError) << e.name << " without a problem or simulator";
      continue;
    }
    std::unique_ptr<Learner> l = make_learner({e.name, {}}, context);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->name(), e.name);
    EXPECT_EQ(l->space().devices, (std::vector<DeviceId>{0, 2}));
    for (const auto& a : e.aliases) EXPECT_EQ(make_learner({a, {}}, context)->name(), e.name);
  }
  const std::string what = message_of([] { make_learner({"genetic", {}}, LearnerContext{SearchSpace{2, {0, 1}}, 1}); });
  EXPECT_NE(what.find("genetic"), std::string::npos);
  for (const LearnerEntry& e : learner_registry()) EXPECT_NE(what.find(e.name), std::string::npos) << what;
  EXPECT_NE(learner_names().find("reinforce (policy_gradient)"), std::string::npos) << learner_names();
}

TEST(Registry, BaselinesPlaceByName) {
  const Machine m = testing::toy_machine(3);
  const testing::FlopsCostModel cost(m);
  const OpGraph g = testing::fork_join(3, 4, 1e9, 1 << 10);
  const BaselineContext context{g, m, cost, /*seed=*/7, {}};
  EXPECT_EQ(place_baseline("random:3", context), place_baseline("random:3", context));
  EXPECT_EQ(place_baseline("random:3", context), random_placement(g, m, 3));
  EXPECT_EQ(place_baseline("random", context), random_placement(g, m, 7));  // the run's seed
  EXPECT_EQ(place_baseline("single_gpu", context), single_gpu_placement(g, m));
  EXPECT_EQ(place_baseline("heft", context), heft_placement(g, cost));
  EXPECT_EQ(place_baseline("metis", context), metis_placement(g, m, {.seed = 7}));
  for (const BaselineEntry& e : baseline_registry()) {
    if (e.name == "expert") continue;
    const Placement p = place_baseline(e.name, context);
    EXPECT_NO_THROW(check_placement(p, g.num_ops(), m.num_devices(), e.name.c_str())) << e.name;
  }
  EXPECT_NE(message_of([&] { place_baseline("random:x", context); }).find("random.seed = x"), std::string::npos);
  EXPECT_NE(message_of([&] { place_baseline("single_gpu:1", context); }).find("takes no argument"), std::string::npos);
  const std::string unknown = message_of([&] { place_baseline("fastest", context); });
  for (const BaselineEntry& e : baseline_registry()) EXPECT_NE(unknown.find(e.name), std::string::npos) << unknown;
  // The expert placement comes from the caller (the model zoo); a graph file has none.
  EXPECT_NE(message_of([&] { place_baseline("expert", context); }).find("no expert placement"), std::string::npos);
  const Placement cpu = single_cpu_placement(g, m);
  const BaselineContext with_expert{g, m, cost, 7, [&] { return cpu; }};
  EXPECT_EQ(place_baseline("expert", with_expert), cpu);
}

TEST(Registry, PlacementRulesHelpListsEveryBaseline) {
  const std::string help = placement_rules_help();
  for (const BaselineEntry& e : baseline_registry())
    EXPECT_NE(help.find(e.argument.empty() ? e.name + " |" : e.name + ":" + e.argument), std::string::npos) << help;
  EXPECT_NE(help.find("random:<seed>"), std::string::npos) << help;
  EXPECT_TRUE(help.ends_with("| <placement.json>")) << help;
}

TEST(Registry, GroupingNamesAreWhatMakeGroupingAccepts) {
  OpGraph g = testing::fork_join(2, 3, 1e9, 1 << 10);
  // Module paths too, as a captured PyTorch graph has them, so that "module" accepts the graph.
  for (OpId id = 0; id < g.num_ops(); ++id) g.op(id).module = id % 2 ? "a" : "b";
  for (std::string_view name : grouping_names())
    EXPECT_EQ(make_grouping(g, std::string(name), {.num_groups = 2}).num_ops(), g.num_ops()) << name;
  const std::string what = message_of([&] { make_grouping(g, "bogus"); });
  for (std::string_view name : grouping_names()) EXPECT_NE(what.find(name), std::string::npos) << what;
}

}  // namespace
}  // namespace placelab
