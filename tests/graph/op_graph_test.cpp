#include "placelab/graph/op_graph.h"

#include <gtest/gtest.h>

#include "placelab/graph/error.h"
#include "placelab/graph/placement.h"

namespace placelab {
namespace {

OpGraph chain(int n) {
  OpGraph g;
  for (int i = 0; i < n; ++i) g.add_op({.name = "op" + std::to_string(i), .type = "Relu"});
  for (int i = 0; i + 1 < n; ++i) g.add_edge(static_cast<OpId>(i), static_cast<OpId>(i + 1), {.bytes = 8});
  return g;
}

TEST(OpGraph, AddsOpsWithDenseIdsAndFindsByName) {
  OpGraph g = chain(3);
  EXPECT_EQ(g.num_ops(), 3u);
  EXPECT_EQ(g.num_edges(), 2u);
  EXPECT_EQ(g.find("op2"), OpId{2});
  EXPECT_FALSE(g.find("nope"));
  EXPECT_EQ(g.in_degree(1), 1u);
  EXPECT_EQ(g.out_degree(1), 1u);
}

TEST(OpGraph, RejectsDuplicateNamesSelfLoopsAndUnknownIds) {
  OpGraph g = chain(2);
  EXPECT_THROW(g.add_op({.name = "op0"}), Error);
  EXPECT_THROW(g.add_op({.name = ""}), Error);
  EXPECT_THROW(g.add_edge(0, 0), Error);
  EXPECT_THROW(g.add_edge(0, 7), Error);
}

TEST(OpGraph, TopologicalOrderIsDeterministicSmallestIdFirst) {
  OpGraph g;
  for (const char* n : {"a", "b", "c", "d"}) g.add_op({.name = n});
  g.add_edge(3, 0);
  g.add_edge(1, 2);
  EXPECT_EQ(g.topological_order(), (std::vector<OpId>{1, 2, 3, 0}));
}

TEST(OpGraph, CycleIsReportedWithTheNamesOfItsOps) {
  OpGraph g = chain(4);
  g.add_edge(3, 1);
  auto cycle = g.find_cycle();
  ASSERT_EQ(cycle.size(), 3u);
  try {
    g.topological_order();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "the op graph has a cycle: op1 -> op2 -> op3");
  }
  EXPECT_TRUE(chain(5).find_cycle().empty());
}

TEST(Placement, CheckNamesSizeAndDeviceErrors) {
  Placement p{0, 1, 2};
  EXPECT_NO_THROW(check_placement(p, 3, 3, "p"));
  EXPECT_THROW(check_placement(p, 4, 3, "p"), InputError);
  EXPECT_THROW(check_placement(p, 3, 2, "p"), InputError);
}

TEST(Check, ThrowsWithContext) {
  try {
    int x = 3;
    PLACELAB_CHECK(x == 4) << "x is " << x;
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("check failed: x == 4: x is 3"), std::string::npos);
  }
}

}  // namespace
}  // namespace placelab
