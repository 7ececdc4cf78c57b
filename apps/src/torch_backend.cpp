#include "torch_backend.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <span>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <fstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "child_process.h"
#include "framework_map.h"
#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/profiler/cpu_executor.h"

namespace placelab::cli {

namespace fs = std::filesystem;

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (j > i) words.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

namespace {

// A private folder for the map and the result, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = base != nullptr && *base != '\0' ? base : "/tmp";
    pattern.append("/placelab-torch-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr)
      throw InputError("cannot make a temporary folder " + pattern + ": " + std::strerror(errno) + " (set TMPDIR)");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Where the placelab package is: the build's python/ folder (PLACELAB_PYTHON_PATH, set by CMake),
// unless $PLACELAB_PYTHONPATH names another.
std::string placelab_pythonpath() {
  if (const char* env = std::getenv("PLACELAB_PYTHONPATH"); env != nullptr && *env != '\0') return env;
  return PLACELAB_PYTHON_PATH;
}

TorchRun parse_run(const fs::path& file) {
  std::ifstream in(file);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw InputError(file.string() + ": placelab.torch measure wrote no result (is the placelab package current?)");
  TorchRun r;
  try {
    r.steps_s = j.at("steps_s").get<std::vector<double>>();
    r.median_s = j.at("median_s").get<double>();
    r.devices = j.at("devices").get<std::vector<std::string>>();
    r.mapped = j.value("mapped", std::map<std::string, std::string>{});
    r.moves = j.value("moves", int64_t{0});
    if (const auto& n = j.value("numerics", nlohmann::json()); n.is_object()) {
      // A NaN or infinite error is written as null (strict JSON): as far from equal as can be.
      const auto error = [&](const char* key) {
        const nlohmann::json& v = n.at(key);
        return v.is_null() ? std::numeric_limits<double>::infinity() : v.get<double>();
      };
      r.loss_rel_error = error("loss_rel_error");
      r.max_grad_rel_error = error("max_grad_rel_error");
      if (auto it = n.find("worst_parameter"); it != n.end() && it->is_string()) r.worst_parameter = it->get<std::string>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(file.string() + ": not a placelab.torch measure result: " + e.what());
  }
  return r;
}

}  // namespace

TorchRunner::TorchRunner(const OpGraph& graph, const Machine& machine, TorchModelSpec spec)
    : graph_(graph), machine_(machine), spec_(std::move(spec)) {
  if (spec_.model.empty())
    throw InputError("the torch backend needs the model to run: --torch-model torchvision:NAME or module:function "
                     "(docs/pytorch.md)");
  check_measured_steps(spec_.steps, "steps");
}

TorchRun TorchRunner::run(const Placement& placement, bool check) const {
  std::vector<std::pair<std::string, std::string>> ops;
  ops.reserve(graph_.num_ops());
  for (OpId op = 0; op < graph_.num_ops(); ++op) ops.emplace_back(graph_.op(op).name, machine_.devices[placement[op]].name);
  if (const std::string split = first_split_module(ops, graph_); !split.empty())
    throw InputError("not a placement PyTorch can run: " + split + " (place with grouping: module, docs/learners.md)");
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (const auto& [module, device] : torch_module_map(ops, graph_).modules) map[module] = device;
  TempDir dir;
  const fs::path map_file = dir.path() / "modules.json";
  write_file_atomically(map_file, map.dump(2) + "\n");
  std::vector<std::string> how = {"--placement", map_file.string()};
  if (check) how.emplace_back("--check");
  return measure(how);
}

TorchRun TorchRunner::run_all_on(const std::string& torch_device) const { return measure({"--all-on", torch_device}); }

TorchRun TorchRunner::measure(const std::vector<std::string>& how) const {
  TempDir dir;
  const fs::path result = dir.path() / "result.json";
  std::vector<std::string> args = {python_interpreter(), "-m", "placelab.torch", "measure", "--model", spec_.model};
  args.insert(args.end(), spec_.args.begin(), spec_.args.end());
  args.insert(args.end(), how.begin(), how.end());
  for (const std::string& a : {std::string("--steps"), std::to_string(spec_.steps), std::string("--missing-devices"),
                               std::string("cpu"), std::string("-o"), result.string()})
    args.push_back(a);
  // The placelab package first on PYTHONPATH, the user's after it.
  std::string pythonpath = "PYTHONPATH=" + placelab_pythonpath();
  if (const char* user = std::getenv("PYTHONPATH"); user != nullptr && *user != '\0') pythonpath.append(":").append(user);
  const int rc = run_child(args, {pythonpath});
  if (rc == -1)
    throw InputError(fmt::format("cannot run {} -m placelab.torch measure (set PLACELAB_PYTHON to a python3 that has "
                                 "torch; Debian: apt-get install python3-torch)",
                                 args[0]));
  if (rc != 0)
    throw InputError(fmt::format("{} -m placelab.torch measure --model {} failed (exit {}); its message is above",
                                 args[0], spec_.model, rc));
  return parse_run(result);
}

namespace {

class TorchVerifyEnvironment : public Environment {
 public:
  TorchVerifyEnvironment(const OpGraph& graph, const Machine& machine, TorchModelSpec spec)
      : runner_(graph, machine, std::move(spec)) {}

  std::vector<Measurement> evaluate(std::span<const Placement> placements) override {
    std::vector<Measurement> out;
    for (const Placement& p : placements) {
      const TorchRun r = runner_.run(p, /*check=*/true);
      std::string source = r.mapped.empty() ? "torch" : "torch, devices mapped to the CPU";
      if (r.max_grad_rel_error)
        source += fmt::format("; loss and gradients {} the unplaced model's (max rel. error {:.1e})",
                              std::max(*r.loss_rel_error, *r.max_grad_rel_error) <= kTorchNumericsTolerance ? "equal" : "DIFFER from",
                              std::max(*r.loss_rel_error, *r.max_grad_rel_error));
      out.push_back({.step_time_s = r.median_s, .oom = false, .source = std::move(source), .predicted_s = std::nullopt});
    }
    return out;
  }
  std::string name() const override { return "torch"; }

 private:
  TorchRunner runner_;
};

}  // namespace

std::unique_ptr<Environment> make_torch_verify_environment(const OpGraph& graph, const Machine& machine,
                                                           TorchModelSpec spec) {
  return std::make_unique<TorchVerifyEnvironment>(graph, machine, std::move(spec));
}

}  // namespace placelab::cli
