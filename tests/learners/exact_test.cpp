// The exact placement-and-scheduling model on graphs whose optimum is known by hand, its limits and
// its options. Op times come from testing::FlopsCostModel: 1e10 FLOPs on a toy GPU take 1 ms.
#include "placelab/learners/exact.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "placelab/core/error.h"
#include "placelab/learners/registry.h"
#include "placelab/sim/simulator.h"
#include "toy.h"

namespace placelab {
namespace {

constexpr double kOneMs = 1e10;  // FLOPs of a 1 ms op on a toy GPU

// A chain of `length` ops of 1 ms, tensors of `bytes`, in group `group`; returns its ops.
std::vector<OpId> add_chain(OpGraph& g, std::vector<GroupId>& groups, const std::string& name, int length,
                            int64_t bytes, GroupId group) {
  std::vector<OpId> ops;
  for (int i = 0; i < length; ++i) {
    ops.push_back(g.add_op({.name = name + std::to_string(i), .type = "MatMul", .flops = kOneMs, .output_bytes = bytes}));
    groups.push_back(group);
    if (i > 0) g.add_edge(ops[static_cast<std::size_t>(i - 1)], ops.back(), {.bytes = bytes});
  }
  return ops;
}

TEST(Exact, RunsTwoIndependentChainsInParallel) {
  OpGraph g;
  std::vector<GroupId> groups;
  add_chain(g, groups, "a", 2, 1024, 0);
  add_chain(g, groups, "b", 2, 1024, 1);
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  const ExactResult r = solve_exact(g, cost, Grouping(groups), {.time_limit_s = 10});
  ASSERT_EQ(r.status, ExactStatus::kOptimal) << r.summary();
  EXPECT_NEAR(r.objective_s, 2e-3, 1e-9);  // each chain alone on a GPU: 2 ms
  EXPECT_NE(r.group_devices[0], r.group_devices[1]);
  EXPECT_LE(r.best_bound_s, r.objective_s);
  EXPECT_EQ(r.groups, 2u);
  EXPECT_EQ(r.tasks, 2u);
  EXPECT_NEAR(Simulator(g, cost).simulate(r.placement).step_time_s, 2e-3, 1e-9);
}

// Alike to the model, but the graph measured gpu:1 faster: the two GPUs are no longer symmetric, so
// the relaxation may not pin the heaviest group to gpu:0, and its bound stays below the optimum.
TEST(Exact, MeasuredTimesByDeviceNameBreakTheSymmetryOfAlikeGpus) {
  OpGraph g;
  g.add_op({.name = "a", .type = "MatMul", .kernel = KernelSignature::gemm(64, 64, 64),
            .measured_s = {{"cpu", 1.0}, {"gpu", 1.0}, {"gpu:1", 1e-3}}});
  const Machine m = testing::toy_machine(2);  // cpu:0, gpu:0, gpu:1: one analytic class of GPUs
  const AnalyticCostModel cost(m);
  ASSERT_EQ(cost.op_time_representative(2), 1u);
  const ExactResult r = solve_exact(g, cost, Grouping(std::vector<GroupId>{0}), {.time_limit_s = 10});
  ASSERT_EQ(r.status, ExactStatus::kOptimal) << r.summary();
  EXPECT_EQ(r.placement[0], 2u);
  EXPECT_NEAR(r.objective_s, 1e-3, 1e-9);
  EXPECT_LE(r.group_bound_s, 1e-3 + 1e-9);
  EXPECT_NEAR(Simulator(g, cost).simulate(r.placement).step_time_s, 1e-3, 1e-9);
}

TEST(Exact, KeepsAChainWithHeavyTensorsOnOneDevice) {
  OpGraph g;
  std::vector<GroupId> groups;
  const int64_t gigabyte = int64_t{1} << 30;  // 0.1 s over the toy PCIe: far more than the ops
  for (GroupId k = 0; k < 4; ++k) {
    const std::vector<OpId> ops = add_chain(g, groups, "l" + std::to_string(k) + "_", 1, gigabyte, k);
    if (k > 0) g.add_edge(ops.front() - 1, ops.front(), {.bytes = gigabyte});
  }
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  const ExactResult r = solve_exact(g, cost, Grouping(groups), {.time_limit_s = 10});
  ASSERT_EQ(r.status, ExactStatus::kOptimal) << r.summary();
  EXPECT_NEAR(r.objective_s, 4e-3, 1e-9);
  for (DeviceId d : r.group_devices) EXPECT_EQ(d, r.group_devices[0]);
  EXPECT_NEAR(Simulator(g, cost).simulate(r.placement).step_time_s, 4e-3, 1e-9);
}

TEST(Exact, SplitsGroupsThatDoNotFitOneDevice) {
  // Two layers of 1 ms, each with 5 GiB of weights; a toy GPU has 8 GiB: one layer per GPU, and
  // the 1 MiB activation crosses.
  OpGraph g;
  std::vector<GroupId> groups;
  const int64_t weights = int64_t{5} << 30, activation = int64_t{1} << 20;
  std::vector<OpId> layers;
  for (GroupId k = 0; k < 2; ++k) {
    const OpId var = g.add_op({.name = "w" + std::to_string(k), .type = "VariableV2", .persistent_bytes = weights});
    groups.push_back(k);
    layers.push_back(add_chain(g, groups, "layer" + std::to_string(k) + "_", 1, activation, k).front());
    g.add_edge(var, layers.back(), {.bytes = 64});
  }
  g.add_edge(layers[0], layers[1], {.bytes = activation});
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  const ExactResult r = solve_exact(g, cost, Grouping(groups), {.time_limit_s = 10});
  ASSERT_EQ(r.status, ExactStatus::kOptimal) << r.summary();
  EXPECT_NE(r.group_devices[0], r.group_devices[1]);
  const double expected = 2e-3 + cost.transfer_time_s(activation, r.group_devices[0], r.group_devices[1]);
  EXPECT_NEAR(r.objective_s, expected, 1e-9);
  const SimResult s = Simulator(g, cost).simulate(r.placement);
  EXPECT_FALSE(s.oom);
  EXPECT_NEAR(s.step_time_s, expected, 1e-9);
}

// The relaxation's bound is at most the simulated step of every group placement that fits: here
// all 2^9 placements of the fork-join's colocation groups on two GPUs, simulated.
TEST(Exact, GroupBoundIsBelowEverySimulatedGroupPlacement) {
  for (const int64_t bytes : {int64_t{1} << 10, int64_t{1} << 26}) {
    const OpGraph g = testing::fork_join(3, 2, 1e10, bytes);
    const Grouping groups = group_by_colocation(g);
    const Machine m = testing::toy_machine(2);
    const testing::FlopsCostModel cost(m);
    const ExactResult r = solve_exact(g, cost, groups, {.time_limit_s = 20});
    ASSERT_GT(r.group_bound_s, 0) << r.summary();
    EXPECT_TRUE(r.group_bound_optimal);
    const Simulator sim(g, cost);
    double best = std::numeric_limits<double>::infinity();
    const std::size_t n = groups.num_groups();
    for (uint32_t code = 0; code < (1u << n); ++code) {
      Placement by_group(n);
      for (std::size_t k = 0; k < n; ++k) by_group[k] = static_cast<DeviceId>(1 + ((code >> k) & 1));
      Placement p = groups.expand(by_group);
      p.back() = 0;  // the CPU-only save op
      const SimResult s = sim.simulate(p);
      if (!s.oom) best = std::min(best, s.step_time_s);
    }
    EXPECT_LE(r.group_bound_s, best * (1 + 1e-9)) << r.summary();
    EXPECT_GE(Simulator(g, cost).simulate(r.placement).step_time_s, best);
    EXPECT_LE(r.group_bound_s, r.objective_s * (1 + 1e-9));
  }
}

TEST(Exact, ReportsNoIncumbentWhenNothingFits) {
  OpGraph g;
  const OpId var = g.add_op({.name = "w", .type = "VariableV2", .persistent_bytes = int64_t{9} << 30});
  const OpId op = g.add_op({.name = "mm", .type = "MatMul", .flops = kOneMs});
  g.add_edge(var, op, {.bytes = 64});
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  const ExactResult r = solve_exact(g, cost, Grouping({0, 0}), {.time_limit_s = 5});
  EXPECT_EQ(r.status, ExactStatus::kNoIncumbent) << r.summary();
  EXPECT_TRUE(r.placement.empty());
}

TEST(Exact, SplitsAGroupAroundTheWorkItWaitsFor) {
  // a0 → b → a1 with a0 and a1 in one group and every op forward: a0 and a1 are separate tasks of
  // their group (levels 0 and 2), b's task lies between, and nothing is merged.
  OpGraph g;
  std::vector<GroupId> groups;
  const OpId a0 = add_chain(g, groups, "a0_", 1, 1024, 0).front();
  const OpId b = add_chain(g, groups, "b_", 1, 1024, 1).front();
  const OpId a1 = add_chain(g, groups, "a1_", 1, 1024, 0).front();
  g.add_edge(a0, b, {.bytes = 1024});
  g.add_edge(b, a1, {.bytes = 1024});
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  const ExactResult r = solve_exact(g, cost, Grouping(groups), {.time_limit_s = 5});
  ASSERT_EQ(r.status, ExactStatus::kOptimal) << r.summary();
  EXPECT_EQ(r.groups, 2u);
  EXPECT_EQ(r.tasks, 3u);
  EXPECT_EQ(r.group_devices[0], r.group_devices[1]);  // a chain: no transfer beats one
  EXPECT_NEAR(r.objective_s, 3e-3, 1e-9);
}

TEST(Exact, StopsAtItsTimeLimitAndIsDeterministic) {
  const OpGraph g = testing::fork_join(6, 4, 2e9, 1 << 20);
  std::vector<GroupId> labels;
  for (OpId op = 0; op < g.num_ops(); ++op) labels.push_back(static_cast<GroupId>(op % 14));
  const Grouping groups(labels);
  const Machine m = testing::toy_machine(4);
  const testing::FlopsCostModel cost(m);
  const ExactOptions options{.time_limit_s = 0.5};
  const ExactResult r = solve_exact(g, cost, groups, options);
  EXPECT_LT(r.solve_s, 0.5 + 1.0) << r.summary();
  ASSERT_NE(r.status, ExactStatus::kNoIncumbent) << r.summary();
  EXPECT_EQ(r.placement.size(), g.num_ops());
  EXPECT_LE(r.best_bound_s, r.objective_s);
  if (r.status == ExactStatus::kOptimal) {
    const ExactResult again = solve_exact(g, cost, groups, options);
    EXPECT_EQ(again.group_devices, r.group_devices);
    EXPECT_EQ(again.objective_s, r.objective_s);
  }
}

TEST(Exact, IsDeterministic) {
  const OpGraph g = testing::fork_join(3, 2, 1e10, 1 << 20);
  const Grouping groups = group_by_colocation(g);
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  const ExactResult a = solve_exact(g, cost, groups, {.time_limit_s = 20});
  const ExactResult b = solve_exact(g, cost, groups, {.time_limit_s = 20});
  ASSERT_EQ(a.status, ExactStatus::kOptimal) << a.summary();
  EXPECT_EQ(a.placement, b.placement);
  EXPECT_EQ(a.objective_s, b.objective_s);
  EXPECT_EQ(a.variables, b.variables);
  EXPECT_EQ(a.constraints, b.constraints);
  // The save op is CPU-only: on the CPU, whatever its group.
  EXPECT_EQ(a.placement.back(), 0u);
}

TEST(Exact, RefusesTooManyGroups) {
  const OpGraph g = testing::fork_join(8, 6, 1e9, 1024);
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  try {
    solve_exact(g, cost, testing::identity_grouping(g.num_ops()), {.max_groups = 20});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("more than exact.max_groups = 20"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("coarser grouping"), std::string::npos) << e.what();
  }
}

TEST(Exact, OptionsNameTheFieldValueAndRule) {
  const auto message = [](const ExactOptions& o) {
    try {
      o.validate();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("valid");
  };
  EXPECT_EQ(message({}), "valid");
  EXPECT_EQ(message({.time_limit_s = 0}), "exact.time_limit_s = 0: must be in (0, 86400] seconds");
  EXPECT_EQ(message({.max_groups = 0}), "exact.max_groups = 0: must be in [1, 200]");
  EXPECT_EQ(message({.relative_gap = 1}), "exact.relative_gap = 1: must be in [0, 1)");
  EXPECT_EQ(message({.seed = -1}), "exact.seed = -1: must be >= 0");
}

TEST(Exact, IsABaselineWithATimeLimitArgument) {
  OpGraph g;
  std::vector<GroupId> groups;
  add_chain(g, groups, "a", 2, 1024, 0);
  add_chain(g, groups, "b", 2, 1024, 1);
  const Grouping grouping(groups);
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  std::string note;
  const Placement p = place_baseline("exact:5", BaselineContext{g, m, cost, 1, {}, &grouping, &note});
  EXPECT_NEAR(Simulator(g, cost).simulate(p).step_time_s, 2e-3, 1e-9);
  EXPECT_EQ(note.rfind("optimal: model makespan 0.0020 s", 0), 0u) << note;
  EXPECT_THROW(place_baseline("exact:soon", BaselineContext{g, m, cost, 1, {}, &grouping, nullptr}), InputError);
  EXPECT_EQ(find_baseline("exact")->argument, "<seconds>");
}

}  // namespace
}  // namespace placelab
