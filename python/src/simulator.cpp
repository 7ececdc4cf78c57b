// placelab.Simulator, its Result, and lower_bound: the simulator's API with numpy arrays in and
// out. simulate_batch releases the GIL and runs Simulator::simulate_batch over C++ threads.
#include <string>

#include <pybind11/stl.h>

#include "bindings.h"
#include "placelab/core/error.h"
#include "placelab/sim/bounds.h"

namespace placelab::python {
namespace {

// One step's outcome: SimResult with the machine it ran on, for names in oom_message.
struct PyResult {
  SimResult result;
  MachinePtr machine;
};

// One field of every per-device or per-link record of a result, as a numpy array.
template <typename T, typename Records, typename F>
py::array_t<T> column(const Records& records, F field) {
  py::array_t<T> out(static_cast<py::ssize_t>(records.size()));
  T* data = out.mutable_data();
  for (std::size_t i = 0; i < records.size(); ++i) data[i] = static_cast<T>(field(records[i]));
  return out;
}

using IntArray2d = DeviceIdArray;

// Copies the rows of `placements` into sim.batch (reusing its vectors), checking every entry.
void fill_batch(PySimulator& s, const IntArray2d& placements) {
  if (placements.ndim() != 2) {
    std::string msg = "placements: a 2-D array (one placement per row), got ";
    msg += std::to_string(placements.ndim());
    msg += " dimensions";
    throw InputError(msg);
  }
  const auto rows = static_cast<std::size_t>(placements.shape(0));
  const auto cols = static_cast<std::size_t>(placements.shape(1));
  const std::size_t ops = s.sim.num_ops(), devices = s.machine->machine.num_devices();
  if (cols != ops) {
    std::string msg = "placements: rows have ";
    msg += std::to_string(cols);
    msg += " entries: must have one per op (";
    msg += std::to_string(ops);
    msg += ")";
    throw InputError(msg);
  }
  s.batch.resize(rows);
  const int64_t* data = placements.data();
  for (std::size_t k = 0; k < rows; ++k) {
    Placement& p = s.batch[k];
    p.resize(ops);
    copy_device_ids(data + k * ops, ops, devices, p.data(), [k](std::size_t i) {
      std::string where = "placements[";
      where += std::to_string(k);
      where += ", ";
      where += std::to_string(i);
      where += "]";
      return where;
    });
  }
}

py::tuple simulate_batch(PySimulator& s, const py::object& placements_object, int threads) {
  const IntArray2d placements = device_id_array(placements_object, "placements");
  // The answers are copied out while the lock is held: s.results is the Simulator's, and another
  // Python thread's call refills it as soon as the lock is free (reading it after the lock gave
  // other calls' results, or zeros).
  std::vector<double> steps;
  std::vector<uint8_t> ooms;
  {
    py::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(s.mutex);
    {
      // The array is read without the GIL: the caller's reference keeps it alive, and numpy
      // arrays passed in are not resized under us (a concurrent write would be the caller's race).
      py::gil_scoped_acquire acquire;
      fill_batch(s, placements);
    }
    const std::size_t rows = s.batch.size();
    s.results.resize(rows);
    s.sim.simulate_batch(s.batch, std::span<SimResult>(s.results.data(), rows), threads);
    steps.resize(rows);
    ooms.resize(rows);
    for (std::size_t k = 0; k < rows; ++k) {
      steps[k] = s.results[k].step_time_s;
      ooms[k] = s.results[k].oom ? 1 : 0;
    }
  }
  const auto rows = static_cast<py::ssize_t>(steps.size());
  py::array_t<double> step(rows);
  py::array_t<bool> oom(rows);
  std::copy(steps.begin(), steps.end(), step.mutable_data());
  std::transform(ooms.begin(), ooms.end(), oom.mutable_data(), [](uint8_t x) { return x != 0; });
  return py::make_tuple(step, oom);
}

void bind_result(py::module_& m) {
  py::class_<PyResult>(m, "Result", "One simulated training step (docs/simulator.md). Arrays are by device id.")
      .def_property_readonly("step_time_s", [](const PyResult& r) { return r.result.step_time_s; },
                             "Seconds until the last op or transfer finishes.")
      .def_property_readonly("oom", [](const PyResult& r) { return r.result.oom; },
                             "True when some device's peak memory exceeds its capacity.")
      .def_property_readonly(
          "oom_device",
          [](const PyResult& r) -> std::optional<int> {
            if (!r.result.oom) return std::nullopt;
            return r.result.oom_device;
          },
          "The device id with the largest excess, or None.")
      .def_property_readonly("oom_excess_bytes", [](const PyResult& r) { return r.result.oom_excess_bytes; },
                             "By how many bytes that device exceeds its capacity (0 when not oom).")
      .def_property_readonly("oom_message", [](const PyResult& r) { return oom_message(r.result, r.machine->machine); },
                             "\"out of memory on gpu:1: ...\" or \"\".")
      .def_property_readonly("transfers", [](const PyResult& r) { return r.result.transfers; },
                             "Number of cross-device sends.")
      .def_property_readonly(
          "busy_s", [](const PyResult& r) { return column<double>(r.result.devices, [](const DeviceStats& d) { return d.busy_s; }); },
          "Seconds of op work per device (float64 array).")
      .def_property_readonly(
          "peak_memory_bytes",
          [](const PyResult& r) {
            return column<int64_t>(r.result.devices, [](const DeviceStats& d) { return d.peak_memory_bytes; });
          },
          "Persistent + peak transient bytes per device (int64 array).")
      .def_property_readonly(
          "persistent_bytes",
          [](const PyResult& r) {
            return column<int64_t>(r.result.devices, [](const DeviceStats& d) { return d.persistent_bytes; });
          },
          "Persistent bytes (variables, optimizer slots) per device (int64 array).")
      .def_property_readonly(
          "device_ops",
          [](const PyResult& r) { return column<int32_t>(r.result.devices, [](const DeviceStats& d) { return d.num_ops; }); },
          "Ops run per device, after soft placement (int32 array).")
      .def_property_readonly(
          "link_bytes",
          [](const PyResult& r) { return column<int64_t>(r.result.links, [](const LinkStats& l) { return l.bytes; }); },
          "Bytes carried per link direction (int64 array).")
      .def_property_readonly(
          "link_busy_s",
          [](const PyResult& r) { return column<double>(r.result.links, [](const LinkStats& l) { return l.busy_s; }); },
          "Seconds each link direction was held (float64 array).")
      .def("__repr__", [](const PyResult& r) {
        std::string s = "<placelab.Result step_time_s=";
        s += std::to_string(r.result.step_time_s);
        s += r.result.oom ? " oom>" : ">";
        return s;
      });
}

void bind_simulator_class(py::module_& m) {
  py::class_<PySimulator>(m, "Simulator",
                          "A graph prepared for simulation on a machine: Simulator(graph, machine). Keeps both alive. "
                          "simulate() serialises on the GIL; simulate_batch() runs C++ threads without it.")
      .def(py::init([](GraphPtr g, MachinePtr mach) { return std::make_unique<PySimulator>(std::move(g), std::move(mach)); }),
           py::arg("graph"), py::arg("machine"),
           "Prepares the graph for the machine's cost model. Raises InputError for a cyclic graph.")
      .def(
          "simulate",
          [](PySimulator& s, const py::object& placement) {
            const Placement p = to_placement(device_id_array(placement, "placement"), s.sim.num_ops(),
                                             s.machine->machine.num_devices());
            PyResult out{{}, s.machine};
            {
              // The mutex is only ever awaited without the GIL (simulate_batch takes the GIL
              // while holding it), so the two cannot deadlock.
              py::gil_scoped_release release;
              const std::lock_guard<std::mutex> lock(s.mutex);
              s.sim.simulate(p, s.workspace, out.result);
            }
            return out;
          },
          py::arg("placement"),
          "Simulates one step. `placement`: one device id per op (an integer array or sequence). Returns a "
          "Result. Raises InputError for a wrong length or a device id out of range.")
      .def("simulate_batch", &simulate_batch, py::arg("placements"), py::arg("threads") = 0,
           "Simulates every row of `placements` (a 2-D integer array, one placement per row) over `threads` "
           "C++ threads (0: one per hardware thread), with the GIL released. Returns (step_time_s float64 "
           "array, oom bool array), identical to simulate() row by row whatever `threads`. Every row is checked "
           "before any is simulated.")
      .def_property_readonly("num_ops", [](const PySimulator& s) { return s.sim.num_ops(); })
      .def_property_readonly("graph", [](const PySimulator& s) { return s.graph; })
      .def_property_readonly("machine", [](const PySimulator& s) { return s.machine; })
      .def(
          "op_time_s", [](const PySimulator& s, OpId op, DeviceId device) { return s.sim.op_time_s(op, device); },
          py::arg("op"), py::arg("device"), "Seconds op `op` takes on `device`, as the cost model priced it.");
}

void bind_bounds(py::module_& m) {
  py::class_<StepLowerBound>(m, "LowerBound", "No placement of the graph on the machine has a shorter step.")
      .def_readonly("step_s", &StepLowerBound::step_s, "max(critical_path_s, work_s), seconds.")
      .def_readonly("critical_path_s", &StepLowerBound::critical_path_s,
                    "Longest path with every op on its fastest device and free transfers, seconds.")
      .def_readonly("work_s", &StepLowerBound::work_s, "All work over all compute slots, seconds.")
      .def_readonly("slots", &StepLowerBound::slots)
      .def_readonly("persistent_bytes", &StepLowerBound::persistent_bytes)
      .def_readonly("memory_bytes", &StepLowerBound::memory_bytes)
      .def_readonly("memory_feasible", &StepLowerBound::memory_feasible,
                    "The persistent bytes fit in all devices' memory together (necessary, not sufficient).")
      .def("__repr__", [](const StepLowerBound& b) {
        std::string s = "<placelab.LowerBound step_s=";
        s += std::to_string(b.step_s);
        s += ">";
        return s;
      });

  m.def(
      "lower_bound",
      [](const GraphPtr& g, const PySimulator& s) {
        if (g->graph.num_ops() != s.sim.num_ops()) {
          std::string msg = "lower_bound: the graph has ";
          msg += std::to_string(g->graph.num_ops());
          msg += " ops but the simulator's has ";
          msg += std::to_string(s.sim.num_ops());
          msg += ": pass the graph the simulator was built from";
          throw InputError(msg);
        }
        return step_lower_bound(g->graph, s.sim);
      },
      py::arg("graph"), py::arg("simulator"),
      "The step-time lower bound over every placement of `graph` on the simulator's machine (sim/bounds.h).");
}

}  // namespace

void bind_simulator(py::module_& m) {
  bind_result(m);
  bind_simulator_class(m);
  bind_bounds(m);
}

}  // namespace placelab::python
