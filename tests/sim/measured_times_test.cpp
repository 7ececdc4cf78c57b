// Measured op times carried by the graph (Op::measured_s): they win over every cost model, a
// device name over its kind, noop ops included; devices an op names get their own cost class; the
// simulator rejects a key naming no device of the machine.
#include <string>

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/sim/simulator.h"
#include "sim_test_util.h"

namespace placelab {
namespace {

using testing::add;
using testing::FixedCostModel;
using testing::mesh_machine;
using testing::switch_machine;

Op op_measured(std::vector<MeasuredTime> measured, KernelSignature kernel = KernelSignature::gemm(1000, 1000, 1000)) {
  return {.name = "m", .type = "MatMul", .kernel = kernel, .flops = kernel_flops(kernel),
          .bytes_accessed = kernel_bytes(kernel), .measured_s = std::move(measured)};
}

TEST(MeasuredTimes, WinOverTheAnalyticModelANameOverItsKind) {
  Machine m = switch_machine();  // cpu:0, gpu:0..3
  AnalyticCostModel cost(m);
  const Op plain = op_measured({});
  const Op op = op_measured({{"cpu", 0.004}, {"gpu", 0.0012}, {"gpu:1", 0.0011}});
  EXPECT_EQ(cost.op_time_s(op, 0), 0.004);
  EXPECT_EQ(cost.op_time_s(op, 1), 0.0012);
  EXPECT_EQ(cost.op_time_s(op, 2), 0.0011);  // gpu:1's own entry beats "gpu"
  EXPECT_EQ(cost.op_time_s(op, 3), 0.0012);
  EXPECT_EQ(cost.lookup(op, 2).source, CostSource::kGraph);
  EXPECT_EQ(cost.lookup(op, 2).time_s, 0.0011);
  // A device neither key names keeps the model's time.
  const Op gpu_only = op_measured({{"gpu:2", 0.5}});
  EXPECT_EQ(cost.op_time_s(gpu_only, 0), cost.op_time_s(plain, 0));
  EXPECT_EQ(cost.lookup(gpu_only, 0).source, CostSource::kAnalytic);
  EXPECT_EQ(cost.op_time_s(gpu_only, 3), 0.5);
  EXPECT_EQ(cost_source_name(CostSource::kGraph), "graph");
}

TEST(MeasuredTimes, NoopOpsHonourThem) {
  Machine m = switch_machine();
  m.devices[1].launch_overhead_s = 5e-6;
  AnalyticCostModel cost(m);
  Op noop = op_measured({}, KernelSignature{});
  noop.flops = noop.bytes_accessed = 0;
  EXPECT_EQ(cost.op_time_s(noop, 1), 5e-6);  // the launch overhead, without a measured time
  noop.measured_s = {{"gpu", 0.003}};
  EXPECT_EQ(cost.op_time_s(noop, 1), 0.003);
  noop.measured_s = {{"gpu", 0}};
  EXPECT_EQ(cost.op_time_s(noop, 1), 0);
}

TEST(MeasuredTimes, CostSourceSummaryCountsThemAsGraph) {
  Machine m = switch_machine();
  AnalyticCostModel cost(m);
  OpGraph g;
  g.add_op(op_measured({{"gpu", 0.25}}));
  Op other = op_measured({});
  other.name = "n";
  g.add_op(other);
  const std::vector<DeviceId> devices{1, 1};
  const CostSourceSummary s = summarize_cost_sources(g, cost, devices);
  EXPECT_EQ(s.per_op[0].source, CostSource::kGraph);
  EXPECT_EQ(s.per_op[1].source, CostSource::kAnalytic);
  EXPECT_EQ(s.total.ops[static_cast<int>(CostSource::kGraph)], 1);
  EXPECT_EQ(s.total.time_s[static_cast<int>(CostSource::kGraph)], 0.25);
  EXPECT_EQ(s.total.total_ops(), 2);
}

// a (1 s) -> b (2 s by the model) on gpu:0, then c (4 s) on gpu:1 after b; no data moves.
// Measured: b takes 0.5 s on any GPU, 0.25 s on gpu:0; c takes 3 s on gpu:1.
TEST(MeasuredTimes, TheSimulatorUsesThemOverTheModel) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1);
  const OpId b = add(g, "b", 2);
  const OpId c = add(g, "c", 4);
  g.add_edge(0, b, {.control = true});
  g.add_edge(b, c, {.control = true});
  const Placement p{0, 0, 1};
  EXPECT_DOUBLE_EQ(Simulator(g, cost).simulate(p).step_time_s, 1 + 2 + 4);
  g.op(b).measured_s = {{"gpu", 0.5}, {"gpu:0", 0.25}};
  g.op(c).measured_s = {{"gpu:1", 3}};
  Simulator sim(g, cost);
  EXPECT_EQ(sim.op_time_s(b, 0), 0.25);
  EXPECT_EQ(sim.op_time_s(b, 1), 0.5);
  EXPECT_EQ(sim.op_time_s(c, 0), 4);
  EXPECT_EQ(sim.op_time_s(c, 1), 3);
  EXPECT_DOUBLE_EQ(sim.simulate(p).step_time_s, 1 + 0.25 + 3);
  EXPECT_DOUBLE_EQ(sim.simulate(Placement{0, 1, 1}).step_time_s, 1 + 0.5 + 3);
}

TEST(MeasuredTimes, ADeviceAnOpNamesGetsItsOwnCostClass) {
  Machine m = mesh_machine(3);  // three identical GPUs: one analytic class
  AnalyticCostModel cost(m);
  OpGraph g;
  g.add_op(op_measured({}));
  EXPECT_EQ(Simulator(g, cost).op_time_representative(2), 0u);

  // gpu:0 named: it stands alone, gpu:1 and gpu:2 share gpu:1 (the first no op names).
  g.add_op([] {
    Op o = op_measured({{"gpu:0", 0.125}});
    o.name = "x";
    return o;
  }());
  EXPECT_EQ(cost.op_time_representatives(g), (std::vector<DeviceId>{0, 1, 1}));
  Simulator sim(g, cost);
  EXPECT_EQ(sim.op_time_representative(0), 0u);
  EXPECT_EQ(sim.op_time_representative(1), 1u);
  EXPECT_EQ(sim.op_time_representative(2), 1u);
  EXPECT_EQ(sim.op_time_s(1, 0), 0.125);
  EXPECT_EQ(sim.op_time_s(1, 1), cost.op_time_s(g.op(0), 1));
  EXPECT_EQ(sim.op_time_s(1, 2), sim.op_time_s(1, 1));

  // Only gpu:2 named: gpu:0 and gpu:1 keep their class.
  g.op(1).measured_s = {{"gpu:2", 0.125}};
  EXPECT_EQ(cost.op_time_representatives(g), (std::vector<DeviceId>{0, 0, 2}));
  EXPECT_EQ(Simulator(g, cost).op_time_s(1, 2), 0.125);
  // A kind key splits nothing.
  g.op(1).measured_s = {{"gpu", 0.125}};
  EXPECT_EQ(cost.op_time_representatives(g), (std::vector<DeviceId>{0, 0, 0}));
}

TEST(MeasuredTimes, AKeyNamingNoDeviceIsAnInputErrorAtSimulation) {
  Machine m = mesh_machine(2);
  FixedCostModel cost(m);
  OpGraph g;
  add(g, "a", 1);
  g.op(0).measured_s = {{"gpu", 1}, {"gpu:7", 2}};
  try {
    Simulator sim(g, cost);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "op \"a\": measured_s key \"gpu:7\": machine mesh has no device of this name and it is no device kind; "
              "valid keys are cpu, gpu, gpu:0, gpu:1");
  }
  // A kind the machine lacks is fine: it prices nothing here.
  g.op(0).measured_s = {{"cpu", 1}};
  EXPECT_NO_THROW(Simulator(g, cost));
}

}  // namespace
}  // namespace placelab
