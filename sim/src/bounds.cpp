#include "placelab/sim/bounds.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "placelab/core/error.h"

namespace placelab {

StepLowerBound step_lower_bound(const OpGraph& graph, const Simulator& sim, std::span<const DeviceId> allowed) {
  const Machine& m = sim.machine();
  PLACELAB_CHECK(graph.num_ops() == sim.num_ops()) << graph.num_ops() << " ops, simulator has " << sim.num_ops();
  std::vector<DeviceId> devices(allowed.begin(), allowed.end());
  if (devices.empty())
    for (std::size_t d = 0; d < m.devices.size(); ++d) devices.push_back(static_cast<DeviceId>(d));
  for (DeviceId d : devices) PLACELAB_CHECK(d < m.devices.size()) << "device " << d;

  // Devices with one op-time representative have one kind and the same op times, so the ops are
  // priced on one device of each such class among the allowed (a 64-node cluster: a CPU and a
  // GPU, not 640 devices). An op that runs where it is placed marks its whole class used; one
  // that soft placement moves marks the device it moves to.
  std::vector<DeviceId> classes;                             // one allowed device per class
  std::vector<uint8_t> class_used(m.devices.size(), 0);      // by representative
  for (DeviceId d : devices) {
    const DeviceId rep = sim.op_time_representative(d);
    if (std::none_of(classes.begin(), classes.end(), [&](DeviceId c) { return sim.op_time_representative(c) == rep; }))
      classes.push_back(d);
  }
  StepLowerBound b;
  std::vector<uint8_t> used(m.devices.size(), 0);  // devices that can hold an op
  std::vector<double> fastest(graph.num_ops(), std::numeric_limits<double>::infinity());
  double work = 0;
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    for (DeviceId d : classes) {
      const DeviceId runs_on = sim.effective_device(op, d);
      if (runs_on == d) {
        class_used[sim.op_time_representative(d)] = 1;
      } else {
        used[runs_on] = 1;
      }
      fastest[op] = std::min(fastest[op], sim.op_time_s(op, runs_on));
    }
    work += fastest[op];
    b.persistent_bytes += graph.op(op).persistent_bytes;
  }
  for (DeviceId d : devices)
    if (class_used[sim.op_time_representative(d)]) used[d] = 1;
  for (std::size_t d = 0; d < m.devices.size(); ++d)
    if (used[d]) {
      b.slots += m.devices[d].parallel_capacity();
      b.memory_bytes += m.devices[d].memory_bytes;
    }
  b.work_s = b.slots > 0 ? work / b.slots : 0;
  b.memory_feasible = b.persistent_bytes <= b.memory_bytes;

  // Longest path, ops in topological order; control and data edges both order ops.
  std::vector<double> finish(graph.num_ops(), 0);
  for (OpId op : graph.topological_order()) {
    double start = 0;
    graph.for_each_in_edge(op, [&](OpId src, const Tensor&) { start = std::max(start, finish[src]); });
    finish[op] = start + fastest[op];
    b.critical_path_s = std::max(b.critical_path_s, finish[op]);
  }
  b.step_s = std::max(b.critical_path_s, b.work_s);
  return b;
}

}  // namespace placelab
