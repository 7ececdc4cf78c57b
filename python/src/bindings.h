// The pieces of the `placelab._placelab` extension module (python/placelab/__init__.py re-exports
// it): each bind_* function adds one part of the API to the module. The Python objects hold the
// C++ objects the command line uses — a Graph is the CLI's GraphSource (graph, label, expert
// placement), a Machine its MachineSource (machine and cost model) — so both resolve names, files
// and placement rules by the same code. docs/python.md describes the API.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "inputs.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/machine_source.h"
#include "placelab/sim/simulator.h"

namespace placelab::python {

namespace py = pybind11;

using GraphPtr = std::shared_ptr<cli::GraphSource>;
using MachinePtr = std::shared_ptr<MachineSource>;

// A Simulator with what it borrows kept alive: the machine source owns the cost model the
// simulator points into. The workspace and the batch buffers are reused across calls, guarded by
// `mutex` because simulate_batch runs with the GIL released.
struct PySimulator {
  PySimulator(GraphPtr g, MachinePtr m) : graph(std::move(g)), machine(std::move(m)), sim(graph->graph, *machine->cost) {}
  GraphPtr graph;
  MachinePtr machine;
  Simulator sim;
  std::mutex mutex;
  SimWorkspace workspace;
  std::vector<Placement> batch;
  std::vector<SimResult> results;
};

// A 1-D integer array (or sequence) of one device per op, checked against the op and device
// counts; throws InputError "placement[3] = 7: must be a device id < 4" as check_placement does.
// Device ids as Python gave them, as int64: integer arrays and lists as they are; a float array only
// when every entry is a finite whole number (else InputError "<what>[i] = 1.5: must be a whole
// device id", never a silent truncation, nor NaN read as a huge negative id); anything else is
// an InputError naming `what`.
using DeviceIdArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
DeviceIdArray device_id_array(const py::handle& object, const std::string& what);
Placement to_placement(const DeviceIdArray& array,
                       std::size_t num_ops, std::size_t num_devices);
// Copies n device ids from Python integers into `out`, each checked to be < num_devices; on a bad
// one throws InputError "<where(i)> = 7: must be a device id < 4". One check for to_placement and
// simulate_batch's rows (`where` names the entry only when it is at fault).
void copy_device_ids(const int64_t* ids, std::size_t n, std::size_t num_devices, DeviceId* out,
                     const std::function<std::string(std::size_t)>& where);
// The placement as an int32 ndarray.
py::array_t<int32_t> placement_array(std::span<const DeviceId> placement);

void bind_errors(py::module_& m);
void bind_graph_machine(py::module_& m);
void bind_simulator(py::module_& m);
void bind_registry(py::module_& m);

}  // namespace placelab::python
