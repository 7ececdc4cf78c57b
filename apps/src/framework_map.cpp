#include "framework_map.h"

#include <charconv>
#include <map>
#include <optional>
#include <functional>
#include <unordered_map>

#include "placelab/core/error.h"

namespace placelab::cli {
namespace {

// "gpu:3" -> {"gpu", 3}; nullopt-like {"", -1} for anything else.
std::pair<std::string_view, int> split_device(std::string_view device) {
  auto colon = device.find(':');
  if (colon == std::string_view::npos || colon + 1 == device.size()) return {{}, -1};
  std::string_view kind = device.substr(0, colon), index = device.substr(colon + 1);
  int n = -1;
  auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), n);
  if (ec != std::errc() || end != index.data() + index.size() || n < 0) return {{}, -1};
  return {kind, n};
}

// The op's name without the training builder's prefixes (see torch_module_map).
std::string_view forward_name(std::string_view op) {
  constexpr std::string_view kGradients = "gradients/";
  if (op.substr(0, kGradients.size()) == kGradients) return op.substr(kGradients.size());
  // TrainingGraphBuilder's update scopes (models/src/builder.cpp, apply_update): "<kPrefix>/update_<variable>".
  static constexpr std::string_view kOptimizers[] = {"GradientDescent", "Momentum", "RMSProp", "Adam",
                                                      "AdamWeightDecay"};
  constexpr std::string_view kUpdate = "/update_";
  for (std::string_view optimizer : kOptimizers)
    if (op.starts_with(optimizer) && op.substr(optimizer.size(), kUpdate.size()) == kUpdate)
      return op.substr(optimizer.size() + kUpdate.size());
  return op;
}

}  // namespace

std::string framework_device(std::string_view device, models::Framework framework) {
  auto [kind, n] = split_device(device);
  if (kind != "cpu" && kind != "gpu")
    throw InputError("device " + std::string(device) + ": a framework device must be cpu:N or gpu:N");
  if (framework == models::Framework::kPyTorch) return kind == "cpu" ? "cpu" : "cuda:" + std::to_string(n);
  return std::string(kind == "cpu" ? "/device:CPU:" : "/device:GPU:") + std::to_string(n);
}

std::string torch_module_path(std::string_view scope) {
  std::string path;
  while (!scope.empty()) {
    auto slash = scope.find('/');
    std::string_view level = scope.substr(0, slash);
    const bool extends = level.size() > path.size() && level.starts_with(path) && level[path.size()] == '.';
    if (path.empty() || extends)
      path = level;
    else if (!level.empty())
      path.append(".").append(level);
    scope = slash == std::string_view::npos ? std::string_view() : scope.substr(slash + 1);
  }
  return path;
}

namespace {

// Each module of `modules` that `module_of` gives ops to goes where most of its ops are (ties: the
// device name first in byte order); ops of no module are `outside`. Modules keep their order.
TorchModuleMap majority_modules(const std::vector<std::pair<std::string, std::string>>& ops,
                                const std::vector<std::string>& modules,
                                const std::function<std::optional<std::size_t>(const std::string&)>& module_of) {
  std::vector<std::map<std::string, int>> votes(modules.size());  // device -> ops, per module
  TorchModuleMap result;
  for (const auto& [op, device] : ops) {
    if (auto m = module_of(op))
      ++votes[*m][device];
    else
      result.outside.push_back(op);
  }
  for (std::size_t i = 0; i < modules.size(); ++i) {
    if (votes[i].empty()) continue;
    auto best = votes[i].begin();
    for (auto it = votes[i].begin(); it != votes[i].end(); ++it)
      if (it->second > best->second) best = it;
    if (votes[i].size() > 1) result.split.push_back(modules[i]);
    result.modules.emplace_back(modules[i], framework_device(best->first, models::Framework::kPyTorch));
  }
  return result;
}

// The op of `graph` named `name`; InputError for a name the graph lacks (a placement of another graph).
const Op& op_named(const OpGraph& graph, const std::string& name) {
  const auto id = graph.find(name);
  if (!id) throw InputError("op " + name + ": not an op of the graph");
  return graph.op(*id);
}

// A torch device of a module map on `machine`: "cpu" its first CPU, "cuda:N" its gpu:N.
std::optional<DeviceId> module_map_device(std::string_view torch_device, const Machine& machine) {
  if (torch_device == "cpu") return machine.default_cpu();
  if (torch_device.starts_with("cuda:")) return machine.find_device("gpu:" + std::string(torch_device.substr(5)));
  return std::nullopt;
}

}  // namespace

TorchModuleMap torch_module_map(const std::vector<std::pair<std::string, std::string>>& ops,
                                const std::vector<std::string>& scopes) {
  std::unordered_map<std::string_view, std::size_t> scope_index;
  for (std::size_t i = 0; i < scopes.size(); ++i) scope_index.emplace(scopes[i], i);
  std::vector<std::string> modules;
  for (const std::string& scope : scopes) modules.push_back(torch_module_path(scope));
  return majority_modules(ops, modules, [&](const std::string& op) -> std::optional<std::size_t> {
    std::string_view name = forward_name(op);
    for (auto end = name.rfind('/'); end != std::string_view::npos;
         end = end ? name.rfind('/', end - 1) : std::string_view::npos) {
      auto it = scope_index.find(name.substr(0, end));
      if (it != scope_index.end()) return it->second;
    }
    return std::nullopt;
  });
}

TorchModuleMap torch_module_map(const std::vector<std::pair<std::string, std::string>>& ops, const OpGraph& graph) {
  std::vector<std::string> modules;
  std::unordered_map<std::string_view, std::size_t> index;
  for (OpId id = 0; id < graph.num_ops(); ++id)
    if (index.emplace(graph.op(id).module, modules.size()).second) modules.push_back(graph.op(id).module);
  return majority_modules(ops, modules, [&](const std::string& op) -> std::optional<std::size_t> {
    return index.at(op_named(graph, op).module);
  });
}

std::string first_split_module(const std::vector<std::pair<std::string, std::string>>& ops, const OpGraph& graph) {
  std::unordered_map<std::string_view, const std::pair<std::string, std::string>*> first;  // module -> its first op
  for (const auto& entry : ops) {
    const Op& op = op_named(graph, entry.first);
    // A CPU-only op (the input batch, which a program holds in host memory before its `.to()`) is
    // where the host keeps it, whatever its module's device.
    if (op.cpu_only) continue;
    const std::string& module = op.module;
    auto [it, inserted] = first.emplace(module, &entry);
    if (!inserted && it->second->second != entry.second)
      return "module '" + module + "' has op " + it->second->first + " on " + it->second->second + " and op " +
             entry.first + " on " + entry.second;
  }
  return "";
}

Placement placement_from_module_map(const std::map<std::string, std::string>& map, const OpGraph& graph,
                                    const Machine& machine, const std::string& origin) {
  Placement p(graph.num_ops());
  for (OpId id = 0; id < graph.num_ops(); ++id) {
    // The op's module, else its nearest ancestor in the map ("" = the model itself).
    std::string path = graph.op(id).module;
    auto it = map.find(path);
    while (it == map.end() && !path.empty()) {
      const auto dot = path.rfind('.');
      path = dot == std::string::npos ? std::string() : path.substr(0, dot);
      it = map.find(path);
    }
    if (it == map.end())
      throw InputError(origin + ": module '" + graph.op(id).module + "' (op " + graph.op(id).name +
                       ") has no device: neither it nor a module above it is in the map");
    const auto device = module_map_device(it->second, machine);
    if (!device)
      throw InputError(origin + ": module '" + it->first + "' = \"" + it->second + "\": machine '" + machine.name +
                       "' has no such device (expected cpu or cuda:N for its gpu:N)");
    p[id] = *device;
  }
  return p;
}

}  // namespace placelab::cli
