#include "inputs.h"

#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "framework_map.h"
#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/graph/io.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/learners/baselines.h"
#include "placelab/learners/registry.h"
#include "placelab/models/zoo.h"

namespace placelab::cli {

GraphSource load_graph_source(const std::string& graph_path, const std::string& model_spec) {
  if (graph_path.empty() == model_spec.empty())
    throw InputError("give exactly one of --graph <file.json> and --model <name[:key=value,...]>");
  GraphSource out;
  if (!graph_path.empty()) {
    int64_t parameters = -1;
    out.graph = read_graph_json(graph_path, nullptr, &parameters);
    if (parameters >= 0) out.parameters = parameters;
    out.label = std::filesystem::path(graph_path).filename().string();
    return out;
  }
  models::Model m = models::make_model(models::ModelSpec::parse(model_spec));
  out.graph = std::move(m.graph);
  out.label = m.spec.to_string();
  out.expert = m.expert;
  out.parameters = m.stats.parameters;
  return out;
}

namespace {

// A module map (module path -> torch device, what export-placement --format torch writes) when the
// graph names modules and `text` is one: a JSON object of strings without a placement file's
// keys. Anything else is nullopt, and the placement reader judges the text.
std::optional<std::map<std::string, std::string>> module_map(std::string_view text, const OpGraph& g) {
  bool modules = false;
  for (OpId id = 0; id < g.num_ops() && !modules; ++id) modules = !g.op(id).module.empty();
  if (!modules) return std::nullopt;
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object() || doc.empty() || doc.contains("placement") || doc.contains("devices") || doc.contains("format"))
    return std::nullopt;
  std::map<std::string, std::string> map;
  for (const auto& [key, value] : doc.items()) {
    if (!value.is_string()) return std::nullopt;
    map[key] = value.get<std::string>();
  }
  return map;
}

}  // namespace

Placement resolve_placement(std::string_view spec, const GraphSource& source, const MachineSource& ms,
                            uint64_t seed, const Grouping* grouping, std::string* note) {
  const OpGraph& g = source.graph;
  const Machine& m = ms.machine;
  if (find_baseline(spec.substr(0, spec.find(':')))) {
    BaselineContext context{g, m, *ms.cost, seed, {}, grouping, note};
    if (source.expert)
      context.expert = [&] {
        std::vector<DeviceId> gpus = gpu_devices(m);
        auto cpu = m.default_cpu();
        if (gpus.empty() || !cpu)
          throw InputError("--placement " + std::string(spec) + ": machine '" + m.name +
                           "' needs a CPU and at least one GPU for the model's expert placement");
        return models::expert_placement(g, *source.expert, static_cast<int>(gpus.size()), {.cpu = *cpu, .gpus = gpus});
      };
    return place_baseline(spec, context);
  }
  std::filesystem::path path(spec);
  if (std::filesystem::exists(path)) {
    const std::string text = read_text_file(path);  // read once: a module map or a placement file
    if (auto map = module_map(text, g)) return placement_from_module_map(*map, g, m, path.string());
    std::vector<std::string> names;
    for (const Device& d : m.devices) names.push_back(d.name);
    Placement p = parse_placement_json(text, path.string(), g, names);
    check_placement(p, g.num_ops(), m.num_devices(), path.string().c_str());
    return p;
  }
  throw InputError("--placement " + std::string(spec) + ": not a rule or an existing file; expected " +
                   placement_rules_help());
}

}  // namespace placelab::cli
