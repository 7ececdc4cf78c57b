// Private helpers shared by the METIS and Scotch groupers and the METIS / Scotch baselines: a
// weighted undirected graph over "units" (ops or contracted colocation groups), the calls into
// libmetis, and owners of libscotch's objects.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>  // scotch.h uses FILE
#include <utility>
#include <vector>

#include <scotch.h>

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

// Scotch k-way partition into `parts` parts (≥ 1) with Scotch's quality strategy and a load
// imbalance of at most `imbalance` − 1, in a deterministic one-thread context seeded with `seed`.
// Returns a part per vertex. Throws Error when a Scotch call fails.
std::vector<int32_t> scotch_partition(const WeightedGraph& g, int parts, int seed, double imbalance);

// RAII owners of the Scotch objects (Init/Exit pairs).
struct ScotchGraph {
  SCOTCH_Graph g;
  ScotchGraph() { SCOTCH_graphInit(&g); }
  ~ScotchGraph() { SCOTCH_graphExit(&g); }
  ScotchGraph(const ScotchGraph&) = delete;
  ScotchGraph& operator=(const ScotchGraph&) = delete;
};
struct ScotchArch {
  SCOTCH_Arch a;
  ScotchArch() { SCOTCH_archInit(&a); }
  ~ScotchArch() { SCOTCH_archExit(&a); }
  ScotchArch(const ScotchArch&) = delete;
  ScotchArch& operator=(const ScotchArch&) = delete;
};
struct ScotchStrat {
  SCOTCH_Strat s;
  ScotchStrat() { SCOTCH_stratInit(&s); }
  ~ScotchStrat() { SCOTCH_stratExit(&s); }
  ScotchStrat(const ScotchStrat&) = delete;
  ScotchStrat& operator=(const ScotchStrat&) = delete;
};

// `g` as a Scotch source graph, built and checked: loads scaled to SCOTCH_Num (Scotch sums them in
// an int; 1e7 keeps every sum far below 2^31). Owns the arrays, which Scotch reads but does not copy.
struct ScotchWeightedGraph {
  explicit ScotchWeightedGraph(const WeightedGraph& g);
  std::vector<SCOTCH_Num> velo, edlo, verttab, edgetab;
  ScotchGraph graph;  // declared after the arrays: destroyed before them
};

// The partitions every partitioner shares: `part` all zeros when n = 0 or parts ≤ 1, one vertex
// per part when parts ≥ n; returns whether it was one of those.
bool trivial_partition(std::size_t n, int parts, std::vector<int32_t>& part);

// Throws Error naming `call` when a Scotch status is not 0.
void scotch_check(int status, const char* call);

// Scotch 7 maps with threads and a process-wide random state by default, so two runs of one
// scenario could differ (Inception-V3 on k80x2: 1.279 vs 1.322 s). A context with one thread,
// the deterministic option and its own fixed seed makes the result a function of the inputs.
struct ScotchContext {
  SCOTCH_Context c;
  explicit ScotchContext(int seed);
  ~ScotchContext() { SCOTCH_contextExit(&c); }
  ScotchContext(const ScotchContext&) = delete;
  ScotchContext& operator=(const ScotchContext&) = delete;
};

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
