// HEFT's device choice, shared by its two forms (eager: baselines.cpp; dataflow: dataflow_list.cpp):
// the device where an op finishes first, equal finishes going to the device of its largest input.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "placelab/graph/op_graph.h"

namespace placelab::detail {

// The device of op's largest placed data input, -1 when none is placed. `device_of(src)` is the
// device of a placed op, -1 for one not placed yet. Symmetric machines give many equal finish
// times, and breaking them by device id would scatter chains for nothing.
template <typename DeviceOf>
int largest_input_device(const OpGraph& graph, OpId op, DeviceOf device_of) {
  int preferred = -1;
  int64_t preferred_bytes = -1;
  graph.for_each_in_edge(op, [&](OpId src, const Tensor& t) {
    if (t.control || t.bytes <= preferred_bytes) return;
    if (const int d = device_of(src); d >= 0) {
      preferred_bytes = t.bytes;
      preferred = d;
    }
  });
  return preferred;
}

// The device among `devices` with the least finish_of(d); finishes within 1e-12 (relative) of each
// other are equal, and among equals `preferred` wins, else the first seen.
template <typename Devices, typename FinishOf>
DeviceId earliest_finishing(const Devices& devices, int preferred, FinishOf finish_of) {
  double best_finish = std::numeric_limits<double>::infinity();
  DeviceId best = *devices.begin();
  for (DeviceId d : devices) {
    const double f = finish_of(d);
    const bool tie = std::isfinite(best_finish) && std::abs(f - best_finish) <= 1e-12 * std::max(1.0, best_finish);
    if ((f < best_finish && !tie) || (tie && d == preferred && best != preferred)) {
      best_finish = f;
      best = d;
    }
  }
  return best;
}

}  // namespace placelab::detail
