// What crosses devices under a placement — one rule that the simulator, both executors and HEFT
// follow, so that a schedule, a simulation and a real run can never disagree about what is sent:
// an op's output goes to each *other* device that consumes it over a data edge exactly once, and
// what goes over the wire is the op's largest data edge (TensorFlow sends the tensor, not one
// edge's slice of it). Control edges order ops and carry nothing.
//
//   for_each_transfer(graph, placement,
//       [&](OpId src, OpId dst) { /* same device, or a control edge */ },
//       [&](OpId src, DeviceId to, int64_t bytes) { return new_copy(src, to, bytes); },
//       [&](uint32_t copy, OpId dst) { /* dst reads the copy */ });
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"

namespace placelab {

// The bytes `op` sends to another device: its largest data (non-control) out edge; 0 without one.
int64_t wire_bytes(const OpGraph& graph, OpId op);
// wire_bytes of every op, indexed by OpId.
std::vector<int64_t> wire_bytes(const OpGraph& graph);

// Visits the out edges of every op, in op order and each op's edge order: `local(src, dst)` for a
// control edge or a data edge between ops on one device; for a data edge to another device,
// `copy(src, device, bytes)` the first time src sends to that device (it returns the caller's id
// for the copy, a uint32_t) and `remote(copy_id, dst)` for every consumer the copy feeds.
template <typename Local, typename Copy, typename Remote>
void for_each_transfer(const OpGraph& graph, std::span<const DeviceId> placement, Local&& local, Copy&& copy,
                       Remote&& remote) {
  std::vector<std::pair<DeviceId, uint32_t>> sent;  // this producer's copies: (device, id)
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    sent.clear();
    const int64_t bytes = wire_bytes(graph, op);
    graph.for_each_out_edge(op, [&](OpId dst, const Tensor& t) {
      const DeviceId to = placement[dst];
      if (t.control || to == placement[op]) {
        local(op, dst);
        return;
      }
      uint32_t id = 0;
      bool found = false;
      for (const auto& [device, copy_id] : sent)
        if (device == to) {
          id = copy_id;
          found = true;
        }
      if (!found) {
        id = copy(op, to, bytes);
        sent.emplace_back(to, id);
      }
      remote(id, dst);
    });
  }
}

}  // namespace placelab
