// Private helpers shared by the METIS grouper and the METIS / Scotch baselines: a weighted
// undirected graph over "units" (ops or contracted colocation groups) and the calls into libmetis.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/learners/grouping.h"

namespace placelab::detail {

// An undirected weighted graph in CSR form, symmetric, without self loops; weights are doubles in
// the caller's units and are scaled to integers by the partitioner.
struct WeightedGraph {
  std::vector<double> vertex_weight;   // one per vertex
  std::vector<int64_t> offsets;        // size n + 1
  std::vector<int32_t> neighbors;      // both directions present
  std::vector<double> edge_weight;     // parallel to neighbors
  std::size_t num_vertices() const { return vertex_weight.size(); }
};

// The FLOPs of one execution of `op`: Op::flops, else the kernel signature's count.
double op_flops(const Op& op);

// Contracts `graph` by `units` (an op → unit grouping): unit weight = sum of its ops'
// `op_weight`, edge weight between two units = sum of the bytes of the tensors between them
// (control edges count 1 byte so they still attract). Parallel edges are merged.
template <typename OpWeight>
WeightedGraph contract_graph(const OpGraph& graph, const Grouping& units, OpWeight&& op_weight);

// Scales non-negative weights to integers in [1, max_total / n] so that their sum fits a 32-bit
// index with room to spare; proportions are kept to within rounding.
std::vector<int32_t> scale_weights(const std::vector<double>& weights, double max_total);

// METIS k-way partition into `parts` parts (≥ 1). Returns a part per vertex. Throws Error when
// METIS reports anything but METIS_OK.
std::vector<int32_t> metis_partition(const WeightedGraph& g, int parts, int seed, double imbalance);

// Implementation of the template above.
template <typename OpWeight>
WeightedGraph contract_graph(const OpGraph& graph, const Grouping& units, OpWeight&& op_weight) {
  const std::size_t n = units.num_groups();
  WeightedGraph out;
  out.vertex_weight.assign(n, 0.0);
  std::vector<std::vector<std::pair<int32_t, double>>> adj(n);
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    const GroupId u = units.group_of(op);
    out.vertex_weight[u] += op_weight(op);
    graph.for_each_out_edge(op, [&](OpId dst, const Tensor& t) {
      const GroupId v = units.group_of(dst);
      if (u == v) return;
      const double w = t.control ? 1.0 : static_cast<double>(t.bytes);
      adj[u].push_back({static_cast<int32_t>(v), w});
      adj[v].push_back({static_cast<int32_t>(u), w});
    });
  }
  out.offsets.assign(n + 1, 0);
  for (std::size_t u = 0; u < n; ++u) {
    auto& list = adj[u];
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < list.size();) {
      std::size_t j = i;
      double w = 0;
      while (j < list.size() && list[j].first == list[i].first) w += list[j++].second;
      out.neighbors.push_back(list[i].first);
      out.edge_weight.push_back(w);
      i = j;
    }
    out.offsets[u + 1] = static_cast<int64_t>(out.neighbors.size());
  }
  return out;
}

}  // namespace placelab::detail
