#include "framework_map.h"

#include <charconv>
#include <map>
#include <unordered_map>

#include "placelab/graph/error.h"

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

TorchModuleMap torch_module_map(const std::vector<std::pair<std::string, std::string>>& ops,
                                const std::vector<std::string>& scopes) {
  std::unordered_map<std::string_view, std::size_t> scope_index;
  for (std::size_t i = 0; i < scopes.size(); ++i) scope_index.emplace(scopes[i], i);
  std::vector<std::map<std::string, int>> votes(scopes.size());  // device -> ops, per scope
  TorchModuleMap result;
  for (const auto& [op, device] : ops) {
    std::string_view name = forward_name(op);
    std::size_t found = scopes.size();
    for (auto end = name.rfind('/'); end != std::string_view::npos && found == scopes.size();
         end = end ? name.rfind('/', end - 1) : std::string_view::npos) {
      auto it = scope_index.find(name.substr(0, end));
      if (it != scope_index.end()) found = it->second;
    }
    if (found == scopes.size())
      result.outside.push_back(op);
    else
      ++votes[found][device];
  }
  for (std::size_t i = 0; i < scopes.size(); ++i) {
    if (votes[i].empty()) continue;
    auto best = votes[i].begin();
    for (auto it = votes[i].begin(); it != votes[i].end(); ++it)
      if (it->second > best->second) best = it;
    std::string module = torch_module_path(scopes[i]);
    if (votes[i].size() > 1) result.split.push_back(module);
    result.modules.emplace_back(std::move(module), framework_device(best->first, models::Framework::kPyTorch));
  }
  return result;
}

}  // namespace placelab::cli
