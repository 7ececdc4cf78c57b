// What a neural learner sees of a placement problem: the op graph through a grouping, as numbers.
// The table learners need only the number of groups; the seq2seq placers read, per group, the
// counts of op types, the output shapes in fixed slots, FLOPs and bytes, the group adjacency and a
// topological order — Mirhoseini et al. 2017's op embedding (type ‖ output shape ‖ adjacency),
// summed over a group's ops as the Hierarchical Planner's public code does — and the groupers of
// the learned-grouping placers read the same features per op. Computed here from OpGraph and
// Grouping, so learners include neither models/ nor profiler/. docs/learners.md ("What a neural
// learner sees") documents the layout: a paper reproduction hinges on it.
//
//   PlacementProblem problem = describe_problem(graph, grouping);
//   nn::Matrix<float> X = group_feature_matrix<float>(problem, problem.topological_order);
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "placelab/graph/kernel.h"
#include "placelab/graph/op_graph.h"
#include "placelab/learners/grouping.h"
#include "placelab/learners/nn/tensor.h"

namespace placelab {

// Output dimensions kept per op, outermost first, zero padded (the Hierarchical Planner keeps 5
// outputs × 5 dims; our ops have one output buffer, so one output's 5 dims).
inline constexpr int kShapeSlots = 5;
using ShapeSlots = std::array<double, kShapeSlots>;

// The shape of the tensor an op's kernel writes, from its signature: gemm [batch, m, n], conv2d
// [n, k, h_out, w_out], its input gradient [n, c, h, w], its filter gradient [k, c, r, s],
// elementwise [elements], reduction [out], embedding [lookups, dim], softmax [rows, cols], copy
// [bytes / 4]; noop none.
ShapeSlots output_shape(const KernelSignature& sig);

struct PlacementProblem {
  // The op-type vocabulary: every distinct Op::type of the graph, sorted.
  std::vector<std::string> op_types;

  // Per op (index = OpId).
  std::vector<uint32_t> op_type;               // index into op_types
  std::vector<ShapeSlots> op_shape;            // output_shape of its kernel
  std::vector<double> op_flops;                // Op::flops
  std::vector<double> op_output_bytes;         // Op::output_bytes
  std::vector<double> op_persistent_bytes;     // Op::persistent_bytes
  std::vector<uint32_t> op_topological_index;  // position in OpGraph::topological_order()
  // Data edges (control edges carry nothing to place by) between ops, as (producer, consumer).
  std::vector<std::pair<OpId, OpId>> op_edges;

  // Per group (index = GroupId of the grouping).
  std::size_t num_groups = 0;
  // The members' longest common scope, TensorFlow's "gradients/" prefix dropped (so a layer's
  // group with its gradients is named by the layer); else the top-level scope most members are
  // in, with "+"; made unique with "#2", "#3"…
  std::vector<std::string> group_names;
  std::vector<uint32_t> group_size;            // ops in the group
  std::vector<double> group_type_counts;       // num_groups × op_types.size(), row-major
  std::vector<ShapeSlots> group_shape;         // member op_shape summed (the Hierarchical Planner's)
  std::vector<double> group_flops, group_output_bytes, group_persistent_bytes;  // sums over members
  // Data edges between distinct groups: (from, to, number of op edges, bytes), sorted by (from, to).
  struct GroupEdge {
    GroupId from, to;
    uint32_t count;
    double bytes;
  };
  std::vector<GroupEdge> group_edges;
  // Groups ordered by the earliest topological position of their ops (ties by id): the order in
  // which the seq2seq placers read and place groups by default. A group graph can have cycles
  // (a group need not be convex), so this is the order of first readiness, not a strict
  // topological sort of the contracted graph.
  std::vector<GroupId> topological_order;
};

// Describes `graph` seen through `grouping` (grouping.num_ops() must equal graph.num_ops();
// InputError otherwise). Linear in ops + edges; deterministic.
PlacementProblem describe_problem(const OpGraph& graph, const Grouping& grouping);

// The seq2seq placers' input: one column per group in `order` (a permutation of the group ids),
// F = 2·G + T + kShapeSlots + 3 rows (G groups, T op types):
//   [0, G)            data edges from this group to group j (j in group-id order)
//   [G, 2G)           data edges into this group from group j
//   [2G, 2G+T)        op-type counts
//   [2G+T, +5)        summed output-shape slots
//   — these rows of a column divided by (their max + 1), as the Hierarchical Planner's code —
//   [+5, +8)          log(1 + FLOPs), log(1 + output bytes), log(1 + persistent bytes), each
//                     divided by its largest value over the groups (0 when that is 0).
template <typename T>
nn::Matrix<T> group_feature_matrix(const PlacementProblem& problem, std::span<const GroupId> order);
// Its row count for a problem, and for `groups` groups over `op_types` op types.
nn::Index group_feature_size(const PlacementProblem& problem);
nn::Index group_feature_size(std::size_t groups, std::size_t op_types);

}  // namespace placelab
