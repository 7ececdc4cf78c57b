// Expert (human-designed) placements as the placement papers define them (NOTES.md): one LSTM
// layer per GPU with the embedding on the first and attention + softmax on the last
// (Mirhoseini et al. 2017, Post), everything on one GPU for the CNNs, or the layers cut into
// contiguous parts of equal forward work (Mirhoseini's multi-GPU Inception baseline). cpu_only ops
// always go to the CPU. Works on any graph whose ops carry Op::layer (the zoo's do).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <optional>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"

namespace placelab::models {

enum class ExpertStrategy : uint8_t {
  kSingleGpu,        // every op on the first GPU
  kLayerPerGpu,      // model layer l on GPU ⌊l · G / L⌋ (L layers, G GPUs): one layer per GPU when L = G
  kContiguousParts,  // layers in order cut into G contiguous parts of about equal forward FLOPs
};
std::string_view expert_strategy_name(ExpertStrategy s);  // "single_gpu", "layer_per_gpu", "contiguous"
std::optional<ExpertStrategy> expert_strategy_from_name(std::string_view name);

// The machine's device ids the placement may use (indices of Machine::devices in hwmodels).
struct ExpertDevices {
  DeviceId cpu = 0;
  std::span<const DeviceId> gpus;
};

// One device per op of `graph`, using the first `num_gpus` of devices.gpus. Ops without a layer
// (layer -1) go with layer 0. Throws InputError when num_gpus < 1 or exceeds devices.gpus.size().
Placement expert_placement(const OpGraph& graph, ExpertStrategy strategy, int num_gpus, const ExpertDevices& devices);

}  // namespace placelab::models
