// A PyTorch (eager) step built op by op, as a list scheduler builds it. The eager model issues
// ops in program order and settles each from what was issued before it (docs/simulator.md, "Eager
// execution"), so a scheduler that decides the ops' devices in that order can ask the simulator's
// own rule where each would start and end: probe, then commit. The simulator's eager pass is the
// same commits in id order, so a schedule's makespan_s() is the step Simulator::simulate reports
// for the committed placement, to the bit (HEFT, m-ETF and m-SCT rely on it).
//
//   EagerSchedule s(simulator);
//   for (OpId op = 0; op < n; ++op) {
//     DeviceId best = ...;  // the device whose s.probe(op, d).end_s is least, say
//     s.commit(op, best);
//   }
//   s.makespan_s() == simulator.simulate(s.placement()).step_time_s
#pragma once

#include <cstdint>
#include <memory>

#include "placelab/graph/placement.h"
#include "placelab/sim/simulator.h"

namespace placelab {

class EagerSchedule {
 public:
  // `simulator` (which must outlive the schedule) must hold an eager graph; throws InputError
  // otherwise.
  explicit EagerSchedule(const Simulator& simulator);
  ~EagerSchedule();
  EagerSchedule(EagerSchedule&&) noexcept;
  EagerSchedule& operator=(EagerSchedule&&) noexcept;

  // Where an op's work falls: its start and end on its device, and the bytes of the input copies
  // its issue sends (those not already on the device).
  struct Times {
    double start_s = 0;
    double end_s = 0;
    int64_t copy_bytes = 0;
  };

  // `op`'s times were it committed now on `device` (soft placement applied); the schedule does not
  // change. The order rules of commit apply.
  Times probe(OpId op, DeviceId device);
  // Issues `op` on `device` (soft placement applied). Ops that do work are committed in program
  // order: `op` must be the lowest-id uncommitted op that is not a parameter. A parameter (an op
  // that only holds state: it is never issued) may be committed at any time before its first
  // reader; one not committed by then goes to its reader's device, committed with it (probe
  // assumes the same).
  Times commit(OpId op, DeviceId device);

  bool committed(OpId op) const;
  // Whether `op` only holds state (a parameter or buffer): no inputs, no work; never issued.
  bool is_parameter(OpId op) const;
  // The effective device of a committed op.
  DeviceId device(OpId op) const;
  // When the last op or copy committed so far ends.
  double makespan_s() const;
  // The devices committed so far (an uncommitted op holds device 0).
  const Placement& placement() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace placelab
