#include "placelab/graph/op_graph.h"

#include <algorithm>
#include <queue>

#include "placelab/core/error.h"

namespace placelab {

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kUpdate: return "update";
    case Phase::kOther: return "other";
  }
  return "other";
}

std::optional<Phase> phase_from_name(std::string_view name) {
  for (Phase p : {Phase::kForward, Phase::kBackward, Phase::kUpdate, Phase::kOther})
    if (phase_name(p) == name) return p;
  return std::nullopt;
}

std::string_view execution_name(Execution execution) {
  return execution == Execution::kEager ? "eager" : "dataflow";
}

std::optional<Execution> execution_from_name(std::string_view name) {
  for (Execution e : {Execution::kDataflow, Execution::kEager})
    if (execution_name(e) == name) return e;
  return std::nullopt;
}

OpId OpGraph::add_op(Op op) {
  if (op.name.empty()) throw Error("op " + std::to_string(num_ops()) + " has an empty name");
  auto [it, inserted] = by_name_.emplace(op.name, static_cast<OpId>(num_ops()));
  if (!inserted) throw Error("duplicate op name '" + op.name + "'");
  return static_cast<OpId>(boost::add_vertex(std::move(op), g_));
}

void OpGraph::add_edge(OpId src, OpId dst, Tensor tensor) {
  if (src >= num_ops() || dst >= num_ops())
    throw Error("edge " + std::to_string(src) + " -> " + std::to_string(dst) + " names an unknown op id");
  if (src == dst) throw Error("edge from op '" + g_[src].name + "' to itself");
  boost::add_edge(src, dst, tensor, g_);
}

std::optional<OpId> OpGraph::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::vector<OpId> OpGraph::topological_order() const {
  const std::size_t n = num_ops();
  std::vector<uint32_t> indeg(n);
  for (OpId v = 0; v < n; ++v) indeg[v] = static_cast<uint32_t>(in_degree(v));
  std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
  for (OpId v = 0; v < n; ++v)
    if (indeg[v] == 0) ready.push(v);
  std::vector<OpId> order;
  order.reserve(n);
  while (!ready.empty()) {
    OpId v = ready.top();
    ready.pop();
    order.push_back(v);
    for_each_out_edge(v, [&](OpId w, const Tensor&) {
      if (--indeg[w] == 0) ready.push(w);
    });
  }
  if (order.size() != n) {
    std::string names;
    for (OpId v : find_cycle()) names += (names.empty() ? "" : " -> ") + g_[v].name;
    throw InputError("the op graph has a cycle: " + names);
  }
  return order;
}

std::vector<OpId> OpGraph::find_cycle() const {
  // Iterative DFS with colours; on a back edge, walk the parent chain to recover the cycle.
  const std::size_t n = num_ops();
  enum : uint8_t { kWhite, kGrey, kBlack };
  std::vector<uint8_t> colour(n, kWhite);
  std::vector<OpId> parent(n, 0);
  std::vector<std::pair<OpId, std::vector<OpId>>> stack;
  for (OpId root = 0; root < n; ++root) {
    if (colour[root] != kWhite) continue;
    auto children = [&](OpId v) {
      std::vector<OpId> c;
      for_each_out_edge(v, [&](OpId w, const Tensor&) { c.push_back(w); });
      std::reverse(c.begin(), c.end());
      return c;
    };
    colour[root] = kGrey;
    stack.emplace_back(root, children(root));
    while (!stack.empty()) {
      auto& [v, unvisited] = stack.back();
      if (unvisited.empty()) {
        colour[v] = kBlack;
        stack.pop_back();
        continue;
      }
      OpId w = unvisited.back();
      unvisited.pop_back();
      if (colour[w] == kGrey) {
        std::vector<OpId> cycle{w};
        for (OpId u = v; u != w; u = parent[u]) cycle.push_back(u);
        std::reverse(cycle.begin() + 1, cycle.end());
        return cycle;
      }
      if (colour[w] == kWhite) {
        colour[w] = kGrey;
        parent[w] = v;
        stack.emplace_back(w, children(w));
      }
    }
  }
  return {};
}

double OpGraph::total_flops() const {
  double sum = 0;
  for (OpId v = 0; v < num_ops(); ++v) sum += g_[v].flops;
  return sum;
}

int64_t OpGraph::total_persistent_bytes() const {
  int64_t sum = 0;
  for (OpId v = 0; v < num_ops(); ++v) sum += g_[v].persistent_bytes;
  return sum;
}

}  // namespace placelab
