// The critical path of one simulated step: the chain of ops, copies and waits that set its length.
// Read backwards from the event that finished last, each event started when the one before it on
// the chain let it — its last input arrived (a producer on its device, or the copy that brought the
// input), a compute slot it waited for was freed, or a link direction its copy waited for was
// released. A search that shortens the step has to shorten or remove a link of this chain; the
// learner `critpath` (learners/critpath.h) proposes its moves from it, and `placelab simulate
// --critical-path` prints it.
//
//   SimResult r = sim.simulate(placement, SimOptions{.record_timeline = true});
//   for (const CriticalLink& c : critical_path(graph, sim, r)) ... r.timeline[c.event] ...
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/sim/simulator.h"

namespace placelab {

// One event of the critical path and why it did not start earlier.
struct CriticalLink {
  enum class Wait : uint8_t {
    kStart,   // the first event: it started at t = 0 (or nothing on the chain explains its start)
    kInput,   // it started when the previous event of the path (its input: an op or a copy) finished
    kDevice,  // it was ready earlier and waited for a compute slot, freed by the previous event
    kLink,    // a copy that waited for a link direction held by the previous event (another copy)
  };
  std::size_t event = 0;  // index into SimResult::timeline
  Wait wait = Wait::kStart;
  double waited_s = 0;    // kDevice, kLink: how long it was ready before it started; else 0
};

// The critical path of `result`, a simulation by `sim` of `graph` with SimOptions::record_timeline,
// in time order (the first event starts the step, the last finishes it). Empty when the timeline is
// empty. Every link's event starts exactly when its predecessor on the path finished, so the path
// accounts for the whole step: Σ (end − start) over its events plus the gaps is the step time.
std::vector<CriticalLink> critical_path(const OpGraph& graph, const Simulator& sim, const SimResult& result);

}  // namespace placelab
