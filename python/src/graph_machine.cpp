// placelab.Graph (a zoo model, a graph JSON file or an ONNX import) and placelab.Machine (a
// preset, a machine YAML or a calibrated machine file), loaded by the command line's own code.
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.h"
#include "placelab/core/error.h"
#include "placelab/graph/io.h"
#include "placelab/models/onnx_import.h"

namespace placelab::python {

DeviceIdArray device_id_array(const py::handle& object, const std::string& what) {
  py::array a = py::array::ensure(object);
  if (!a) throw InputError(what + ": must be an array of device ids");
  const char kind = a.dtype().kind();
  if (kind == 'f') {
    const auto values = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
    const double* v = values.data();
    for (py::ssize_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(v[i]) || v[i] != std::floor(v[i])) {
        std::string msg = what + "[" + std::to_string(i) + "] = ";
        msg += py::str(py::float_(v[i])).cast<std::string>();
        msg += ": must be a whole device id";
        throw InputError(msg);
      }
  } else if (kind != 'i' && kind != 'u') {
    throw InputError(what + ": must be an array of integer device ids, not of dtype " +
                     py::str(a.dtype()).cast<std::string>());
  }
  return DeviceIdArray::ensure(a);
}

Placement to_placement(const DeviceIdArray& array,
                       std::size_t num_ops, std::size_t num_devices) {
  if (array.ndim() != 1) {
    std::string msg = "placement: a 1-D array of one device per op, got ";
    msg += std::to_string(array.ndim());
    msg += " dimensions";
    throw InputError(msg);
  }
  const auto n = static_cast<std::size_t>(array.shape(0));
  if (n != num_ops)
    check_placement(Placement(n), num_ops, num_devices, "placement");  // throws with the sizes
  Placement out(n);
  copy_device_ids(array.data(), n, num_devices, out.data(), [](std::size_t i) {
    std::string where = "placement: placement[";
    where += std::to_string(i);
    where += "]";
    return where;
  });
  return out;
}

void copy_device_ids(const int64_t* ids, std::size_t n, std::size_t num_devices, DeviceId* out,
                     const std::function<std::string(std::size_t)>& where) {
  for (std::size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || static_cast<uint64_t>(ids[i]) >= num_devices) {
      std::string msg = where(i);
      msg += " = ";
      msg += std::to_string(ids[i]);
      msg += ": must be a device id < ";
      msg += std::to_string(num_devices);
      throw InputError(msg);
    }
    out[i] = static_cast<DeviceId>(ids[i]);
  }
}

py::array_t<int32_t> placement_array(std::span<const DeviceId> placement) {
  py::array_t<int32_t> out(static_cast<py::ssize_t>(placement.size()));
  int32_t* data = out.mutable_data();
  for (std::size_t i = 0; i < placement.size(); ++i) data[i] = placement[i];
  return out;
}

namespace {

// Throws InputError unless `op` is an op of `graph` and `device` a device of `machine`.
void check_op_and_device(const OpGraph& graph, const Machine& machine, OpId op, DeviceId device) {
  if (op >= graph.num_ops()) throw InputError("op = " + std::to_string(op) + ": must be < " + std::to_string(graph.num_ops()));
  if (device >= machine.num_devices())
    throw InputError("device = " + std::to_string(device) + ": must be < " + std::to_string(machine.num_devices()));
}

GraphPtr graph_from_onnx(const std::filesystem::path& path, int64_t batch, const std::string& optimizer,
                         const std::map<std::string, int64_t>& dims) {
  models::OnnxImportOptions options;
  options.batch = batch;
  options.dim_values = dims;
  auto opt = models::optimizer_from_name(optimizer);
  if (!opt) {
    std::string msg = "optimizer = ";
    msg += optimizer;
    msg += ": must be sgd, momentum, rmsprop or adam";
    throw InputError(msg);
  }
  options.optimizer = *opt;
  models::OnnxImportReport report;
  auto out = std::make_shared<cli::GraphSource>();
  out->graph = models::import_onnx(path, options, &report);
  out->label = path.filename().string();
  out->parameters = report.stats.parameters;
  return out;
}

std::vector<std::string> op_names(const cli::GraphSource& g) {
  std::vector<std::string> out;
  out.reserve(g.graph.num_ops());
  for (OpId i = 0; i < g.graph.num_ops(); ++i) out.push_back(g.graph.op(i).name);
  return out;
}

std::vector<std::string> op_types(const cli::GraphSource& g) {
  std::vector<std::string> out;
  out.reserve(g.graph.num_ops());
  for (OpId i = 0; i < g.graph.num_ops(); ++i) out.push_back(g.graph.op(i).type);
  return out;
}

using MeasuredTimes = std::map<std::string, std::map<std::string, double>>;

MeasuredTimes measured_times(const cli::GraphSource& g) {
  MeasuredTimes out;
  for (OpId i = 0; i < g.graph.num_ops(); ++i) {
    const Op& op = g.graph.op(i);
    if (op.measured_s.empty()) continue;
    auto& times = out[op.name];
    for (const MeasuredTime& t : op.measured_s) times[t.device] = t.time_s;
  }
  return out;
}

// A copy of `g` whose named ops carry `times` (replacing theirs; an empty map clears them).
GraphPtr with_measured_times(const cli::GraphSource& g, const MeasuredTimes& times) {
  auto out = std::make_shared<cli::GraphSource>(g);
  for (const auto& [name, by_key] : times) {
    std::optional<OpId> id = out->graph.find(name);
    if (!id) {
      std::string msg = "with_measured_times: op \"";
      msg += name;
      msg += "\": the graph has no op of this name";
      throw InputError(msg);
    }
    std::vector<MeasuredTime> list;
    for (const auto& [key, seconds] : by_key) list.push_back({key, seconds});
    out->graph.op(*id).measured_s = canonical_measured_times(std::move(list), name);
  }
  return out;
}

void bind_graph(py::module_& m) {
  py::class_<cli::GraphSource, GraphPtr>(m, "Graph",
                                         "A training-step op graph. Build one with Graph.from_model, Graph.from_json "
                                         "or Graph.from_onnx; it is immutable (with_measured_times returns a copy).")
      .def_static(
          "from_model",
          [](const std::string& spec) {
            return std::make_shared<cli::GraphSource>(cli::load_graph_source("", spec));
          },
          py::arg("spec"),
          "A zoo model by spec, \"name\" or \"name:key=value,...\" (placelab.models() lists them), e.g. "
          "\"inception_v3:batch=32\". Raises InputError for an unknown model, key or value.")
      .def_static(
          "from_json",
          [](const std::filesystem::path& path) {
            return std::make_shared<cli::GraphSource>(cli::load_graph_source(path.string(), ""));
          },
          py::arg("path"), "A graph JSON file (docs/formats.md). Raises InputError naming file:line and field.")
      .def_static("from_onnx", &graph_from_onnx, py::arg("path"), py::arg("batch") = 0, py::arg("optimizer") = "sgd",
                  py::arg("dims") = std::map<std::string, int64_t>{},
                  "An ONNX model imported as a training graph (docs/onnx.md): `batch` examples per step (0 keeps "
                  "the file's), optimizer sgd | momentum | rmsprop | adam, `dims` the sizes of symbolic dimensions "
                  "by name (as `placelab import --dim NAME=SIZE`), e.g. {\"sequence\": 128}.")
      .def_property_readonly("num_ops", [](const cli::GraphSource& g) { return g.graph.num_ops(); }, "Number of ops.")
      .def_property_readonly("num_edges", [](const cli::GraphSource& g) { return g.graph.num_edges(); },
                             "Number of edges (data and control).")
      .def_property_readonly("label", [](const cli::GraphSource& g) { return g.label; },
                             "The file name or the canonical model spec.")
      .def_property_readonly(
          "parameters",
          [](const cli::GraphSource& g) { return g.parameters; },
          "Trainable parameters, or None when unknown.")
      .def_property_readonly("op_names", &op_names, "The op names, by op id.")
      .def_property_readonly("op_types", &op_types, "The op types (\"Conv2D\", \"MatMul\", ...), by op id.")
      .def_property_readonly("total_flops", [](const cli::GraphSource& g) { return g.graph.total_flops(); },
                             "Floating-point operations of one step (a count).")
      .def_property_readonly("measured_times", &measured_times,
                             "The measured op times the graph carries: {op name: {device key: seconds}}, for the "
                             "ops that have any. A key is a device kind (\"cpu\", \"gpu\") or a device name "
                             "(\"gpu:1\"), which wins over its kind; they come before every cost model.")
      .def("with_measured_times", &with_measured_times, py::arg("times"),
           "A copy of this graph whose ops carry measured times: `times` maps op names to {device key: seconds} "
           "(one execution, launch overhead included), e.g. {\"fc/MatMul\": {\"gpu\": 0.0012, \"gpu:1\": "
           "0.0011}}. A key is a device kind (\"cpu\", \"gpu\") or a device name of the machine; a name wins "
           "over its kind. Replaces the named ops' times (an empty dict clears them) and keeps the others'. "
           "Raises InputError for an unknown op, an empty key or one with whitespace, or a time that is not "
           "finite, negative or over a day; a device name the machine lacks is an InputError when a Simulator "
           "is made. The graph itself is unchanged.")
      .def("__len__", [](const cli::GraphSource& g) { return g.graph.num_ops(); })
      .def("__repr__", [](const cli::GraphSource& g) {
        std::string s = "<placelab.Graph ";
        s += g.label;
        s += ": ";
        s += std::to_string(g.graph.num_ops());
        s += " ops>";
        return s;
      });
}

void bind_machine(py::module_& m) {
  py::class_<MachineSource, MachinePtr>(m, "Machine",
                                        "A machine with the cost model the simulator uses for it (analytic for presets "
                                        "and machine files, calibrated for calibrated machine files).")
      .def_static(
          "preset", [](const std::string& name) { return MachinePtr(load_machine_source(name)); }, py::arg("name"),
          "A built-in preset (placelab.machines() lists them), e.g. \"k80x4\".")
      .def_static(
          "from_yaml",
          [](const std::filesystem::path& path) {
            if (!std::filesystem::is_regular_file(path)) {
              std::string msg = path.string();
              msg += ": no such machine file";
              throw InputError(msg);
            }
            return MachinePtr(load_machine_source(path.string()));
          },
          py::arg("path"),
          "A machine YAML file (docs/machines.md) or a calibrated machine file written by `placelab calibrate` "
          "(docs/calibration.md). Raises InputError naming file:line and field.")
      .def_static(
          "load", [](const std::string& name_or_path) { return MachinePtr(load_machine_source(name_or_path)); },
          py::arg("name_or_path"), "A preset or a file, as the command line's --machine takes it.")
      .def_property_readonly("name", [](const MachineSource& s) { return s.machine.name; })
      .def_property_readonly("num_devices", [](const MachineSource& s) { return s.machine.num_devices(); })
      .def_property_readonly(
          "device_names",
          [](const MachineSource& s) {
            std::vector<std::string> out;
            for (const Device& d : s.machine.devices) out.push_back(d.name);
            return out;
          },
          "Device names by device id (\"cpu:0\", \"gpu:0\", ...).")
      .def_property_readonly(
          "device_kinds",
          [](const MachineSource& s) {
            std::vector<std::string> out;
            for (const Device& d : s.machine.devices) out.emplace_back(device_kind_name(d.kind));
            return out;
          },
          "\"cpu\" or \"gpu\" by device id.")
      .def_property_readonly(
          "memory_bytes",
          [](const MachineSource& s) {
            py::array_t<int64_t> out(static_cast<py::ssize_t>(s.machine.devices.size()));
            for (std::size_t d = 0; d < s.machine.devices.size(); ++d) out.mutable_at(d) = s.machine.devices[d].memory_bytes;
            return out;
          },
          "Memory capacity in bytes by device id.")
      .def_property_readonly("calibrated", [](const MachineSource& s) { return s.calibration != nullptr; },
                             "True for a calibrated machine file.")
      .def_property_readonly("cost_model", [](const MachineSource& s) { return s.cost->describe(); },
                             "The cost model in words.")
      .def(
          "op_cost",
          [](const MachineSource& s, const GraphPtr& g, OpId op, DeviceId device) {
            check_op_and_device(g->graph, s.machine, op, device);
            const CostLookup c = s.cost->lookup(g->graph.op(op), device);
            return py::make_tuple(c.time_s, std::string(cost_source_name(c.source)));
          },
          py::arg("graph"), py::arg("op"), py::arg("device"),
          "(seconds, source) of one execution of op `op` of `graph` on device `device` under this machine's cost "
          "model, launch overhead included; source is \"graph\" (a measured time in the graph), \"measured\" "
          "(a calibration's exact kernel), \"fit\" or \"analytic\" (docs/calibration.md).")
      .def(
          "transfer_time_s",
          [](const MachineSource& s, int64_t bytes, DeviceId src, DeviceId dst) {
            if (bytes < 0) throw InputError("bytes = " + std::to_string(bytes) + ": must be >= 0");
            if (src >= s.machine.num_devices() || dst >= s.machine.num_devices())
              throw InputError("device: must be a device id < " + std::to_string(s.machine.num_devices()));
            return s.cost->transfer_time_s(bytes, src, dst);
          },
          py::arg("bytes"), py::arg("src"), py::arg("dst"),
          "Seconds a copy of `bytes` from device `src` to `dst` holds its route under this machine's cost model "
          "(0 when src == dst).")
      .def("__repr__", [](const MachineSource& s) {
        std::string r = "<placelab.Machine ";
        r += s.machine.name;
        r += ": ";
        r += std::to_string(s.machine.num_devices());
        r += " devices>";
        return r;
      });
}

}  // namespace

void bind_graph_machine(py::module_& m) {
  bind_graph(m);
  bind_machine(m);
}

}  // namespace placelab::python
