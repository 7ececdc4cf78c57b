// PYBIND11_MODULE for `placelab._placelab`, and the exception mapping: placelab::InputError →
// placelab.InputError (a ValueError), any other placelab::Error → placelab.Error (a RuntimeError).
// The messages are the C++ ones: "k80x4.yaml:12: devices[2].memory_bytes = -4: must be > 0".
#include <Python.h>

#include "bindings.h"
#include "placelab/core/error.h"

namespace placelab::python {

void bind_errors(py::module_& m) {
  // Created once and kept for the process's life, as pybind11's register_exception does.
  static py::handle error = PyErr_NewExceptionWithDoc(
      "placelab.Error", "A placelab error that is not bad input: a broken invariant (please report it).",
      PyExc_RuntimeError, nullptr);
  static py::handle input_error = PyErr_NewExceptionWithDoc(
      "placelab.InputError",
      "Bad input: a file, field or value. The message names the file, line, field, value and the rule it broke.",
      py::make_tuple(error, py::handle(PyExc_ValueError)).release().ptr(), nullptr);
  m.add_object("Error", error);
  m.add_object("InputError", input_error);
  // Translators run latest first, so InputError is tried before its base Error.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(input_error.ptr(), e.what());
    }
  });
}

}  // namespace placelab::python

PYBIND11_MODULE(_placelab, m) {
  m.doc() =
      "placelab: device placement of deep-learning training graphs, from Python. Simulate training "
      "steps of a graph under placements on a machine, build groupings and baseline placements, run "
      "scenarios, and train placement agents on a Gymnasium-style environment (docs/python.md).";
  m.attr("__version__") = PLACELAB_VERSION;
  placelab::python::bind_errors(m);
  placelab::python::bind_graph_machine(m);
  placelab::python::bind_simulator(m);
  placelab::python::bind_registry(m);
}
