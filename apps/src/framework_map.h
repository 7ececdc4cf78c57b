// Placements in a framework's own terms: `placelab export-placement` (and the Python module) turn a
// placement, op name -> placelab device name, into a map PyTorch or TensorFlow code can apply:
// module paths -> torch devices for a graph imported from a PyTorch ONNX export, op names -> TF
// device strings for TensorFlow graphs (the zoo's op names are TensorFlow's).
//
//   auto ops = read_placement_names_json("results/qs/best_placement.json");
//   TorchModuleMap m = torch_module_map(ops, models::onnx_node_scopes("resnet50.onnx"));
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "placelab/models/builder.h"

namespace placelab::cli {

// A placelab device name in a framework's spelling: "gpu:N" -> "cuda:N" and "cpu:N" -> "cpu"
// (torch has one CPU device), or "/device:GPU:N" and "/device:CPU:N" (TensorFlow). InputError
// naming the device for any other name (a cluster's "host/gpu:0", say): frameworks place within
// one process.
std::string framework_device(std::string_view device, models::Framework framework);

// The PyTorch module path of an importer scope (onnx_node_scope). torch.onnx.export (1.13) names
// each scope level by the module's full path when that extends its parent's ("layer1/layer1.0")
// and by its attribute name otherwise ("layer1.0/conv1"), so a level that starts with the path so
// far plus "." replaces it and any other is appended: "layer1/layer1.0/conv1" and
// "layer1/0/conv1" both give "layer1.0.conv1".
std::string torch_module_path(std::string_view scope);

struct TorchModuleMap {
  std::vector<std::pair<std::string, std::string>> modules;  // module path -> torch device, in scope order
  std::vector<std::string> split;    // modules whose ops were on more than one device
  std::vector<std::string> outside;  // ops of no module: input pipeline, loss, shared gradient ops
};

// The device of each module that has ops in `ops` (op name, placelab device name): the device most
// of its ops are on (ties: the device name first in byte order). An op belongs to the longest of
// `scopes` that prefixes its name, after the builder's prefixes are removed: "gradients/"
// (backward ops, "gradients/conv/Conv2D_grad/...") and "<Optimizer>/update_" (updates,
// "Momentum/update_conv/conv.w/ApplyMomentum"). Modules come in the order of `scopes`; modules
// without ops are left out. InputError from framework_device.
TorchModuleMap torch_module_map(const std::vector<std::pair<std::string, std::string>>& ops,
                                const std::vector<std::string>& scopes);

}  // namespace placelab::cli
