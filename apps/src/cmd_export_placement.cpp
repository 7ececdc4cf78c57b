// `placelab export-placement`: a placement file in a framework's terms (framework_map.h).
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "framework_map.h"
#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/graph/io.h"
#include "placelab/models/onnx_import.h"

namespace placelab::cli {
namespace {

struct ExportPlacementArgs {
  std::string placement, format, onnx, graph, out;
};

// At most `limit` names, then "and N more".
std::string some_of(const std::vector<std::string>& names, std::size_t limit) {
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < limit; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > limit) s += fmt::format(" and {} more", names.size() - limit);
  return s;
}

void run_export_placement(const ExportPlacementArgs& a) {
  const auto ops = read_placement_names_json(a.placement);
  // Every device needs a framework spelling; check them all first so the message names the op.
  for (const auto& [op, device] : ops) {
    try {
      framework_device(device, models::Framework::kPyTorch);
    } catch (const InputError& e) {
      throw InputError(a.placement + ": op " + op + ": " + e.what());
    }
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  std::string summary;
  if (a.format == "torch") {
    if (a.onnx.empty() == a.graph.empty())
      throw InputError("--format torch: needs --graph, the captured graph the placement is of (its ops name their "
                       "modules), or --onnx, the model the placed graph was imported from (its node names give them)");
    OpGraph graph;
    if (!a.graph.empty()) {
      graph = read_graph_json(a.graph);
      // A captured graph's placement must be one PyTorch can run: each module on one device.
      if (const std::string split = first_split_module(ops, graph); !split.empty())
        throw InputError(a.placement + ": not a placement PyTorch can run: " + split +
                         "; PyTorch runs a module on one device (place with grouping: module, docs/learners.md)");
    }
    const TorchModuleMap m = a.graph.empty() ? torch_module_map(ops, models::onnx_node_scopes(a.onnx))
                                             : torch_module_map(ops, graph);
    for (const auto& [module, device] : m.modules) out[module] = device;
    summary = fmt::format("{} modules from {} ops", m.modules.size(), ops.size() - m.outside.size());
    if (!m.split.empty())
      summary += fmt::format("\n{} module(s) had ops on several devices; each goes where most of its ops are: {}",
                             m.split.size(), some_of(m.split, 5));
    if (!m.outside.empty())
      summary += fmt::format("\n{} op(s) belong to no module of {} (input pipeline, loss, shared gradient ops): {}",
                             m.outside.size(), a.onnx, some_of(m.outside, 3));
  } else {
    if (!a.onnx.empty()) throw InputError("--onnx: only with --format torch");
    if (!a.graph.empty()) throw InputError("--graph: only with --format torch");
    for (const auto& [op, device] : ops) out[op] = framework_device(device, models::Framework::kTensorFlow);
    summary = fmt::format("{} ops", ops.size());
  }
  const std::string text = out.dump(2) + "\n";
  if (a.out.empty()) {
    std::cout << text << std::flush;  // the map, then the summary, also when both go to one pipe
    fmt::print(stderr, "{}\n", summary);
  } else {
    write_file_atomically(a.out, text);
    fmt::print("{}\nwrote {}\n", summary, a.out);
  }
}

}  // namespace

void add_export_placement_command(CLI::App& app) {
  auto a = std::make_shared<ExportPlacementArgs>();
  auto* cmd = app.add_subcommand("export-placement",
                                 "Write a placement as a framework's device map (PyTorch modules or TensorFlow ops)");
  cmd->add_option("placement", a->placement, "Placement file in the \"placement\" form (best_placement.json of a run)")
      ->required();
  cmd->add_option("--format", a->format, "torch: module path -> cuda:N / cpu; tf: op name -> /device:GPU:N")
      ->required()
      ->check(CLI::IsMember({"torch", "tf"}));
  cmd->add_option("--onnx", a->onnx, "With --format torch: the ONNX file the graph was imported from");
  cmd->add_option("--graph", a->graph,
                  "With --format torch: the graph placelab.torch.capture wrote (its ops name their modules exactly)");
  cmd->add_option("-o,--output", a->out, "Output JSON file (default: standard output)");
  cmd->footer(
      "Examples:\n  placelab export-placement results/qs/best_placement.json --format tf -o devices.json\n"
      "  placelab export-placement best_placement.json --format torch --onnx resnet50.onnx -o modules.json\n"
      "  placelab export-placement best_placement.json --format torch --graph r50.json -o modules.json\n"
      "  placelab simulate --graph r50.json --machine dgx1 --placement modules.json   # what the map runs\n"
      "Applying the map to a torch.nn.Module: docs/python.md, \"Placements out\"");
  cmd->callback([a] { run_export_placement(*a); });
}

}  // namespace placelab::cli
