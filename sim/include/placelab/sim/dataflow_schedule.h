// A TensorFlow (dataflow) step whose ops' devices are chosen while the simulator runs it, for the
// list schedulers (HEFT, m-ETF, m-SCT): their schedule is the simulator's own, so the makespan
// each predicts is the step Simulator::simulate reports for its placement, to the bit.
//
// TensorFlow sends a tensor when its producer finishes, to every device that reads it, so the
// simulator needs a reader's device when its first producer finishes: that is when it asks. A
// source (no inputs) is asked for at time 0. The decider sees the step as it stands — the time,
// what is decided, the memory in use, the links' bookings — and estimates each candidate:
//
//   struct Earliest : DataflowDecider {
//     void decide(std::span<const OpId> ops, DataflowStep& step) override {
//       for (OpId op : ops) step.decide(op, /* the d with the least step.estimate(op, d).end_s */);
//     }
//   } earliest;
//   DataflowRun run = simulate_deciding(simulator, earliest);
//   run.result.step_time_s == simulator.simulate(run.placement).step_time_s
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "placelab/graph/placement.h"
#include "placelab/sim/simulator.h"

namespace placelab {

// Where an op would fall on a device, as far as the running step can tell (docs/simulator.md,
// "Choosing devices while the step runs"): when its inputs would be there, when the device's plan
// has a slot for it, its end, and the bytes of the input copies it would receive there.
struct DataflowEstimate {
  double ready_s = 0;
  double start_s = 0;
  double end_s = 0;
  int64_t copy_bytes = 0;
};

// The running step, as a decider may read and change it.
class DataflowStep {
 public:
  virtual ~DataflowStep() = default;
  virtual double now_s() const = 0;
  // The producer whose finish asks for the current decisions; none at time 0.
  virtual std::optional<OpId> finishing() const = 0;
  virtual bool decided(OpId op) const = 0;
  // The effective device of a decided op (soft placement applied).
  virtual DeviceId device(OpId op) const = 0;
  // Bytes in use on `d` now: the persistent bytes of the ops decided there and the live tensors.
  virtual int64_t memory_in_use(DeviceId d) const = 0;
  // `op` (undecided) on `d` (soft placement applied). Exact for the producer that is finishing
  // (its copy booked on the links as they stand); a producer still to run counts at its planned
  // or running end plus an unloaded copy; one not yet decided counts at its device and end in the
  // hint run, if any (simulate_deciding), else as ready now. The device's
  // plan books each decided op into the earliest gap of a compute slot after its inputs (HEFT's
  // insertion policy).
  virtual DataflowEstimate estimate(OpId op, DeviceId d) const = 0;
  // Fixes `op`'s device (soft placement applied) and books it in `d`'s plan. `op` must be
  // undecided; any undecided op may be decided early.
  virtual void decide(OpId op, DeviceId d) = 0;
};

// A list scheduler's choices, called by the running step.
class DataflowDecider {
 public:
  virtual ~DataflowDecider() = default;
  // `ops` (increasing ids, all undecided) need a device now: decide every one of them, in the
  // order the scheduler's rule takes them.
  virtual void decide(std::span<const OpId> ops, DataflowStep& step) = 0;
};

// One step run by simulate_deciding: the chosen (effective) devices, each op's end, the result.
struct DataflowRun {
  Placement placement;
  std::vector<double> end_s;
  SimResult result;
};

// Runs one step of `simulator`'s dataflow graph, asking `decider` for devices as the step needs
// them. Simulator::simulate(run.placement) gives run.result. `hint` (an earlier run of the same
// graph, or none) is what estimates assume of producers not decided yet. Throws InputError on an
// eager graph (those use EagerSchedule) and Error when the decider leaves an op it was asked for
// undecided.
DataflowRun simulate_deciding(const Simulator& simulator, DataflowDecider& decider, const DataflowRun* hint = nullptr);

}  // namespace placelab
