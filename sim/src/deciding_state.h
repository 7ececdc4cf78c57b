// What the dataflow event loop keeps besides its own state when it chooses devices as the step
// runs (simulate_deciding, docs/simulator.md "Choosing devices while the step runs"): the decider,
// the ready lists and the plan its estimates read. Private to sim/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "placelab/sim/dataflow_schedule.h"
#include "event_state.h"

namespace placelab {
namespace sim_detail {

// What a step that chooses its devices as it runs (simulate_deciding) keeps besides the event
// loop's state: the decider, per-device ready lists (their sizes are unknown until the end, so
// not segments of one array), and the plan the estimates read.
struct Deciding {
  DataflowDecider* decider = nullptr;
  const DataflowRun* hint = nullptr;
  std::vector<std::vector<ReadyOp>> ready;  // per device: its ready queue
  std::vector<uint32_t> ready_head;         // per device: the queue's first entry
  std::vector<double> planned_end_s;        // per op: its planned end, then its real one once started
  // Per compute slot: the intervals the plan books on it, sorted and disjoint. A decided op goes
  // into the earliest gap after its inputs that is long enough (HEFT's insertion policy): the ops
  // decided on a device need not run in the order they were decided, and one decided long before
  // its inputs arrive must not make the device look busy until then.
  // With a hint, the plan starts with every op where and when the hint ran it, and an op's booking
  // moves when it is decided: so a device the hint keeps busy looks busy.
  std::vector<std::vector<std::pair<double, double>>> plan;
  std::vector<uint32_t> hinted_slot;        // per op: the slot holding its hint booking; kNoTransfer: none
  std::vector<uint8_t> done;                // per op: finished
  std::vector<uint8_t> asked;               // per op: in the current batch
  std::vector<OpId> batch;
  uint32_t finishing = kNoTransfer;         // the op whose finish asks; kNoTransfer at time 0
  double now = 0;
};

// The earliest t >= ready with [t, t + duration) free among `booked` (sorted, disjoint).
inline double earliest_gap(const std::vector<std::pair<double, double>>& booked, double ready, double duration) {
  auto it = std::upper_bound(booked.begin(), booked.end(), ready,
                             [](double t, const std::pair<double, double>& b) { return t < b.second; });
  double t = ready;
  for (; it != booked.end(); ++it) {
    if (it->first - t >= duration) return t;
    t = std::max(t, it->second);
  }
  return t;
}

}  // namespace sim_detail
}  // namespace placelab
