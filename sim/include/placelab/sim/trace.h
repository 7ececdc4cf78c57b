// Chrome trace (Perfetto / chrome://tracing) export of a simulated step: one track (thread) per
// device compute stream and one per link direction, complete events ("ph": "X") in µs.
#pragma once

#include <iosfwd>

#include "placelab/graph/op_graph.h"
#include "placelab/hwmodels/machine.h"
#include "placelab/sim/simulator.h"

namespace placelab {

// Writes the timeline of `result` (simulated with SimOptions::record_timeline) as Chrome trace
// JSON. Throws Error when the result holds no timeline.
void write_chrome_trace(const SimResult& result, const OpGraph& graph, const Machine& machine, std::ostream& out);

}  // namespace placelab
