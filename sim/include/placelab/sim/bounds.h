// Lower bounds on the step time of every placement of a graph on a machine: the yardstick every
// learner's and baseline's result is measured against (its gap to the bound), and a first check
// of whether any placement can fit in memory at all.
//
//   StepLowerBound b = step_lower_bound(graph, sim);       // every device of the machine
//   double gap = result.step_time_s / b.step_s - 1;        // ≥ 0 for every placement
#pragma once

#include <cstdint>
#include <span>

#include "placelab/graph/op_graph.h"
#include "placelab/sim/simulator.h"

namespace placelab {

struct StepLowerBound {
  double step_s = 0;           // max(critical_path_s, work_s): no placement's step is shorter
  // The longest path through the graph with every op at its fastest allowed device (as the
  // simulator prices it, launch overhead included) and every transfer free.
  double critical_path_s = 0;
  // Σ over ops of that fastest time, over the ops the devices they can run on run at full speed
  // at once (Device::parallel_capacity): the devices can at best share the work perfectly.
  double work_s = 0;
  int slots = 0;
  // Necessary for any placement to fit: the ops' persistent bytes (variables, optimizer slots) fit
  // in the devices' memory together. Not sufficient: activations and one device's share count too.
  int64_t persistent_bytes = 0;
  int64_t memory_bytes = 0;
  bool memory_feasible = true;
};

// Bounds for placements onto `allowed` devices (empty: every device of the machine). Ops the
// simulator moves to the CPU (cpu_only ops placed on a GPU) count there, whatever `allowed` says.
StepLowerBound step_lower_bound(const OpGraph& graph, const Simulator& sim, std::span<const DeviceId> allowed = {});

}  // namespace placelab
