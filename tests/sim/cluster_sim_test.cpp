// The simulator on machines of several nodes (hwmodels/cluster.h): a tensor between nodes crosses
// the fabric at the network's latency and bandwidth, and pricing ops once per op-time
// representative (CostModel::op_time_representative) changes no result.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "placelab/hwmodels/cluster.h"
#include "placelab/sim/bounds.h"
#include "placelab/sim/simulator.h"
#include "sim_test_util.h"

namespace placelab {
namespace {

using testing::add;
using testing::expect_identical;
using testing::FixedCostModel;

std::vector<ClusterNode> nodes_of(const Machine& node, int count) {
  std::vector<ClusterNode> nodes;
  for (int i = 0; i < count; ++i) nodes.push_back({"node" + std::to_string(i), node});
  return nodes;
}

TEST(ClusterSim, ATensorBetweenNodesCrossesTheFabric) {
  Machine node;
  node.name = "one-gpu";
  node.devices.push_back(testing::device("gpu:0", DeviceKind::kGpu));
  const Machine m = compose_cluster("two", nodes_of(node, 2), {.bandwidth_Bps = 1000, .latency_s = 0.5});
  FixedCostModel cost(m);
  OpGraph g;
  const OpId a = add(g, "a", 1.0, 500);
  const OpId b = add(g, "b", 1.0);
  g.add_edge(a, b, {.bytes = 500});
  const Simulator sim(g, cost);
  const SimResult r = sim.simulate(Placement{0, 1});
  // 1 s of a, then 0.5 s latency + 500 B at 1000 B/s, then 1 s of b.
  EXPECT_DOUBLE_EQ(r.step_time_s, 3.0);
  EXPECT_EQ(r.transfers, 1);
  int network_directions = 0;
  for (LinkDirection d = 0; d < m.num_link_directions(); ++d)
    if (r.links[d].bytes > 0) {
      EXPECT_EQ(r.links[d].bytes, 500) << m.link_direction_name(d);
      EXPECT_DOUBLE_EQ(r.links[d].busy_s, 1.0) << m.link_direction_name(d);
      network_directions += m.links[d / 2].kind == LinkKind::kNetwork;
    }
  EXPECT_EQ(network_directions, 2);  // node0/nic0 -> fabric -> node1/nic0
}

TEST(ClusterSim, RepresentativesChangeNoResult) {
  // Per node: two CPUs, two GPU types, all behind one switch.
  Machine node;
  node.name = "mixed";
  node.devices = {testing::device("cpu:0", DeviceKind::kCpu, int64_t{1} << 40, 2),
                  testing::device("cpu:1", DeviceKind::kCpu, int64_t{1} << 40, 2),
                  testing::device("gpu:0", DeviceKind::kGpu), testing::device("gpu:1", DeviceKind::kGpu),
                  testing::device("gpu:2", DeviceKind::kGpu)};
  node.devices[4].peak_flops_per_s = 3e12;
  node.devices[4].launch_overhead_s = 4e-6;
  node.switches = {"sw"};
  for (const Device& d : node.devices) node.links.push_back(testing::link(d.name, "sw", 1e9, 1e-6));
  const Machine m = compose_cluster("mixed4", nodes_of(node, 4), {.bandwidth_Bps = 5e8, .latency_s = 2e-6});
  const AnalyticCostModel grouped(m);
  const testing::UnpromisingCost every(grouped);  // every device priced on its own, as before

  OpGraph g = testing::random_dag(7, 30, 12);
  for (OpId op = 0; op < g.num_ops(); op += 7) g.op(op).cpu_only = true;
  for (OpId op = 0; op < g.num_ops(); ++op) {  // gemms of 0.5–2 GFLOP: a time per device type
    g.op(op).kernel = KernelSignature::gemm(64, 64, 64);
    g.op(op).flops *= 1e9;
  }
  const Simulator fast(g, grouped), full(g, every);
  const auto last = static_cast<DeviceId>(m.num_devices() - 1);  // node3/gpu:2, priced as node0/gpu:2
  EXPECT_EQ(fast.op_time_representative(last), 4);
  EXPECT_EQ(full.op_time_representative(last), last);
  for (DeviceId d = 0; d < m.num_devices(); ++d)
    for (OpId op = 0; op < g.num_ops(); op += 11) EXPECT_EQ(fast.op_time_s(op, d), full.op_time_s(op, d));
  EXPECT_NE(fast.op_time_s(1, 2), fast.op_time_s(1, 4));  // the two GPU types differ
  EXPECT_NE(fast.op_time_s(1, 0), fast.op_time_s(1, 2));

  for (uint32_t seed = 1; seed <= 5; ++seed) {
    const Placement p = testing::random_placement(seed, g.num_ops(), m.num_devices());
    expect_identical(fast.simulate(p), full.simulate(p));
  }
  // The lower bound, over every device and over a subset (GPUs of two nodes: soft placement
  // moves the cpu_only ops to node0/cpu:0, outside the subset).
  const std::vector<DeviceId> subset = {2, 3, 4, 7, 8, 9};
  for (std::span<const DeviceId> allowed : {std::span<const DeviceId>{}, std::span<const DeviceId>(subset)}) {
    const StepLowerBound x = step_lower_bound(g, fast, allowed), y = step_lower_bound(g, full, allowed);
    EXPECT_EQ(x.step_s, y.step_s);
    EXPECT_EQ(x.critical_path_s, y.critical_path_s);
    EXPECT_EQ(x.work_s, y.work_s);
    EXPECT_EQ(x.slots, y.slots);
    EXPECT_EQ(x.memory_bytes, y.memory_bytes);
  }
}

}  // namespace
}  // namespace placelab
