#include "scenario.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "placelab/graph/error.h"

namespace placelab::cli {
namespace {

// Reads one scenario, remembering the file for messages.
class Reader {
 public:
  explicit Reader(std::filesystem::path file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& what) const {
    throw InputError(file_.string() + ":" + std::to_string(node.Mark().line + 1) + ": " + what);
  }
  std::string where(const std::string& key, const YAML::Node& node) const {
    std::string value = node.IsScalar() ? node.Scalar() : (node.IsSequence() ? "[...]" : "{...}");
    return key + " = " + value;
  }
  template <typename T>
  T scalar(const std::string& key, const YAML::Node& node, const char* expected) const {
    if (!node.IsScalar()) fail(node, where(key, node) + ": must be " + expected);
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      fail(node, where(key, node) + ": must be " + expected);
    }
  }
  std::string string(const std::string& key, const YAML::Node& node) const {
    auto s = scalar<std::string>(key, node, "a string");
    if (s.empty()) fail(node, key + ": must not be empty");
    return s;
  }
  int64_t positive(const std::string& key, const YAML::Node& node) const {
    auto v = scalar<int64_t>(key, node, "a positive integer");
    if (v <= 0) fail(node, where(key, node) + ": must be a positive integer");
    return v;
  }
  int64_t non_negative(const std::string& key, const YAML::Node& node) const {
    auto v = scalar<int64_t>(key, node, "an integer >= 0");
    if (v < 0) fail(node, where(key, node) + ": must be an integer >= 0");
    return v;
  }
  std::string choice(const std::string& key, const YAML::Node& node, std::initializer_list<const char*> choices) const {
    std::string s = scalar<std::string>(key, node, "a string");
    std::string list;
    for (const char* c : choices) {
      if (s == c) return s;
      list += (list.empty() ? "" : ", ") + std::string(c);
    }
    fail(node, where(key, node) + ": must be one of " + list);
  }
  // Calls f(key, value) for each entry of a map, rejecting keys not in `allowed`.
  void for_each_entry(const YAML::Node& map, const std::string& what, const std::vector<std::string>& allowed,
                      const std::function<void(const std::string&, const YAML::Node&)>& f) const {
    if (!map.IsMap()) fail(map, what + ": must be a map of key: value");
    std::set<std::string> seen;
    for (const auto& kv : map) {
      std::string key = kv.first.as<std::string>();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        fail(kv.first, (what.empty() ? "" : what + ".") + key + ": unknown key; expected one of " + list);
      }
      if (!seen.insert(key).second) fail(kv.first, key + ": given twice");
      f(key, kv.second);
    }
  }

 private:
  std::filesystem::path file_;
};

// A named option field of a learner's Options struct, for generic YAML → struct parsing.
template <typename O>
struct Field {
  const char* name;
  std::variant<int O::*, double O::*, bool O::*> member;
};

template <typename O>
O parse_options(const Reader& r, const std::string& learner, const YAML::Node& node,
                const std::vector<Field<O>>& fields) {
  O options;
  if (!node || node.IsNull()) return options;
  std::vector<std::string> names;
  for (const auto& f : fields) names.emplace_back(f.name);
  r.for_each_entry(node, "learners." + learner, names, [&](const std::string& key, const YAML::Node& value) {
    const auto& f = *std::find_if(fields.begin(), fields.end(), [&](const auto& x) { return key == x.name; });
    std::string full = "learners." + learner + "." + key;
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(options.*member)>;
          if constexpr (std::is_same_v<T, bool>)
            options.*member = r.scalar<bool>(full, value, "true or false");
          else if constexpr (std::is_same_v<T, int>)
            options.*member = r.scalar<int>(full, value, "an integer");
          else
            options.*member = r.scalar<double>(full, value, "a number");
        },
        f.member);
  });
  try {
    options.validate();
  } catch (const InputError& e) {
    r.fail(node, "learners." + learner + ": " + e.what());
  }
  return options;
}

LearnerSpec parse_learner(const Reader& r, const std::string& name, const YAML::Node& node) {
  LearnerSpec spec{name, {}};
  if (name == "reinforce") {
    using O = ReinforceOptions;
    spec.options = parse_options<O>(r, name, node,
                                    {{"samples_per_update", &O::samples_per_update},
                                     {"learning_rate", &O::learning_rate},
                                     {"adam_beta1", &O::adam_beta1},
                                     {"adam_beta2", &O::adam_beta2},
                                     {"adam_epsilon", &O::adam_epsilon},
                                     {"baseline_decay", &O::baseline_decay},
                                     {"failing_signal", &O::failing_signal},
                                     {"feasible_only_after", &O::feasible_only_after}});
  } else if (name == "ppo") {
    using O = PpoOptions;
    spec.options = parse_options<O>(r, name, node,
                                    {{"samples_per_update", &O::samples_per_update},
                                     {"sga_steps", &O::sga_steps},
                                     {"learning_rate", &O::learning_rate},
                                     {"beta_init", &O::beta_init},
                                     {"kl_target", &O::kl_target},
                                     {"baseline_decay", &O::baseline_decay},
                                     {"oom_time_s", &O::oom_time_s}});
  } else if (name == "cross_entropy") {
    using O = CrossEntropyOptions;
    spec.options = parse_options<O>(r, name, node,
                                    {{"samples_per_update", &O::samples_per_update},
                                     {"elite_fraction", &O::elite_fraction},
                                     {"epsilon", &O::epsilon},
                                     {"decay_epsilon", &O::decay_epsilon},
                                     {"oom_time_s", &O::oom_time_s}});
  } else {
    using O = PostOptions;
    spec.options = parse_options<O>(r, name, node,
                                    {{"ppo_every", &O::ppo_every},
                                     {"ce_every", &O::ce_every},
                                     {"sga_steps", &O::sga_steps},
                                     {"learning_rate", &O::learning_rate},
                                     {"beta_init", &O::beta_init},
                                     {"kl_target", &O::kl_target},
                                     {"baseline_decay", &O::baseline_decay},
                                     {"elite_fraction", &O::elite_fraction},
                                     {"epsilon", &O::epsilon},
                                     {"decay_epsilon", &O::decay_epsilon},
                                     {"oom_time_s", &O::oom_time_s}});
  }
  return spec;
}

std::filesystem::path resolve_relative(const std::filesystem::path& scenario_file, const std::string& p) {
  std::filesystem::path path(p);
  if (path.is_absolute()) return path;
  // Paths are relative to the scenario's folder, falling back to the working directory so that
  // `placelab run scenarios/x.yaml` also works with repository-relative paths.
  std::filesystem::path beside = scenario_file.parent_path() / path;
  return std::filesystem::exists(beside) || !std::filesystem::exists(path) ? beside : path;
}

}  // namespace

Scenario read_scenario(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string() + ": cannot read the scenario file");
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::ParserException& e) {
    throw InputError(path.string() + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
  }
  Reader r(path);
  if (!root.IsMap()) throw InputError(path.string() + ":1: a scenario must be a map of key: value");
  Scenario s;
  s.file = path;
  s.name = path.stem().string();
  bool have_model = false;
  r.for_each_entry(root, "",
                   {"name", "description", "model", "graph", "machine", "devices", "grouping", "groups", "samples",
                    "batch", "seeds", "learners", "baselines", "verify", "checkpoint_every", "output", "paper"},
                   [&](const std::string& key, const YAML::Node& v) {
                     if (key == "name") s.name = r.string(key, v);
                     else if (key == "description") s.description = r.string(key, v);
                     else if (key == "model") s.model = r.string(key, v), have_model = true;
                     else if (key == "graph") s.graph = resolve_relative(path, r.string(key, v)), have_model = true;
                     else if (key == "machine") {
                       std::string m = r.string(key, v);
                       bool looks_like_file = m.find('/') != std::string::npos || m.ends_with(".yaml") || m.ends_with(".yml");
                       s.machine = looks_like_file ? resolve_relative(path, m).string() : m;
                     } else if (key == "devices") s.devices = r.choice(key, v, {"all", "gpus"});
                     else if (key == "grouping")
                       s.grouping = r.choice(key, v, {"none", "colocation", "single_consumer", "name_prefix", "layer", "model_units", "scope_units", "metis"});
                     else if (key == "groups") s.metis_groups = static_cast<int>(r.positive(key, v));
                     else if (key == "samples") s.samples = r.positive(key, v);
                     else if (key == "batch") s.batch = r.positive(key, v);
                     else if (key == "seeds") {
                       s.seeds.clear();
                       if (v.IsSequence()) {
                         for (const auto& x : v) s.seeds.push_back(static_cast<uint64_t>(r.non_negative("seeds[]", x)));
                         if (s.seeds.empty()) r.fail(v, "seeds: must list at least one seed");
                       } else {
                         int64_t n = r.positive(key, v);
                         for (int64_t i = 1; i <= n; ++i) s.seeds.push_back(static_cast<uint64_t>(i));
                       }
                     } else if (key == "learners") {
                       r.for_each_entry(v, "learners", {"reinforce", "ppo", "cross_entropy", "post"},
                                        [&](const std::string& name, const YAML::Node& opts) {
                                          s.learners.push_back(parse_learner(r, name, opts));
                                        });
                     } else if (key == "baselines") {
                       if (!v.IsSequence()) r.fail(v, "baselines: must be a list, e.g. [single_gpu, expert, metis]");
                       for (const auto& b : v) {
                         std::string name = r.string("baselines[]", b);
                         bool known = std::any_of(std::begin(kBaselineNames), std::end(kBaselineNames),
                                                  [&](const char* k) { return name == k; });
                         if (!known) {
                           std::string list;
                           for (const char* k : kBaselineNames) list += (list.empty() ? "" : ", ") + std::string(k);
                           r.fail(b, "baselines[] = " + name + ": unknown baseline; expected one of " + list);
                         }
                         if (std::find(s.baselines.begin(), s.baselines.end(), name) != s.baselines.end())
                           r.fail(b, "baselines[] = " + name + ": listed twice");
                         s.baselines.push_back(name);
                       }
                     } else if (key == "verify") {
                       bool rounds_set = false;
                       s.verify.line = v.Mark().line + 1;
                       r.for_each_entry(v, "verify", {"backend", "every", "steps", "in_situ", "rounds"}, [&](const std::string& k, const YAML::Node& x) {
                         if (k == "backend") s.verify.backend = r.choice("verify.backend", x, {"cpu", "none"});
                         else if (k == "every") s.verify.every = r.positive("verify.every", x);
                         else if (k == "in_situ") s.verify.in_situ = r.scalar<bool>("verify.in_situ", x, "true or false");
                         else if (k == "rounds") {
                           const int64_t n = r.positive("verify.rounds", x);
                           if (n > 100) r.fail(x, "verify.rounds: must be <= 100");
                           s.verify.rounds = static_cast<int>(n);
                           rounds_set = true;
                         } else {
                           s.verify.steps = static_cast<int>(r.positive("verify.steps", x));
                           if (s.verify.steps < 2) r.fail(x, "verify.steps: must be >= 2 (the first step is warm-up)");
                         }
                       });
                       if (s.verify.in_situ && !rounds_set) s.verify.rounds = 3;
                       if (rounds_set && !s.verify.in_situ) r.fail(v, "verify.rounds: only with `in_situ: true`");
                       if (s.verify.backend == "none") s.verify.backend.clear();
                       if (!s.verify.backend.empty() && s.verify.every == 0) r.fail(v, "verify: needs `every: N` (samples)");
                     } else if (key == "checkpoint_every") s.checkpoint_every = r.non_negative(key, v);
                     else if (key == "output") s.output = r.string(key, v);
                     else if (key == "paper") {
                       r.for_each_entry(v, "paper",
                                        {"source", "single_gpu", "single_cpu", "expert", "metis", "scotch", "mincut", "random",
                                         "round_robin", "heft", "reinforce", "ppo", "cross_entropy", "post"},
                                        [&](const std::string& k, const YAML::Node& x) {
                                          if (k == "source") {
                                            s.paper_source = r.string("paper.source", x);
                                            return;
                                          }
                                          PaperFigure f;
                                          if (x.IsScalar() && x.Scalar() == "OOM") f.oom = true;
                                          else {
                                            f.step_time_s = r.scalar<double>("paper." + k, x, "seconds per step or OOM");
                                            if (!(f.step_time_s > 0)) r.fail(x, "paper." + k + ": must be > 0 or OOM");
                                          }
                                          s.paper[k] = f;
                                        });
                     }
                   });
  if (!have_model) throw InputError(path.string() + ":1: the scenario needs `model: <zoo spec>` or `graph: <file.json>`");
  if (!s.model.empty() && !s.graph.empty())
    throw InputError(path.string() + ": give one of `model` and `graph`, not both");
  if (s.learners.empty() && s.baselines.empty())
    throw InputError(path.string() + ": the scenario lists no learners and no baselines: nothing to run");
  if (s.output.empty()) s.output = std::filesystem::path("results") / s.name;
  return s;
}

}  // namespace placelab::cli
