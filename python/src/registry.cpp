// The registries (learners, baselines, groupings, models, machine presets) as plain Python data,
// groupings and baseline placements of a graph, the problem description the neural learners see,
// and running a scenario as `placelab run` does.
#include <signal.h>

#include <optional>
#include <string>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.h"
#include "placelab/core/error.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/learners/grouping.h"
#include "placelab/learners/problem.h"
#include "placelab/learners/registry.h"
#include "placelab/models/zoo.h"
#include "run.h"
#include "scenario.h"
#include "sweep.h"

namespace placelab::python {
namespace {

py::dict option_dict(const OptionInfo& o) {
  py::dict d;
  d["key"] = o.key;
  d["kind"] = std::string(option_kind_name(o.kind));
  d["default"] = o.default_value;
  d["rule"] = o.rule;
  d["help"] = o.help;
  d["choices"] = o.choices;
  return d;
}

// What learner and baseline entries have alike: name, aliases, summary and paper.
template <typename Entry>
py::dict entry_dict(const Entry& e) {
  py::dict d;
  d["name"] = e.name;
  d["aliases"] = e.aliases;
  d["summary"] = e.summary;
  d["paper"] = e.paper;
  return d;
}

py::list learners() {
  py::list out;
  for (const LearnerEntry& e : learner_registry()) {
    py::dict d = entry_dict(e);
    py::list options;
    for (const OptionInfo& o : e.options) options.append(option_dict(o));
    d["options"] = options;
    d["policy_gradient"] = e.policy_gradient;
    d["needs_problem"] = e.needs_problem;
    d["needs_simulator"] = e.needs_simulator;
    d["places_ops"] = e.places_ops;
    out.append(d);
  }
  return out;
}

py::list baselines() {
  py::list out;
  for (const BaselineEntry& e : baseline_registry()) {
    py::dict d = entry_dict(e);
    d["argument"] = e.argument;
    out.append(d);
  }
  return out;
}

py::list zoo() {
  py::list out;
  for (const models::ModelInfo& info : models::model_zoo()) {
    py::dict d;
    d["name"] = info.name;
    d["description"] = info.description;
    py::list options;
    for (const models::ModelOption& o : info.options) {
      py::dict od;
      od["key"] = o.key;
      od["default"] = o.default_value;
      od["description"] = o.description;
      od["choices"] = o.choices;
      options.append(od);
    }
    d["options"] = options;
    out.append(d);
  }
  return out;
}

Grouping grouping_of(const cli::GraphSource& g, const std::string& name, int groups, int seed, int module_depth = 0) {
  GroupingOptions options;
  options.num_groups = groups;
  options.seed = seed;
  options.module_depth = module_depth;
  options.validate();
  return make_grouping(g.graph, name, options);
}

template <typename T>
py::array_t<T> to_array(const std::vector<T>& v) {
  py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

// The problem description, with the feature matrix in placement order (python/placelab/env.py).
struct PyProblem {
  PlacementProblem problem;
  std::vector<GroupId> group_of_op;
};

PyProblem describe(const GraphPtr& g, const std::string& grouping, int groups, int seed) {
  const Grouping gr = grouping_of(*g, grouping, groups, seed);
  PyProblem out;
  out.problem = describe_problem(g->graph, gr);
  out.group_of_op.assign(gr.group_of_op().begin(), gr.group_of_op().end());
  return out;
}

// group_feature_matrix is F × G column-major: the same memory as a G × F row-major array.
py::array_t<float> features(const PyProblem& p) {
  const nn::Matrix<float> f = group_feature_matrix<float>(p.problem, p.problem.topological_order);
  py::array_t<float> out({static_cast<py::ssize_t>(f.cols()), static_cast<py::ssize_t>(f.rows())});
  std::copy(f.data(), f.data() + f.size(), out.mutable_data());
  return out;
}

// Restores the process's SIGINT and SIGTERM handlers (Python's) when a scenario run ends: the run
// installs its own so that Ctrl-C stops it at the next batch with its checkpoints written.
class SignalGuard {
 public:
  SignalGuard() {
    sigaction(SIGINT, nullptr, &int_);
    sigaction(SIGTERM, nullptr, &term_);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &int_, nullptr);
    sigaction(SIGTERM, &term_, nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  struct sigaction int_ {};
  struct sigaction term_ {};
};

// One scenario run without the GIL, Python's signal handlers restored after it.
cli::RunOutcome run_released(const cli::Scenario& s, const cli::RunOptions& o) {
  py::gil_scoped_release release;
  const SignalGuard guard;
  return cli::run_scenario(s, o);
}

// A run stopped by Ctrl-C (its checkpoints written) ends the Python call with KeyboardInterrupt.
[[noreturn]] void raise_stopped(const std::string& message) {
  PyErr_SetString(PyExc_KeyboardInterrupt, message.c_str());
  throw py::error_already_set();
}

std::filesystem::path run(const std::filesystem::path& scenario, const std::optional<std::filesystem::path>& output,
                          std::optional<int> seeds, bool resume, bool progress) {
  const cli::Scenario s = cli::read_scenario(scenario);
  cli::RunOptions o;
  o.seeds = seeds;
  o.resume = resume;
  if (output) o.output = *output;
  o.progress = progress;
  const cli::RunOutcome outcome = run_released(s, o);
  if (outcome.stopped)
    raise_stopped("placelab.run stopped by a signal; its checkpoints are in " + outcome.folder.string() +
                  ": continue with resume=True");
  return outcome.folder;
}

// `placelab sweep` in this process: the scenarios one after another (a Python host cannot start
// itself as `placelab` workers), finished ones skipped, the same summary tables.
std::filesystem::path sweep(const std::vector<std::filesystem::path>& files, std::optional<int> seeds,
                            const std::string& name, bool progress) {
  const std::vector<cli::Scenario> scenarios = cli::read_sweep(files, name);  // all validated before anything runs
  const std::filesystem::path dir = std::filesystem::path("results") / ("sweep-" + name);
  for (const cli::Scenario& s : scenarios) {
    if (cli::scenario_finished(s, cli::sweep_seeds(s, seeds))) continue;
    cli::RunOptions o;
    o.seeds = seeds;
    o.resume = true;
    o.progress = progress;
    if (run_released(s, o).stopped)
      raise_stopped("placelab.sweep stopped by a signal in " + s.name + "; the same call resumes it");
  }
  std::filesystem::create_directories(dir);
  cli::write_sweep_tables(dir, name, scenarios);
  return dir;
}

}  // namespace

void bind_registry(py::module_& m) {
  m.def("learners", &learners,
        "The learner registry: one dict per learner with name, aliases, summary, paper, options (key, kind, "
        "default, rule, help, choices), policy_gradient, needs_problem, needs_simulator and places_ops.");
  m.def("baselines", &baselines, "The baseline registry: one dict per baseline with name, aliases, summary, paper, argument.");
  m.def(
      "groupings", [] { return std::vector<std::string>(grouping_names().begin(), grouping_names().end()); },
      "The grouping names grouping() accepts.");
  m.def("models", &zoo, "The model zoo: one dict per model with name, description and options.");
  m.def("machines", &preset_names, "The machine preset names, sorted.");

  m.def(
      "grouping",
      [](const GraphPtr& g, const std::string& name, int groups, int seed, int module_depth) {
        const Grouping gr = grouping_of(*g, name, groups, seed, module_depth);
        return to_array(std::vector<GroupId>(gr.group_of_op().begin(), gr.group_of_op().end()));
      },
      py::arg("graph"), py::arg("name") = "scope_units", py::arg("groups") = 256, py::arg("seed") = 1,
      py::arg("module_depth") = 0,
      "Group of each op (uint32 array; groups numbered densely in the order of their smallest op) under the "
      "grouping `name` (groupings() lists them). `groups` and `seed` are METIS's and Scotch's; `module_depth` "
      "the module grouping's (0: whole module paths).");

  m.def(
      "baseline",
      [](const GraphPtr& g, const MachinePtr& mach, const std::string& spec, uint64_t seed) {
        return placement_array(cli::resolve_placement(spec, *g, *mach, seed));
      },
      py::arg("graph"), py::arg("machine"), py::arg("spec"), py::arg("seed") = 1,
      "The op placement (int32 array) of a baseline rule, \"name\" or \"name:argument\" (baselines() lists "
      "them: single_gpu, expert, metis, heft, random:<seed>, ...) or of a placement JSON file, as the command "
      "line's --placement resolves it. `seed` feeds the randomised baselines.");

  py::class_<PyProblem>(m, "Problem",
                        "The graph seen through a grouping, as the neural learners see it (learners/problem.h).")
      .def_property_readonly("num_groups", [](const PyProblem& p) { return p.problem.num_groups; })
      .def_property_readonly("group_of_op", [](const PyProblem& p) { return to_array(p.group_of_op); },
                             "Group of each op (uint32 array).")
      .def_property_readonly("group_names", [](const PyProblem& p) { return p.problem.group_names; })
      .def_property_readonly("group_size", [](const PyProblem& p) { return to_array(p.problem.group_size); },
                             "Ops per group (uint32 array).")
      .def_property_readonly("op_types", [](const PyProblem& p) { return p.problem.op_types; },
                             "The op-type vocabulary, sorted.")
      .def_property_readonly("order", [](const PyProblem& p) { return to_array(p.problem.topological_order); },
                             "Group ids in placement order: by the earliest topological position of their ops.")
      .def_property_readonly("features", &features,
                             "float32 array, one row per group in `order`: group_feature_matrix's F = 2G + T + 8 "
                             "features (docs/learners.md, docs/python.md).");
  m.def("describe_problem", &describe, py::arg("graph"), py::arg("grouping") = "scope_units", py::arg("groups") = 256,
        py::arg("seed") = 1, "The graph seen through a grouping (a Problem).");

  m.def("run", &run, py::arg("scenario"), py::arg("output") = py::none(), py::arg("seeds") = py::none(),
        py::arg("resume") = false, py::arg("progress") = false,
        "Runs a scenario file as `placelab run` does (docs/scenarios.md) and returns its output folder "
        "(summary.json, curve.csv, best_placement.json, report.md, ...). `output` replaces the scenario's "
        "folder, `seeds` N runs seeds 1..N, `resume` continues a stopped run, `progress` draws the progress "
        "bar on stderr. Raises InputError for a bad scenario; KeyboardInterrupt when Ctrl-C stopped it "
        "(checkpoints written).");
  m.def("sweep", &sweep, py::arg("scenarios"), py::arg("seeds") = py::none(), py::arg("name") = "sweep",
        py::arg("progress") = false,
        "Runs scenario files as `placelab sweep` does, one after another in this process (the command line "
        "runs them side by side in worker processes: use it, or mpirun, for parallel sweeps). Every file is "
        "validated first; a scenario already finished with these seeds is skipped, a stopped one resumes. "
        "Writes results/sweep-<name>/summary.md and .csv (relative to the working directory) and returns that "
        "folder. `seeds` N runs seeds 1..N of every scenario.");
}

}  // namespace placelab::python
