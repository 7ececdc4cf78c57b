// The list schedulers (HEFT, m-ETF, m-SCT) on a dataflow (TensorFlow) graph: each decides its ops'
// devices inside the simulator's own run of the step (sim/dataflow_schedule.h), so the makespan it
// predicts is the simulated step of its placement. The three share everything but the rule that
// picks a device for the ops the step asks about (docs/learners.md, "List schedulers and the
// simulator").
#pragma once

#include <optional>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/learners/baselines.h"

namespace placelab::detail {

struct DataflowListRule {
  enum class Kind { kHeft, kEtf, kSct };
  Kind kind = Kind::kHeft;
  // The devices an op that is not soft-placed may go to; the first is where sources start.
  std::vector<DeviceId> candidates;
  // kHeft: skip devices whose persistent bytes would exceed their memory; kEtf, kSct: Baechi's
  // memory test on the bytes in use.
  bool respect_memory = true;
  // kSct: each op's favorite child (sct_favorite_children).
  std::vector<std::optional<OpId>> favorite;
};

// The best run of the step among three starts — `plan` (the scheduler's own offline list schedule),
// every op on the first candidate, and the rule alone inside the step — and refinements of the best
// with the rule, each with the best run so far as its hint. makespan_s is that run's simulated step.
// HEFT's upward rank (Topcuoglu et al. 2002) per op: its mean time over the devices it may use
// (`cpu` alone for a cpu_only op, when there is one; else `candidates`) plus the longest path
// below it, each data edge at its mean transfer time over ordered pairs of candidates.
std::vector<double> upward_ranks(const OpGraph& graph, const CostModel& cost, const std::vector<DeviceId>& candidates,
                                 const std::optional<DeviceId>& cpu);

ListSchedule dataflow_list_schedule(const OpGraph& graph, const CostModel& cost, const DataflowListRule& rule,
                                    const Placement& plan);

}  // namespace placelab::detail
