// `placelab models`, `export`, `inspect`: the model zoo from the command line.
#include <charconv>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <ranges>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "cost_sources.h"
#include "inputs.h"
#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/core/keys.h"
#include "placelab/core/units.h"
#include "placelab/graph/io.h"
#include "placelab/learners/grouping.h"
#include "placelab/models/onnx_import.h"
#include "placelab/models/zoo.h"

namespace placelab::cli {
namespace {

void run_models() {
  for (const models::ModelInfo& info : models::model_zoo()) {
    fmt::print("{:<12} {}\n", info.name, info.description);
    std::string opts;
    for (const models::ModelOption& o : info.options) opts += fmt::format("{}{}={}", opts.empty() ? "" : ",", o.key, o.default_value);
    fmt::print("{:<12} defaults: {}   expert: {}\n", "", opts, models::expert_strategy_name(info.expert));
  }
  fmt::print("\nUse one with `--model name[:key=value,...]`, e.g. `--model nmt:layers=4,batch=64`.\n"
             "Options of every model: docs/models.md.\n");
}

// Sums of what the graph holds, by phase and by op type: what `inspect` reports.
struct Tally {
  int64_t ops = 0;
  double flops = 0;
  int64_t output_bytes = 0;
  int64_t persistent_bytes = 0;
  void add(const Op& op) {
    ++ops;
    flops += op.flops;
    output_bytes += op.output_bytes;
    persistent_bytes += op.persistent_bytes;
  }
  nlohmann::json to_json() const {
    return {{"ops", ops}, {"flops", flops}, {"output_bytes", output_bytes}, {"persistent_bytes", persistent_bytes}};
  }
};

nlohmann::json inspect_json(const GraphSource& src) {
  const OpGraph& g = src.graph;
  Tally total;
  std::map<std::string, Tally> by_phase, by_type;
  int64_t cpu_only = 0, edges_bytes = 0, measured = 0;
  for (OpId v = 0; v < g.num_ops(); ++v) {
    const Op& op = g.op(v);
    total.add(op);
    measured += !op.measured_s.empty();
    by_phase[std::string(phase_name(op.phase))].add(op);
    by_type[op.type].add(op);
    cpu_only += op.cpu_only;
    g.for_each_out_edge(v, [&](OpId, const Tensor& t) { edges_bytes += t.bytes; });
  }
  nlohmann::json j;
  j["graph"] = src.label;
  j["ops"] = g.num_ops();
  j["edges"] = g.num_edges();
  j["edge_bytes"] = edges_bytes;
  j["cpu_only_ops"] = cpu_only;
  j["measured_ops"] = measured;  // ops whose graph carries measured times (measured_s)
  j["execution"] = std::string(execution_name(g.execution()));
  std::set<std::string> modules;
  for (OpId id = 0; id < g.num_ops(); ++id)
    if (!g.op(id).module.empty()) modules.insert(g.op(id).module);
  if (!modules.empty()) j["modules"] = modules.size();  // distinct PyTorch module paths ops name
  if (src.parameters) j["parameters"] = *src.parameters;
  j["flops"] = total.flops;
  j["persistent_bytes"] = total.persistent_bytes;
  j["output_bytes"] = total.output_bytes;
  // Every grouping rule of the registry (a graph without modules has no module groups to count).
  j["groups"] = nlohmann::json::object();
  for (std::string_view name : grouping_names())
    if (is_grouping_rule(name) && (name != "module" || !modules.empty()))
      j["groups"][std::string(name)] = make_grouping(g, std::string(name)).num_groups();
  for (const auto& [k, t] : by_phase) j["by_phase"][k] = t.to_json();
  for (const auto& [k, t] : by_type) j["by_type"][k] = t.to_json();
  return j;
}

void print_inspect(const nlohmann::json& j) {
  fmt::print("graph        {}\n", j["graph"].get<std::string>());
  fmt::print("ops          {} ({} cpu-only), {} edges carrying {}\n", j["ops"].get<int64_t>(),
             j["cpu_only_ops"].get<int64_t>(), j["edges"].get<int64_t>(), format_bytes(j["edge_bytes"].get<int64_t>()));
  if (j.contains("parameters")) fmt::print("parameters   {}\n", j["parameters"].get<int64_t>());
  fmt::print("execution    {}{}\n", j["execution"].get<std::string>(),
             j["execution"] == "eager" ? " (PyTorch: one host thread issues the ops in program order)" : " (TensorFlow 1.x)");
  if (j.contains("modules")) fmt::print("modules      {} module paths named by the ops\n", j["modules"].get<int64_t>());
  if (const int64_t n = j["measured_ops"].get<int64_t>(); n > 0)
    fmt::print("measured     {} ops carry measured times (they come before the cost model)\n", n);
  fmt::print("work         {} per step\n", format_flops(j["flops"].get<double>()));
  fmt::print("memory       {} persistent, {} of op outputs per step\n",
             format_bytes(j["persistent_bytes"].get<int64_t>()), format_bytes(j["output_bytes"].get<int64_t>()));
  std::string groups;
  for (std::string_view name : grouping_names())
    if (j["groups"].contains(name)) {
      if (!groups.empty()) groups += ", ";
      groups += fmt::format("{} {}", name, j["groups"][std::string(name)].get<int64_t>());
    }
  fmt::print("groups       {} (the grouping rules; `grouping:` in a scenario picks one)\n", groups);
  auto table = [](const char* title, const nlohmann::json& rows, std::size_t limit) {
    std::vector<std::pair<std::string, nlohmann::json>> sorted;
    for (const auto& item : rows.items()) sorted.emplace_back(item.key(), item.value());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      return a.second["flops"].template get<double>() > b.second["flops"].template get<double>();
    });
    fmt::print("\n{:<28} {:>7} {:>14} {:>12} {:>12}\n", title, "ops", "work", "outputs", "persistent");
    for (std::size_t i = 0; i < sorted.size() && i < limit; ++i) {
      const auto& t = sorted[i].second;
      fmt::print("{:<28} {:>7} {:>14} {:>12} {:>12}\n", sorted[i].first, t["ops"].get<int64_t>(),
                 format_flops(t["flops"].get<double>()), format_bytes(t["output_bytes"].get<int64_t>()),
                 format_bytes(t["persistent_bytes"].get<int64_t>()));
    }
    if (sorted.size() > limit) fmt::print("… and {} more (--json lists all)\n", sorted.size() - limit);
  };
  table("phase", j["by_phase"], 10);
  table("op type (by work)", j["by_type"], 15);
}

void add_export_command(CLI::App& app) {
  struct ExportArgs {
    std::string model, out;
    std::string batch, granularity, optimizer;
  };
  auto ex = std::make_shared<ExportArgs>();
  auto* export_cmd = app.add_subcommand("export", "Write a zoo model's training graph as graph JSON");
  export_cmd->add_option("model", ex->model, "name[:key=value,...]")->required();
  export_cmd->add_option("--batch", ex->batch, "Batch size (shorthand for the batch= option)");
  export_cmd->add_option("--granularity", ex->granularity, "op (TF ops) or layer (one op per layer per phase)");
  export_cmd->add_option("--optimizer", ex->optimizer, "sgd | momentum | rmsprop | adam");
  export_cmd->add_option("-o,--output", ex->out, "Output file (default: standard output)");
  export_cmd->footer("Example:\n  placelab export inception_v3 --batch 32 --granularity op -o inception.json");
  export_cmd->callback([ex] {
    models::ModelSpec spec = models::ModelSpec::parse(ex->model);
    auto set = [&](const char* key, const std::string& value) {
      if (value.empty()) return;
      if (spec.options.count(key) && spec.options[key] != value)
        throw InputError(fmt::format("--{} {} contradicts {}={} in the model spec", key, value, key, spec.options[key]));
      spec.options[key] = value;
    };
    set("batch", ex->batch);
    set("granularity", ex->granularity);
    set("optimizer", ex->optimizer);
    models::Model m = models::make_model(spec);
    std::ostringstream text;
    write_graph_json(m.graph, text, m.spec.to_string(), m.stats.parameters);
    if (ex->out.empty()) {
      std::cout << text.str();
    } else {
      write_file_atomically(ex->out, text.str());
      fmt::print(stderr, "wrote {}: {} ops, {} edges, {} parameters ({})\n", ex->out, m.graph.num_ops(),
                 m.graph.num_edges(), m.stats.parameters, m.spec.to_string());
    }
  });
}

void add_import_command(CLI::App& app) {
  struct ImportArgs {
    std::string file, out, optimizer = "sgd", granularity = "op", execution = "dataflow";
    int64_t batch = 0;
    std::vector<std::string> dims;  // NAME=SIZE
  };
  auto im = std::make_shared<ImportArgs>();
  auto* import_cmd = app.add_subcommand("import", "Import an ONNX model as a training graph (backward and optimizer ops synthesised)");
  import_cmd->add_option("model", im->file, "The .onnx file")->required();
  import_cmd->add_option("--batch", im->batch, "Batch size (replaces the inputs' first dimension; needed when it is symbolic)");
  import_cmd->add_option("--dim", im->dims,
                         "Size of a symbolic input dimension, NAME=SIZE (repeatable), e.g. --dim sequence=128");
  import_cmd->add_option("--optimizer", im->optimizer, "sgd | momentum | rmsprop | adam")->capture_default_str();
  import_cmd->add_option("--granularity", im->granularity, "op or layer")->capture_default_str();
  import_cmd->add_option("--execution", im->execution,
                         "eager: mark the graph as a PyTorch program, simulated as PyTorch runs it (its ops in "
                         "program order); dataflow: as TensorFlow 1.x's executor runs it (docs/simulator.md)")
      ->check(CLI::IsMember({"eager", "dataflow"}))
      ->capture_default_str();
  import_cmd->add_option("-o,--output", im->out, "Output graph JSON (default: standard output)");
  import_cmd->footer("Example:\n  placelab import resnet50.onnx --batch 32 --optimizer momentum -o resnet50.json\n"
                     "  placelab import transformer.onnx --dim sequence=128 --dim batch=32 -o transformer.json\n"
                     "  placelab import my_torch_model.onnx --batch 32 --execution eager -o model.json   # as PyTorch runs it\n"
                     "What is mapped and what is approximated: docs/onnx.md");
  import_cmd->callback([im] {
    models::OnnxImportOptions o;
    o.batch = im->batch;
    for (const std::string& d : im->dims) {
      const auto eq = d.find('=');
      int64_t size = 0;
      const char* end = d.data() + d.size();
      if (eq == std::string::npos || eq == 0 || std::from_chars(d.data() + eq + 1, end, size).ptr != end || size <= 0)
        throw InputError("--dim " + d + ": must be NAME=SIZE with SIZE a positive integer");
      if (!o.dim_values.emplace(d.substr(0, eq), size).second)
        throw InputError("--dim " + d + ": " + d.substr(0, eq) + " is given twice");
    }
    auto opt = models::optimizer_from_name(im->optimizer);
    if (!opt) throw InputError("--optimizer " + im->optimizer + ": must be sgd, momentum, rmsprop or adam");
    o.optimizer = *opt;
    auto gran = models::granularity_from_name(im->granularity);
    if (!gran) throw InputError("--granularity " + im->granularity + ": must be op or layer");
    o.granularity = *gran;
    models::OnnxImportReport report;
    OpGraph g = models::import_onnx(im->file, o, &report);
    // The importer emits the forward in node order, the synthesised backward after it and the
    // updates last, every edge forward: a program order an eager graph can take as it is.
    g.set_execution(*execution_from_name(im->execution));
    std::ostringstream text;
    write_graph_json(g, text, std::filesystem::path(im->file).filename().string(), report.stats.parameters);
    if (im->out.empty()) {
      std::cout << text.str();
      fmt::print(stderr, "{}\n", report.brief_report());
    } else {
      write_file_atomically(im->out, text.str());
      fmt::print("{}\nwrote {}: {} ops, {} edges\n", report.brief_report(), im->out, g.num_ops(), g.num_edges());
    }
  });
}

// The device `inspect --machine` prices every op on: the one --device names, else the first GPU,
// else device 0.
DeviceId inspect_device(const Machine& m, const std::string& name) {
  if (!name.empty()) {
    const auto d = m.find_device(name);
    if (!d)
      throw InputError("--device " + name + ": not a device of " + m.name + " (" +
                       join_names(m.devices | std::views::transform(&Device::name)) + ")");
    return *d;
  }
  for (std::size_t d = 0; d < m.devices.size(); ++d)
    if (m.devices[d].kind == DeviceKind::kGpu) return static_cast<DeviceId>(d);
  return 0;
}

void add_inspect_command(CLI::App& app) {
  struct InspectArgs {
    std::string graph, model, machine, device;
    bool json = false;
  };
  auto in = std::make_shared<InspectArgs>();
  auto* inspect_cmd = app.add_subcommand("inspect", "Summarise a graph: ops, groups, parameters, FLOPs, memory");
  inspect_cmd->add_option("graph", in->graph, "Graph JSON file");
  inspect_cmd->add_option("--model", in->model, "Zoo model instead of a file: name[:key=value,...]");
  inspect_cmd->add_flag("--json", in->json, "Print JSON instead of tables");
  inspect_cmd->add_option("--machine", in->machine,
                          "Also price every op on one device of this machine (preset or YAML, e.g. a calibrated "
                          "file) and say per op type whether its time is measured, fitted or analytic");
  inspect_cmd->add_option("--device", in->device, "With --machine: the device (default: its first GPU, else device 0)");
  inspect_cmd->footer(
      "Examples:\n  placelab inspect inception.json\n  placelab inspect --model resnet50 --json\n"
      "  placelab inspect --model resnet50:framework=pytorch --machine my-v100.yaml --device gpu:0");
  inspect_cmd->callback([in] {
    GraphSource src = load_graph_source(in->graph, in->model);
    if (!in->device.empty() && in->machine.empty()) throw InputError("--device: needs --machine");
    nlohmann::json j = inspect_json(src);
    std::optional<CostSourceSummary> sources;
    std::unique_ptr<MachineSource> ms;
    Placement on_one;
    if (!in->machine.empty()) {
      ms = load_machine_source(in->machine);
      const Machine& m = ms->machine;
      const DeviceId device = inspect_device(m, in->device);
      on_one.assign(src.graph.num_ops(), device);
      check_measured_times(src.graph, m);
      sources = summarize_cost_sources(src.graph, *ms->cost, on_one);
      j["cost_sources"] = cost_sources_json(*sources, src.graph, m, on_one);
      j["cost_sources"]["machine"] = m.name;
      j["cost_sources"]["device"] = m.devices[device].name;
      j["cost_sources"]["cost_model"] = ms->cost->describe();
    }
    if (in->json) {
      std::cout << j.dump(2) << "\n";
      return;
    }
    print_inspect(j);
    if (sources) {
      fmt::print("\nevery op on {} of {} ({}): where each op's time comes from\n",
                 j["cost_sources"]["device"].get<std::string>(), ms->machine.name, ms->cost->describe());
      print_cost_sources(*sources);
    }
  });
}

}  // namespace

void add_models_commands(CLI::App& app) {
  auto* models_cmd = app.add_subcommand("models", "List the model zoo with its default settings");
  models_cmd->callback(run_models);
  add_export_command(app);
  add_import_command(app);
  add_inspect_command(app);
}

}  // namespace placelab::cli
