// The project's one transfer rule's byte count (transfers.h): what an op sends to another device.
#include "placelab/graph/transfers.h"

#include <algorithm>

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
