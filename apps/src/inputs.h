// Resolving what a user names on the command line or in a scenario into loaded objects: a graph
// (a JSON file or a zoo model spec) and a placement (a rule or a file). Every failure is an InputError
// naming the argument.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/machine_source.h"
#include "placelab/models/expert.h"

namespace placelab {
class Grouping;
}

namespace placelab::cli {

// A graph loaded from --graph or built from --model, with what reports need to know about it.
struct GraphSource {
  OpGraph graph;
  std::string label;                                 // file name or canonical model spec
  std::optional<models::ExpertStrategy> expert;      // zoo models know their expert placement
  std::optional<int64_t> parameters;                 // trainable parameters (zoo, or the graph file's "parameters"), when known
};
// Exactly one of `graph_path` and `model_spec` must be non-empty.
GraphSource load_graph_source(const std::string& graph_path, const std::string& model_spec);

// Machines are loaded with load_machine_source (placelab/hwmodels/machine_source.h).

// Resolves a baseline rule of the registry ("name" or "name:argument", placement_rules_help() in
// learners/registry.h) or else a placement JSON file. `seed` feeds the randomised baselines so runs
// are reproducible; a zoo model's expert placement is passed to the registry from models/.
// `grouping` (the scenario's; may be null) and `note` (may be null) are passed to the baseline as
// BaselineContext::grouping and ::note.
Placement resolve_placement(std::string_view spec, const GraphSource& graph, const MachineSource& machine,
                            uint64_t seed = 1, const Grouping* grouping = nullptr, std::string* note = nullptr);

}  // namespace placelab::cli
