// The model zoo: training graphs of the networks the placement papers used (NOTES.md), built
// with TrainingGraphBuilder at TensorFlow-1.x op granularity or per layer, with the papers'
// default settings. A model is named by a spec, "name" or "name:key=value,...":
//
//   Model m = make_model(ModelSpec::parse("nmt:layers=4,batch=64"));
//   std::cout << m.graph.num_ops() << " ops, " << m.stats.parameters << " parameters\n";
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/models/builder.h"
#include "placelab/models/expert.h"

namespace placelab::models {

// A model name and option overrides, e.g. {"nmt", {{"layers", "4"}, {"batch", "64"}}}.
struct ModelSpec {
  std::string name;
  std::map<std::string, std::string> options;

  // Parses "name" or "name:key=value,key=value". Throws InputError on an empty name, a missing
  // '=' or value, or a repeated key (the message quotes the text). Names and keys are checked
  // against the zoo by make_model, not here.
  static ModelSpec parse(std::string_view text);
  // The canonical text form: name, then the options in key order.
  std::string to_string() const;
};

// One option of a model. `choices` empty means a positive integer.
struct ModelOption {
  std::string key;
  std::string default_value;
  std::string description;
  std::vector<std::string> choices;
};

struct ModelInfo {
  std::string name;
  std::string description;  // one line: the network and the paper setting it reproduces
  std::vector<ModelOption> options;
  ExpertStrategy expert;    // the papers' expert placement for it
};

// Every model in the zoo, in a fixed order.
std::span<const ModelInfo> model_zoo();
// The entry named `name`, or nullptr.
const ModelInfo* find_model(std::string_view name);

struct Model {
  ModelSpec spec;          // the resolved spec: every option with its value
  OpGraph graph;
  BuildStats stats;        // trainable parameters and forward FLOPs of one step
  ExpertStrategy expert;
};

// Builds the model. Throws InputError for an unknown model (listing the zoo), an unknown option
// key (listing the model's keys) or a bad value (naming the rule or the choices).
// Deterministic: the same spec always gives the same graph.
Model make_model(const ModelSpec& spec);

}  // namespace placelab::models
