// Resolving what a user names on the command line or in a scenario into loaded objects: a graph
// (a JSON file or a zoo model spec), a machine (a preset, a machine YAML, or a calibrated machine
// file) with its cost model, and a placement (a rule or a file). Every failure is an InputError
// naming the argument.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/calibration.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine.h"
#include "placelab/models/expert.h"

namespace placelab::cli {

// A graph loaded from --graph or built from --model, with what reports need to know about it.
struct GraphSource {
  OpGraph graph;
  std::string label;                                 // file name or canonical model spec
  std::optional<models::ExpertStrategy> expert;      // zoo models know their expert placement
  int64_t parameters = -1;                           // trainable parameters (zoo, or the graph file's "parameters"); -1 unknown
};
// Exactly one of `graph_path` and `model_spec` must be non-empty.
GraphSource load_graph_source(const std::string& graph_path, const std::string& model_spec);

// A machine and the cost model the simulator uses for it: analytic for presets and plain machine
// files, calibrated for files with a `calibration:` block (placelab calibrate writes those).
struct MachineSource {
  Machine machine;
  std::unique_ptr<Calibration> calibration;  // null for uncalibrated machines
  std::unique_ptr<CostModel> cost;           // refers to machine and calibration above
  MachineSource() = default;
  MachineSource(MachineSource&&) = delete;   // the cost model points into this object
};
std::unique_ptr<MachineSource> load_machine_source(const std::string& name_or_path);

// Resolves a baseline rule of the registry ("name" or "name:argument", placement_rules_help() in
// learners/registry.h) or else a placement JSON file. `seed` feeds the randomised baselines so runs
// are reproducible; a zoo model's expert placement is passed to the registry from models/.
Placement resolve_placement(std::string_view spec, const GraphSource& graph, const MachineSource& machine,
                            uint64_t seed = 1);

}  // namespace placelab::cli
