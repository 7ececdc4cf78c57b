#include "placelab/graph/op_graph.h"
#include "placelab/graph/transfers.h"

#include <gtest/gtest.h>

#include "placelab/core/error.h"
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

// What crosses devices: a producer with edges of 8, 32 (control) and 16 bytes to consumers on its
// own device, another device twice and a third: one copy per other device, of its largest data
// edge (16), and each consumer reads the copy of its device.
TEST(Transfers, OneCopyPerProducerAndDeviceOfItsLargestDataEdge) {
  OpGraph g;
  for (const char* name : {"p", "same", "far1", "far2", "ctl", "other"}) g.add_op({.name = name});
  g.add_edge(0, 1, {.bytes = 8});
  g.add_edge(0, 2, {.bytes = 8});
  g.add_edge(0, 3, {.bytes = 16});
  g.add_edge(0, 4, {.bytes = 32, .control = true});
  g.add_edge(0, 5, {.bytes = 4});
  EXPECT_EQ(wire_bytes(g, 0), 16);
  EXPECT_EQ(wire_bytes(g, 1), 0);
  const Placement p{0, 0, 1, 1, 2, 3};
  std::vector<std::pair<OpId, OpId>> local;
  std::vector<std::tuple<OpId, DeviceId, int64_t>> copies;
  std::vector<std::pair<uint32_t, OpId>> remote;
  for_each_transfer(
      g, p, [&](OpId a, OpId b) { local.emplace_back(a, b); },
      [&](OpId src, DeviceId to, int64_t bytes) {
        copies.emplace_back(src, to, bytes);
        return static_cast<uint32_t>(100 + copies.size() - 1);
      },
      [&](uint32_t copy, OpId dst) { remote.emplace_back(copy, dst); });
  EXPECT_EQ(local, (std::vector<std::pair<OpId, OpId>>{{0, 1}, {0, 4}}));  // same device; control edge
  EXPECT_EQ(copies, (std::vector<std::tuple<OpId, DeviceId, int64_t>>{{0, 1, 16}, {0, 3, 16}}));
  EXPECT_EQ(remote, (std::vector<std::pair<uint32_t, OpId>>{{100, 2}, {100, 3}, {101, 5}}));
}

}  // namespace
}  // namespace placelab
