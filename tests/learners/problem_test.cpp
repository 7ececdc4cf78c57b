// What a neural learner sees: the problem description and the feature layout of docs/learners.md,
// on a graph small enough to compute every number by hand.
#include "placelab/learners/problem.h"

#include <gtest/gtest.h>

#include "placelab/core/error.h"

namespace placelab {
namespace {

// a (MatMul 2×3) → b (Relu) → c (MatMul); a → d (Add); c ⇢ d control. Groups {a, b}, {c}, {d}.
struct Small {
  OpGraph g;
  Grouping grouping;
  Small() {
    const OpId a = g.add_op({.name = "layer1/a", .type = "MatMul", .kernel = KernelSignature::gemm(2, 3, 4),
                             .flops = 48, .output_bytes = 24, .persistent_bytes = 48});
    const OpId b = g.add_op({.name = "layer1/b", .type = "Relu", .kernel = KernelSignature::elementwise(6),
                             .flops = 6, .output_bytes = 24});
    const OpId c = g.add_op({.name = "layer2/c", .type = "MatMul", .kernel = KernelSignature::gemm(2, 5, 3),
                             .flops = 60, .output_bytes = 40});
    const OpId d = g.add_op({.name = "d", .type = "Add", .kernel = KernelSignature::elementwise(6, 2), .flops = 6});
    g.add_edge(a, b, {.bytes = 24});
    g.add_edge(b, c, {.bytes = 24});
    g.add_edge(a, d, {.bytes = 24});
    g.add_edge(c, d, {.control = true});
    grouping = Grouping({0, 0, 1, 2});
  }
};

TEST(Problem, DescribesGroupsByHand) {
  Small s;
  const PlacementProblem p = describe_problem(s.g, s.grouping);
  EXPECT_EQ(p.op_types, (std::vector<std::string>{"Add", "MatMul", "Relu"}));
  EXPECT_EQ(p.op_type, (std::vector<uint32_t>{1, 2, 1, 0}));
  ASSERT_EQ(p.num_groups, 3u);
  EXPECT_EQ(p.group_type_counts, (std::vector<double>{0, 1, 1, /**/ 0, 1, 0, /**/ 1, 0, 0}));
  EXPECT_EQ(p.group_shape[0], (ShapeSlots{1 + 6, 2, 3, 0, 0}));  // [1, 2, 3] + [6]
  EXPECT_EQ(p.group_shape[1], (ShapeSlots{1, 2, 5, 0, 0}));
  EXPECT_EQ(p.group_flops, (std::vector<double>{54, 60, 6}));
  EXPECT_EQ(p.group_persistent_bytes, (std::vector<double>{48, 0, 0}));
  EXPECT_EQ(p.group_size, (std::vector<uint32_t>{2, 1, 1}));
  // b → c and a → d cross groups; the control edge c ⇢ d does not count.
  ASSERT_EQ(p.group_edges.size(), 2u);
  EXPECT_EQ(p.group_edges[0].from, 0u);
  EXPECT_EQ(p.group_edges[0].to, 1u);
  EXPECT_EQ(p.group_edges[1].to, 2u);
  EXPECT_EQ(p.group_edges[1].bytes, 24);
  EXPECT_EQ(p.op_edges.size(), 3u);
  EXPECT_EQ(p.group_names, (std::vector<std::string>{"layer1", "layer2", "d"}));
  EXPECT_EQ(p.topological_order.size(), 3u);
  EXPECT_EQ(p.topological_order[0], 0u);
}

TEST(Problem, FeatureMatrixFollowsTheDocumentedLayout) {
  Small s;
  const PlacementProblem p = describe_problem(s.g, s.grouping);
  const std::vector<GroupId> order{2, 0, 1};
  const nn::Matrix<double> f = group_feature_matrix<double>(p, order);
  // F = 2G + T + 5 + 3 = 6 + 3 + 5 + 3.
  ASSERT_EQ(f.rows(), 17);
  ASSERT_EQ(f.cols(), 3);
  EXPECT_EQ(group_feature_size(p), 17);
  // Column 1 is group 0: out-edges to groups 1 and 2, counts MatMul 1 and Relu 1, shape [7,2,3],
  // all divided by (max 7 + 1).
  const nn::Matrix<double> g0 = f.col(1);
  EXPECT_DOUBLE_EQ(g0(1), 1.0 / 8);
  EXPECT_DOUBLE_EQ(g0(2), 1.0 / 8);
  EXPECT_DOUBLE_EQ(g0(0), 0);
  EXPECT_DOUBLE_EQ(g0(3 + 0), 0);       // nothing flows into group 0
  EXPECT_DOUBLE_EQ(g0(6 + 1), 1.0 / 8);  // MatMul
  EXPECT_DOUBLE_EQ(g0(6 + 2), 1.0 / 8);  // Relu
  EXPECT_DOUBLE_EQ(g0(9), 7.0 / 8);      // shape slot 0
  // Column 0 is group 2 (d): one edge in from group 0; scalars are log1p-scaled by the largest.
  EXPECT_DOUBLE_EQ(f(3 + 0, 0), 1.0 / 7);  // shape [6] is its largest entry
  EXPECT_DOUBLE_EQ(f(14, 2), 1.0);  // group 1 has the most FLOPs
  EXPECT_DOUBLE_EQ(f(14, 0), std::log1p(6.0) / std::log1p(60.0));
  EXPECT_DOUBLE_EQ(f(16, 0), 0.0);  // no persistent bytes
}

TEST(Problem, GroupNamesFollowTheForwardScope) {
  OpGraph g;
  for (const char* name : {"encoder/layer_0/t0/MatMul", "encoder/layer_0/t1/MatMul",
                           "gradients/encoder/layer_0/t1/MatMul_grad/MatMul",            // group 0
                           "decoder/x/y", "decoder/z/w", "decoder/z/v", "decoder/q", "loss",  // group 1
                           "encoder/layer_1/MatMul", "encoder/layer_1/Add",                   // groups 2, 3
                           "a/b", "c/d"})                                                      // group 4
    g.add_op({.name = name, .type = "MatMul"});
  const PlacementProblem p = describe_problem(g, Grouping({0, 0, 0, 1, 1, 1, 1, 1, 2, 3, 4, 4}));
  // The layer with its gradient; four decoder ops and the loss ("+": not all); a repeat; no scope
  // holding 80 % of the members.
  EXPECT_EQ(p.group_names,
            (std::vector<std::string>{"encoder/layer_0", "decoder+", "encoder/layer_1", "encoder/layer_1#2", "group4"}));
}

TEST(Problem, OutputShapeOfEachKernelClass) {
  EXPECT_EQ(output_shape(KernelSignature::conv2d(KernelClass::kConv2D, 32, 3, 299, 299, 32, 3, 3, 2, 0)),
            (ShapeSlots{32, 32, 149, 149, 0}));
  EXPECT_EQ(output_shape(KernelSignature::conv2d(KernelClass::kConv2DBackpropFilter, 32, 3, 299, 299, 32, 3, 3, 2, 0)),
            (ShapeSlots{32, 3, 3, 3, 0}));
  EXPECT_EQ(output_shape(KernelSignature::embedding(1000, 64, 20)), (ShapeSlots{20, 64, 0, 0, 0}));
  EXPECT_EQ(output_shape(KernelSignature::noop()), (ShapeSlots{}));
}

TEST(Problem, RejectsAGroupingOfAnotherGraph) {
  Small s;
  EXPECT_THROW(describe_problem(s.g, Grouping({0, 1})), InputError);
}

}  // namespace
}  // namespace placelab
