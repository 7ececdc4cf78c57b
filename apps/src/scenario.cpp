#include "scenario.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string_view>
#include <type_traits>
#include <variant>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/core/keys.h"
#include "placelab/core/numbers.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/learners/grouping.h"
#include "placelab/profiler/cpu_executor.h"

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
    // Integers and booleans as YAML 1.2 writes them, plain: yaml-cpp's own reading took 010 for 8,
    // 0x10 for 16, +5, "12" in quotes, and yes/on for true.
    if constexpr (std::is_same_v<T, bool>) {
      if (node.Tag() != "!" && (node.Scalar() == "true" || node.Scalar() == "false")) return node.Scalar() == "true";
      fail(node, where(key, node) + ": must be " + expected);
    } else if constexpr (std::is_integral_v<T>) {
      if (node.Tag() != "!")
        if (const std::optional<T> v = parse_number<T>(node.Scalar())) return *v;
      fail(node, where(key, node) + ": must be " + expected);
    }
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
  // A positive integer no larger than `most` (a count whose size is work or memory).
  int64_t at_most(const std::string& key, const YAML::Node& node, int64_t most) const {
    const int64_t v = positive(key, node);
    if (v > most) fail(node, where(key, node) + ": must be at most " + std::to_string(most));
    return v;
  }
  int64_t non_negative(const std::string& key, const YAML::Node& node) const {
    auto v = scalar<int64_t>(key, node, "an integer >= 0");
    if (v < 0) fail(node, where(key, node) + ": must be an integer >= 0");
    return v;
  }
  std::string choice(const std::string& key, const YAML::Node& node, const std::vector<std::string>& choices) const {
    std::string s = scalar<std::string>(key, node, "a string");
    if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
    fail(node, where(key, node) + ": must be one of " + join_names(choices));
  }
  std::string choice(const std::string& key, const YAML::Node& node, std::initializer_list<const char*> choices) const {
    return choice(key, node, std::vector<std::string>(choices.begin(), choices.end()));
  }
  std::string choice(const std::string& key, const YAML::Node& node, std::span<const std::string_view> choices) const {
    return choice(key, node, std::vector<std::string>(choices.begin(), choices.end()));
  }
  // A learner option's value, read as its kind says.
  OptionValue option(const std::string& key, const YAML::Node& node, const OptionInfo& info) const {
    switch (info.kind) {
      case OptionKind::kInt: return scalar<int64_t>(key, node, "an integer");
      case OptionKind::kReal: return scalar<double>(key, node, "a number");
      case OptionKind::kBool: return scalar<bool>(key, node, "true or false");
      case OptionKind::kChoice: return choice(key, node, info.choices);
    }
    fail(node, key + ": an option of an unknown kind");
  }
  // Calls f(key, value) for each entry of a map, rejecting keys not in `allowed`; `expected` is
  // what the message lists for an unknown key (default: `allowed`).
  void for_each_entry(const YAML::Node& map, const std::string& what, const std::vector<std::string>& allowed,
                      const std::function<void(const std::string&, const YAML::Node&)>& f,
                      const std::string& expected = "") const {
    if (!map.IsMap()) fail(map, what + ": must be a map of key: value");
    std::set<std::string> seen;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) fail(kv.first, (what.empty() ? "" : what + ": ") + "a key must be a plain name, not a list or map");
      std::string key = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        fail(kv.first, (what.empty() ? "" : what + ".") + key + ": " +
                           unknown_key_rule(expected.empty() ? join_names(allowed) : expected));
      if (!seen.insert(key).second) fail(kv.first, key + ": given twice");
      f(key, kv.second);
    }
  }

 private:
  std::filesystem::path file_;
};

// One entry of `learners:`; `written` is its key as the scenario spells it (a name or an alias).
LearnerSpec parse_learner(const Reader& r, const LearnerEntry& entry, const std::string& written, const YAML::Node& node) {
  LearnerSpec spec{{entry.name, {}}, node.Mark().line + 1};
  const std::string where = "learners." + written;
  std::map<std::string, YAML::Node> value_nodes;
  if (!node.IsNull()) {
    std::vector<std::string> keys;
    for (const OptionInfo& o : entry.options) keys.push_back(o.key);
    r.for_each_entry(node, where, keys, [&](const std::string& key, const YAML::Node& value) {
      const OptionInfo& info = *std::find_if(entry.options.begin(), entry.options.end(),
                                             [&](const OptionInfo& o) { return o.key == key; });
      spec.config.values[key] = r.option(where + "." + key, value, info);
      value_nodes.emplace(key, value);
    });
  }
  try {
    entry.validate(spec.config.values);
  } catch (const InputError& e) {
    // The registry's message reads "<name>.<key> = <value>: <rule>": point at that key's line and
    // name the learner as the scenario wrote it.
    std::string what = e.what();
    if (!what.starts_with(entry.name + ".")) r.fail(node, where + ": " + what);
    what = what.substr(entry.name.size() + 1);
    const YAML::Node* at = &node;  // a pointer: assigning a YAML::Node would rebind the tree's node
    for (const auto& [key, value] : value_nodes)
      if (what.starts_with(key + " ")) at = &value;
    r.fail(*at, where + "." + what);
  }
  return spec;
}

// Every name and alias of the registry's entries, for a map's allowed keys.
template <typename Entry>
std::vector<std::string> names_and_aliases(std::span<const Entry> entries) {
  std::vector<std::string> out;
  for (const Entry& e : entries) {
    out.push_back(e.name);
    out.insert(out.end(), e.aliases.begin(), e.aliases.end());
  }
  return out;
}

std::filesystem::path resolve_relative(const std::filesystem::path& scenario_file, const std::string& p) {
  std::filesystem::path path(p);
  if (path.is_absolute()) return path;
  // Paths are relative to the scenario's folder, falling back to the working directory so that
  // `placelab run scenarios/x.yaml` also works with repository-relative paths.
  std::filesystem::path beside = scenario_file.parent_path() / path;
  // The non-throwing overloads: a name the system cannot look up (a component over NAME_MAX) is
  // a file that is not there, reported by whoever opens it, not a filesystem_error.
  std::error_code ec;
  if (std::filesystem::exists(beside, ec)) return beside;
  return std::filesystem::exists(path, ec) ? path : beside;
}

}  // namespace

bool is_plain_name(std::string_view name) {
  return !name.empty() && name.size() <= kMaxNameLength && name.front() != '.' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
         });
}

std::vector<Scenario> read_sweep(const std::vector<std::filesystem::path>& files, const std::string& sweep_name) {
  if (!is_plain_name(sweep_name))
    throw InputError("--name " + sweep_name.substr(0, 100) + ": must be a plain name (letters, digits, '.', '_', '-'; not starting "
                     "with '.'; at most " + std::to_string(kMaxNameLength) + " characters): it names the folder results/sweep-<name>");
  std::vector<Scenario> scenarios;
  std::map<std::filesystem::path, std::string> seen_file, seen_output;
  std::map<std::string, std::string> seen_name;
  for (const auto& f : files) {
    std::error_code ec;
    const std::filesystem::path canonical = std::filesystem::weakly_canonical(f, ec);
    if (auto [it, fresh] = seen_file.emplace(ec ? f : canonical, f.string()); !fresh)
      throw InputError(f.string() + ": listed twice in the sweep (as " + it->second + " before)");
    Scenario s = read_scenario(f);
    if (auto [it, fresh] = seen_name.emplace(s.name, f.string()); !fresh)
      throw InputError(f.string() + ": name " + s.name + " is also the name of " + it->second +
                       " (a sweep's scenarios need names of their own: give one a `name:`)");
    const std::filesystem::path out = std::filesystem::weakly_canonical(s.output, ec);
    if (auto [it, fresh] = seen_output.emplace(ec ? s.output : out, f.string()); !fresh)
      throw InputError(f.string() + ": output " + s.output.string() + " is also the output of " + it->second +
                       " (a sweep's scenarios need folders of their own)");
    scenarios.push_back(std::move(s));
  }
  return scenarios;
}

namespace {

// The readers of the scenario's compound keys, one per key, each filling its part of `s`.

void read_seeds(const Reader& r, const YAML::Node& v, Scenario& s) {
  s.seeds.clear();
  if (v.IsSequence()) {
    if (v.size() > static_cast<std::size_t>(kMaxSeeds)) r.fail(v, "seeds: at most " + std::to_string(kMaxSeeds) + " seeds");
    for (const auto& x : v) {
      const auto seed = static_cast<uint64_t>(r.non_negative("seeds[]", x));
      if (std::find(s.seeds.begin(), s.seeds.end(), seed) != s.seeds.end())
        r.fail(x, "seeds[] = " + std::to_string(seed) + ": listed twice (each seed is one run)");
      s.seeds.push_back(seed);
    }
    if (s.seeds.empty()) r.fail(v, "seeds: must list at least one seed");
  } else {
    int64_t n = r.at_most("seeds", v, kMaxSeeds);
    for (int64_t i = 1; i <= n; ++i) s.seeds.push_back(static_cast<uint64_t>(i));
  }
}

void read_learners(const Reader& r, const YAML::Node& v, Scenario& s) {
  r.for_each_entry(
      v, "learners", names_and_aliases(learner_registry()),
      [&](const std::string& name, const YAML::Node& opts) {
        const LearnerEntry& entry = *find_learner(name);
        for (const LearnerSpec& other : s.learners)
          if (other.config.name == entry.name)
            r.fail(opts, "learners." + name + ": the same learner as " + entry.name + ", given twice");
        s.learners.push_back(parse_learner(r, entry, name, opts));
      },
      learner_names());
}

void read_baselines(const Reader& r, const YAML::Node& v, Scenario& s) {
  if (!v.IsSequence()) r.fail(v, "baselines: must be a list of baseline names: " + baseline_names());
  for (const auto& b : v) {
    std::string name = r.string("baselines[]", b);
    // "name" or "name:argument" for a baseline that takes one (exact:30),
    // checked and compared in the baseline's own form (random:07 is random:7).
    std::string spec;
    try {
      spec = canonical_baseline(name, "baselines[]");
    } catch (const InputError& e) {
      r.fail(b, e.what());
    }
    if (std::find(s.baselines.begin(), s.baselines.end(), spec) != s.baselines.end())
      r.fail(b, "baselines[] = " + name + ": listed twice");
    s.baselines.push_back(spec);
  }
}

void read_verify(const Reader& r, const YAML::Node& v, Scenario& s) {
  bool rounds_set = false;
  s.verify.line = v.Mark().line + 1;
  r.for_each_entry(v, "verify", {"backend", "every", "steps", "in_situ", "rounds", "model", "args"}, [&](const std::string& k, const YAML::Node& x) {
    if (k == "backend") s.verify.backend = r.choice("verify.backend", x, {"cpu", "torch", "none"});
    else if (k == "model") s.verify.torch_model = r.string("verify.model", x);
    else if (k == "args") s.verify.torch_args = r.string("verify.args", x);
    else if (k == "every") s.verify.every = r.positive("verify.every", x);
    else if (k == "in_situ") s.verify.in_situ = r.scalar<bool>("verify.in_situ", x, "true or false");
    else if (k == "rounds") {
      const int64_t n = r.at_most("verify.rounds", x, kMaxVerifyRounds);
      s.verify.rounds = static_cast<int>(n);
      rounds_set = true;
    } else {
      const auto steps = r.scalar<int64_t>("verify.steps", x, "a whole number");
      try {
        check_measured_steps(steps, "verify.steps");
      } catch (const InputError& e) {
        r.fail(x, e.what());
      }
      s.verify.steps = static_cast<int>(steps);
    }
  });
  if (s.verify.in_situ && !rounds_set) s.verify.rounds = 3;
  if (rounds_set && !s.verify.in_situ) r.fail(v, "verify.rounds: only with `in_situ: true`");
  if (s.verify.backend == "none") s.verify.backend.clear();
  if (!s.verify.backend.empty() && s.verify.every == 0) r.fail(v, "verify: needs `every: N` (samples)");
  if (s.verify.backend == "torch" && s.verify.torch_model.empty())
    r.fail(v, "verify: backend torch needs `model:`, the model placelab.torch builds (torchvision:NAME or module:function)");
  if (s.verify.backend != "torch" && !(s.verify.torch_model.empty() && s.verify.torch_args.empty()))
    r.fail(v, "verify.model, verify.args: only with `backend: torch`");
  if (s.verify.backend == "torch" && s.verify.in_situ) r.fail(v, "verify.in_situ: only with `backend: cpu`");
}

// The paper's figures: its source, notes, and a step time (or OOM) per learner or baseline.
void read_paper(const Reader& r, const YAML::Node& v, Scenario& s) {
  std::vector<std::string> keys = names_and_aliases(learner_registry());
  std::vector<std::string> baselines = names_and_aliases(baseline_registry());
  keys.insert(keys.end(), baselines.begin(), baselines.end());
  keys.insert(keys.begin(), {"source", "notes"});
  r.for_each_entry(
      v, "paper", keys,
      [&](const std::string& k, const YAML::Node& x) {
        if (k == "source") {
          s.paper_source = r.string("paper.source", x);
          return;
        }
        if (k == "notes") {
          s.paper_notes = r.string("paper.notes", x);
          return;
        }
        const LearnerEntry* learner = find_learner(k);
        const std::string name = learner ? learner->name : find_baseline(k)->name;
        if (s.paper.count(name)) r.fail(x, "paper." + k + ": the same as " + name + ", given twice");
        PaperFigure f;
        if (x.IsScalar() && x.Scalar() == "OOM") f.oom = true;
        else {
          f.step_time_s = r.scalar<double>("paper." + k, x, "seconds per step or OOM");
          if (!(f.step_time_s > 0) || !std::isfinite(f.step_time_s))
            r.fail(x, r.where("paper." + k, x) + ": must be a finite number > 0, or OOM");
        }
        s.paper[name] = f;
      },
      "source, notes, a learner (" + learner_names() + ") or a baseline (" + baseline_names() + ")");
}

// One top-level key of the scenario file at `path` into `s`; `have_model` notes model or graph.
void read_top_level_key(const Reader& r, const std::filesystem::path& path, const std::string& key,
                        const YAML::Node& v, Scenario& s, bool& have_model) {
  if (key == "name") {
    // The name is the default output folder, results/<name>: a name, never a path.
    s.name = r.string(key, v);
    if (!is_plain_name(s.name))
      r.fail(v, r.where(key, v) + ": must be a plain name (letters, digits, '.', '_', '-'; not starting with '.'; at most " +
                    std::to_string(kMaxNameLength) + " characters): it names the output folder");
  } else if (key == "description") s.description = r.string(key, v);
  else if (key == "model") s.model = r.string(key, v), have_model = true;
  else if (key == "graph") s.graph = resolve_relative(path, r.string(key, v)), have_model = true;
  else if (key == "machine") {
    std::string m = r.string(key, v);
    bool looks_like_file = m.find('/') != std::string::npos || m.ends_with(".yaml") || m.ends_with(".yml");
    s.machine = looks_like_file ? resolve_relative(path, m).string() : m;
  } else if (key == "devices") s.devices = r.choice(key, v, std::span<const std::string_view>(kDeviceLists));
  else if (key == "grouping") s.grouping = r.choice(key, v, grouping_names());
  else if (key == "groups") s.metis_groups = static_cast<int>(r.at_most(key, v, kMaxGroupCount));
  else if (key == "op_level") s.op_level = r.scalar<bool>(key, v, "true or false");
  else if (key == "module_depth") {
    const int64_t depth = r.non_negative(key, v);
    if (depth > kMaxModuleDepth) r.fail(v, r.where(key, v) + ": must be at most " + std::to_string(kMaxModuleDepth));
    s.module_depth = static_cast<int>(depth);
  } else if (key == "samples") s.samples = r.at_most(key, v, kMaxSamples);
  else if (key == "batch") s.batch = r.at_most(key, v, kMaxBatch);
  else if (key == "seeds") read_seeds(r, v, s);
  else if (key == "learners") read_learners(r, v, s);
  else if (key == "baselines") read_baselines(r, v, s);
  else if (key == "verify") read_verify(r, v, s);
  else if (key == "checkpoint_every") s.checkpoint_every = r.non_negative(key, v);
  else if (key == "output") s.output = r.string(key, v);
  else if (key == "paper") read_paper(r, v, s);
}

}  // namespace

Scenario read_scenario(const std::filesystem::path& path) {
  std::error_code exists_error;
  if (!std::filesystem::exists(path, exists_error)) throw InputError(path.string() + ": cannot read the scenario file");
  const std::string text = read_text_file(path);  // regular files only, bounded
  YAML::Node root;
  try {
    root = YAML::Load(text);
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
                   {"name", "description", "model", "graph", "machine", "devices", "grouping", "groups", "module_depth", "op_level", "samples",
                    "batch", "seeds", "learners", "baselines", "verify", "checkpoint_every", "output", "paper"},
                   [&](const std::string& key, const YAML::Node& v) { read_top_level_key(r, path, key, v, s, have_model); });
  if (!have_model) throw InputError(path.string() + ":1: the scenario needs `model: <zoo spec>` or `graph: <file.json>`");
  if (!s.model.empty() && !s.graph.empty())
    throw InputError(path.string() + ": give one of `model` and `graph`, not both");
  if (s.learners.empty() && s.baselines.empty())
    throw InputError(path.string() + ": the scenario lists no learners and no baselines: nothing to run");
  if (s.module_depth != 0 && !s.grouping.empty() && s.grouping != "module")
    throw InputError(path.string() + ": module_depth: only with `grouping: module` (the grouping is " + s.grouping + ")");
  if (s.output.empty()) s.output = std::filesystem::path("results") / s.name;
  return s;
}

namespace {

std::string fnv1a_hex(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

// A file's content fingerprint, or its path when it cannot be read (run will say so).
std::string file_fingerprint(const std::filesystem::path& p) {
  try {
    return fnv1a_hex(read_text_file(p));
  } catch (const InputError&) {
    return "unreadable:" + p.string();
  }
}

nlohmann::json options_json(const OptionValues& values) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : values)
    std::visit([&](const auto& v) { j[key] = v; }, value);
  return j;
}

}  // namespace

std::vector<DeviceId> learner_devices(const Scenario& s, const Machine& machine) {
  std::vector<DeviceId> out;
  const std::optional<DeviceId> host = machine.default_cpu();
  if (s.devices == "tensorflow" && !host)
    throw InputError(s.file.string() + ": devices = tensorflow but machine " + machine.name +
                     " has no CPU (TensorFlow's device list is the host's CPU and the GPUs)");
  for (std::size_t i = 0; i < machine.num_devices(); ++i) {
    const auto d = static_cast<DeviceId>(i);
    const bool gpu = machine.devices[i].kind == DeviceKind::kGpu;
    if (s.devices == "all" || gpu || (s.devices == "tensorflow" && d == *host)) out.push_back(d);
  }
  if (out.empty())
    throw InputError(s.file.string() + ": devices = " + s.devices + " but machine " + machine.name + " has no GPU");
  return out;
}

std::string scenario_fingerprint(const Scenario& s) {
  nlohmann::json j;
  j["format"] = "placelab-fingerprint-1";
  j["model"] = s.model;
  j["graph"] = s.graph.empty() ? "" : file_fingerprint(s.graph);
  j["machine"] = s.machine;
  if (std::filesystem::is_regular_file(s.machine)) {
    j["machine_file"] = file_fingerprint(s.machine);
  } else if (const std::vector<std::string> presets = preset_names();
             std::find(presets.begin(), presets.end(), s.machine) != presets.end()) {
    // A preset's figures change with the code: a run on last version's k80x4 is not this one's.
    j["machine_preset"] = fnv1a_hex(std::string(preset_yaml(s.machine)));
  }
  j["devices"] = s.devices;
  j["grouping"] = s.grouping;
  j["groups"] = s.metis_groups;
  if (s.module_depth != 0) j["module_depth"] = s.module_depth;
  j["samples"] = s.samples;
  j["batch"] = s.batch;
  j["verify"] = {s.verify.backend, s.verify.every, s.verify.steps, s.verify.in_situ, s.verify.rounds};
  if (s.verify.backend == "torch") j["verify_torch"] = {s.verify.torch_model, s.verify.torch_args};
  return fnv1a_hex(j.dump());
}

std::string run_fingerprint(const std::string& scenario_print, const LearnerSpec& learner, uint64_t seed) {
  const nlohmann::json j = {scenario_print, learner.config.name, options_json(learner.config.values), seed};
  return fnv1a_hex(j.dump());
}

std::string summary_fingerprint(const std::string& scenario_print, const Scenario& s, const std::vector<uint64_t>& seeds) {
  nlohmann::json learners = nlohmann::json::array();
  for (const LearnerSpec& l : s.learners) learners.push_back({l.config.name, options_json(l.config.values)});
  const nlohmann::json j = {scenario_print, learners, s.baselines, seeds};
  return fnv1a_hex(j.dump());
}

}  // namespace placelab::cli
