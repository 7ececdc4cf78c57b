#include "placelab/models/expert.h"

#include <algorithm>

#include "placelab/core/error.h"

namespace placelab::models {

std::string_view expert_strategy_name(ExpertStrategy s) {
  switch (s) {
    case ExpertStrategy::kSingleGpu: return "single_gpu";
    case ExpertStrategy::kLayerPerGpu: return "layer_per_gpu";
    case ExpertStrategy::kContiguousParts: return "contiguous";
  }
  return "single_gpu";
}

std::optional<ExpertStrategy> expert_strategy_from_name(std::string_view name) {
  for (auto s : {ExpertStrategy::kSingleGpu, ExpertStrategy::kLayerPerGpu, ExpertStrategy::kContiguousParts})
    if (expert_strategy_name(s) == name) return s;
  return std::nullopt;
}

Placement expert_placement(const OpGraph& graph, ExpertStrategy strategy, int num_gpus, const ExpertDevices& devices) {
  if (num_gpus < 1 || static_cast<std::size_t>(num_gpus) > devices.gpus.size())
    throw InputError("expert placement: num_gpus = " + std::to_string(num_gpus) + ": must be between 1 and the " +
                     std::to_string(devices.gpus.size()) + " GPUs given");
  const std::size_t n = graph.num_ops();
  int32_t num_layers = 1;
  for (OpId v = 0; v < n; ++v) num_layers = std::max(num_layers, graph.op(v).layer + 1);
  // gpu_of_layer[l]: index into devices.gpus.
  std::vector<int> gpu_of_layer(static_cast<std::size_t>(num_layers), 0);
  const auto g = static_cast<int64_t>(num_gpus);
  switch (strategy) {
    case ExpertStrategy::kSingleGpu:
      break;
    case ExpertStrategy::kLayerPerGpu:
      for (int32_t l = 0; l < num_layers; ++l)
        gpu_of_layer[static_cast<std::size_t>(l)] = static_cast<int>(int64_t{l} * g / num_layers);
      break;
    case ExpertStrategy::kContiguousParts: {
      // Cut the layer sequence where the running forward work crosses k/G of the total.
      std::vector<double> work(static_cast<std::size_t>(num_layers), 0);
      double total = 0;
      for (OpId v = 0; v < n; ++v) {
        const Op& op = graph.op(v);
        if (op.phase != Phase::kForward) continue;
        work[static_cast<std::size_t>(std::max(op.layer, 0))] += op.flops;
        total += op.flops;
      }
      double before = 0;
      for (int32_t l = 0; l < num_layers; ++l) {
        double mid = before + work[static_cast<std::size_t>(l)] / 2;
        int part = total > 0 ? static_cast<int>(mid / total * static_cast<double>(g)) : 0;
        gpu_of_layer[static_cast<std::size_t>(l)] = std::min(part, num_gpus - 1);
        before += work[static_cast<std::size_t>(l)];
      }
      break;
    }
  }
  Placement p(n);
  for (OpId v = 0; v < n; ++v) {
    const Op& op = graph.op(v);
    p[v] = op.cpu_only ? devices.cpu
                       : devices.gpus[static_cast<std::size_t>(gpu_of_layer[static_cast<std::size_t>(std::max(op.layer, 0))])];
  }
  return p;
}

}  // namespace placelab::models
