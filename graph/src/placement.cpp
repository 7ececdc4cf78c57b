#include "placelab/graph/placement.h"

#include <algorithm>
#include <string>

#include "placelab/graph/transfers.h"

#include "placelab/graph/error.h"

namespace placelab {

void check_placement(std::span<const DeviceId> placement, std::size_t num_ops, std::size_t num_devices,
                     const char* what) {
  if (placement.size() != num_ops)
    throw InputError(std::string(what) + ": placement has " + std::to_string(placement.size()) +
                     " entries: must have one per op (" + std::to_string(num_ops) + ")");
  for (std::size_t i = 0; i < placement.size(); ++i)
    if (placement[i] >= num_devices)
      throw InputError(std::string(what) + ": placement[" + std::to_string(i) + "] = " +
                       std::to_string(placement[i]) + ": must be a device id < " + std::to_string(num_devices));
}

}  // namespace placelab

namespace placelab {

int64_t wire_bytes(const OpGraph& graph, OpId op) {
  int64_t bytes = 0;
  graph.for_each_out_edge(op, [&](OpId, const Tensor& t) {
    if (!t.control) bytes = std::max(bytes, t.bytes);
  });
  return bytes;
}

std::vector<int64_t> wire_bytes(const OpGraph& graph) {
  std::vector<int64_t> out(graph.num_ops());
  for (OpId op = 0; op < graph.num_ops(); ++op) out[op] = wire_bytes(graph, op);
  return out;
}

}  // namespace placelab
