// Placements in a framework's own terms: `placelab export-placement` (and the Python module) turn a
// placement, op name -> placelab device name, into a map PyTorch or TensorFlow code can apply:
// module paths -> torch devices for a graph imported from a PyTorch ONNX export, op names -> TF
// device strings for TensorFlow graphs (the zoo's op names are TensorFlow's).
//
//   auto ops = read_placement_names_json("results/qs/best_placement.json");
//   TorchModuleMap m = torch_module_map(ops, models::onnx_node_scopes("resnet50.onnx"));
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/machine.h"
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

// The same from a graph whose ops name their module (Op::module, placelab.torch.capture): each
// module path exactly as named_modules() spells it ("" = the model), in the order of its first op.
// InputError for an op the graph lacks.
TorchModuleMap torch_module_map(const std::vector<std::pair<std::string, std::string>>& ops, const OpGraph& graph);

// "" when every module of `graph` has all its ops of `ops` (op name, device) on one device — a
// placement PyTorch can run; CPU-only ops (the input batch in host memory) are not counted — else a sentence naming the first module that does not, with two of its
// ops on different devices. InputError for an op the graph lacks.
std::string first_split_module(const std::vector<std::pair<std::string, std::string>>& ops, const OpGraph& graph);

// The op placement a module map (module path -> torch device, as export-placement --format torch
// writes it) gives a graph with module paths: each op on the device of its module or of the
// nearest module above it in the map; "cuda:N" is the machine's gpu:N, "cpu" its first CPU. What
// PyTorch runs after apply_module_map, so `simulate --placement modules.json` predicts it.
// InputError naming `origin` and the module for a module without a device or a device the
// machine lacks.
Placement placement_from_module_map(const std::map<std::string, std::string>& map, const OpGraph& graph,
                                    const Machine& machine, const std::string& origin);

}  // namespace placelab::cli
