// Machines of several nodes (cluster.h): names, the NICs and the fabric, routes across and within
// nodes, composition errors, composed calibrations, and the cost models' op-time representatives
// that let the simulator price a cluster's identical devices once.
#include "placelab/hwmodels/cluster.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "placelab/hwmodels/machine_io.h"
#include "placelab/hwmodels/machine_source.h"

namespace placelab {
namespace {

// What `placelab calibrate --backend cpu` writes for two devices: CPUs joined by one measured
// memcpy link, no switches, copies run by the destination's own cores.
Machine cpu_node(double link_latency_s = 4e-6) {
  Machine m;
  m.name = "localhost";
  for (int i = 0; i < 2; ++i)
    m.devices.push_back({.name = "cpu:" + std::to_string(i), .kind = DeviceKind::kCpu, .peak_flops_per_s = 1e11,
                         .memory_bandwidth_Bps = 2e10, .memory_bytes = int64_t{1} << 33, .streams = 2,
                         .launch_overhead_s = 2e-6, .copy_engine = false});
  m.links.push_back({.a = "cpu:0", .b = "cpu:1", .kind = LinkKind::kMemory, .bandwidth_Bps = 5e9,
                     .latency_s = link_latency_s});
  m.finalize();
  return m;
}

std::vector<ClusterNode> nodes_of(const Machine& node, int count) {
  std::vector<ClusterNode> nodes;
  for (int i = 0; i < count; ++i) nodes.push_back({"node" + std::to_string(i), node});
  return nodes;
}

DeviceId id(const Machine& m, std::string_view name) {
  auto d = m.find_device(name);
  if (!d) throw std::runtime_error("no device " + std::string(name));
  return *d;
}

std::vector<std::string> hop_names(const Machine& m, std::string_view src, std::string_view dst) {
  std::vector<std::string> names;
  for (LinkDirection d : m.route(id(m, src), id(m, dst)).hops) names.push_back(m.link_direction_name(d));
  return names;
}

std::string compose_error(std::span<const ClusterNode> nodes, const NetworkSpec& net) {
  try {
    compose_cluster("c", nodes, net);
  } catch (const MachineError& e) {
    return e.field() + " | " + e.what();
  }
  return "no error";
}

TEST(Cluster, NodeOfIsThePrefixBeforeTheFirstSlash) {
  EXPECT_EQ(node_of("node3/gpu:0"), "node3");
  EXPECT_EQ(node_of("node3/pcie:1"), "node3");
  EXPECT_EQ(node_of("a/b/c"), "a");
  EXPECT_EQ(node_of("gpu:0"), "");
  EXPECT_EQ(node_of(kFabricSwitch), "");
  EXPECT_EQ(cluster_device_name("node3", "gpu:0"), "node3/gpu:0");
}

TEST(Cluster, PrefixesEveryNameAndAddsNicsAndTheFabric) {
  const std::vector<ClusterNode> nodes = nodes_of(cpu_node(), 3);
  const Machine m = compose_cluster("cpus", nodes, {.bandwidth_Bps = 1e9, .latency_s = 20e-6});
  EXPECT_EQ(m.name, "cpus");
  ASSERT_EQ(m.num_devices(), 6u);
  EXPECT_EQ(m.devices[0].name, "node0/cpu:0");
  EXPECT_EQ(m.devices[3].name, "node1/cpu:1");
  EXPECT_EQ(m.devices[5].name, "node2/cpu:1");
  EXPECT_FALSE(m.devices[5].copy_engine);  // every field but the name is the node's
  EXPECT_EQ(m.switches, (std::vector<std::string>{"node0/nic0", "node1/nic0", "node2/nic0", "fabric"}));
  // Per node: its own link, the NIC on each of its two devices, the NIC to the fabric.
  ASSERT_EQ(m.links.size(), 3u * 4u);
  EXPECT_EQ(m.links[4].a, "node1/cpu:0");
  EXPECT_EQ(m.links[4].b, "node1/cpu:1");
  EXPECT_EQ(m.links[7].kind, LinkKind::kNetwork);
  EXPECT_EQ(m.links[7].b, "fabric");
  EXPECT_DOUBLE_EQ(m.links[7].latency_s, 10e-6);
  for (const Device& d : m.devices) EXPECT_EQ(node_of(d.name).substr(0, 4), "node");
  EXPECT_NE(m.description.find("3 nodes"), std::string::npos) << m.description;
}

// A ping-pong between two hosts measures one latency and one bandwidth; a route between the
// devices the NICs sit on must reproduce exactly those.
TEST(Cluster, CrossNodeRoutesTakeTheMeasuredLatencyAndBandwidth) {
  const std::vector<ClusterNode> nodes = nodes_of(cpu_node(), 2);
  const double latency = 23.7e-6, bandwidth = 1.17e9;
  const Machine m = compose_cluster("cpus", nodes, {.bandwidth_Bps = bandwidth, .latency_s = latency});
  EXPECT_EQ(hop_names(m, "node0/cpu:0", "node1/cpu:1"),
            (std::vector<std::string>{"pcie node0/cpu:0->node0/nic0", "network node0/nic0->fabric",
                                      "network fabric->node1/nic0", "pcie node1/nic0->node1/cpu:1"}));
  for (auto [src, dst] : {std::pair{"node0/cpu:0", "node1/cpu:1"}, std::pair{"node1/cpu:1", "node0/cpu:0"},
                          std::pair{"node0/cpu:1", "node1/cpu:0"}}) {
    const Route r = m.route(id(m, src), id(m, dst));
    EXPECT_EQ(r.latency_s, latency) << src << " -> " << dst;
    EXPECT_EQ(r.bandwidth_Bps, bandwidth) << src << " -> " << dst;
  }
  const AnalyticCostModel cost(m);
  EXPECT_DOUBLE_EQ(cost.transfer_time_s(1 << 20, id(m, "node0/cpu:0"), id(m, "node1/cpu:0")),
                   latency + (1 << 20) / bandwidth);
}

// Traffic between two devices of one node stays on the node's links, even where the NIC, linked
// to both at latency 0, or the network would be quicker.
TEST(Cluster, SameNodeRoutesNeverLeaveTheNode) {
  const std::vector<ClusterNode> nodes = nodes_of(cpu_node(/*link_latency_s=*/50e-6), 2);
  const Machine m = compose_cluster("cpus", nodes, {.bandwidth_Bps = 1e10, .latency_s = 1e-6});
  EXPECT_EQ(hop_names(m, "node1/cpu:0", "node1/cpu:1"),
            (std::vector<std::string>{"memory node1/cpu:0->node1/cpu:1"}));
  EXPECT_DOUBLE_EQ(m.route(id(m, "node1/cpu:0"), id(m, "node1/cpu:1")).latency_s, 50e-6);

  // A DGX-1's GPUs without NVLink between them copy through the host, not out over InfiniBand and
  // back (17.5 µs against 18 µs here): every pair inside a node routes as in the node itself.
  const Machine dgx1 = load_machine("dgx1");
  const Machine c = compose_cluster("dgx1x2", nodes_of(dgx1, 2),
                                    {.bandwidth_Bps = 12.5e9, .latency_s = 1.5e-6,
                                     .nics = {{"plx:0"}, {"plx:1"}, {"plx:2"}, {"plx:3"}}});
  for (const std::string node : {"node0", "node1"})
    for (DeviceId s = 0; s < dgx1.num_devices(); ++s)
      for (DeviceId t = 0; t < dgx1.num_devices(); ++t) {
        if (s == t) continue;
        std::vector<std::string> expected;
        for (LinkDirection d : dgx1.route(s, t).hops) {
          const Link& l = dgx1.links[d / 2];
          const bool forward = d % 2 == 0;
          expected.push_back(std::string(link_kind_name(l.kind)) + " " + node + "/" + (forward ? l.a : l.b) + "->" +
                             node + "/" + (forward ? l.b : l.a));
        }
        const std::string a = node + "/" + dgx1.devices[s].name, b = node + "/" + dgx1.devices[t].name;
        EXPECT_EQ(hop_names(c, a, b), expected) << a << " -> " << b;
        EXPECT_EQ(c.route(id(c, a), id(c, b)).latency_s, dgx1.route(s, t).latency_s);
      }
}

TEST(Cluster, NicsOnPcieSwitchesCarryGpuTrafficAcrossNodes) {
  const Machine m = compose_cluster("dgx1x2", nodes_of(load_machine("dgx1"), 2),
                                    {.bandwidth_Bps = 12.5e9, .latency_s = 1.5e-6,
                                     .nics = {{"plx:0"}, {"plx:1"}, {"plx:2"}, {"plx:3"}}});
  EXPECT_EQ(hop_names(m, "node0/gpu:0", "node1/gpu:5"),
            (std::vector<std::string>{"pcie node0/gpu:0->node0/plx:0", "pcie node0/plx:0->node0/nic0",
                                      "network node0/nic0->fabric", "network fabric->node1/nic2",
                                      "pcie node1/nic2->node1/plx:2", "pcie node1/plx:2->node1/gpu:5"}));
  const Route r = m.route(id(m, "node0/gpu:0"), id(m, "node1/gpu:5"));
  EXPECT_DOUBLE_EQ(r.latency_s, 1.5e-6);  // the network's: dgx1's PCIe hops add no latency of their own
  EXPECT_DOUBLE_EQ(r.bandwidth_Bps, 11.4e9);            // gpu:0's D2H is narrower than EDR
  // The NIC–switch link takes the switch's widest PCIe link: the 15.75 GB/s uplink.
  for (const Link& l : m.links)
    if (l.a == "node1/nic3") {
      EXPECT_EQ(l.b == "fabric" ? 12.5e9 : 15.75e9, l.bandwidth_Bps) << l.b;
      EXPECT_EQ(l.b == "fabric" ? 0.75e-6 : 0.0, l.latency_s) << l.b;
    }
}

TEST(Cluster, ANicMayHaveSeveralAttachPoints) {
  // h100x8 links its GPUs straight to the root complexes: NIC k sits beside gpu:k and on its
  // socket's root complex, so GPUs and CPUs both reach the network.
  const Machine m = compose_cluster("h100x8x2", nodes_of(load_machine("h100x8"), 2),
                                    {.bandwidth_Bps = 50e9, .latency_s = 1e-6,
                                     .nics = {{"gpu:0", "rc:0"}, {"gpu:4", "rc:1"}}});
  EXPECT_EQ(hop_names(m, "node0/gpu:4", "node1/gpu:0"),
            (std::vector<std::string>{"pcie node0/gpu:4->node0/nic1", "network node0/nic1->fabric",
                                      "network fabric->node1/nic0", "pcie node1/nic0->node1/gpu:0"}));
  EXPECT_DOUBLE_EQ(m.route(id(m, "node0/gpu:4"), id(m, "node1/gpu:0")).bandwidth_Bps, 50e9);
  EXPECT_EQ(hop_names(m, "node1/cpu:1", "node0/cpu:0").front(), "memory node1/cpu:1->node1/rc:1");
  // Within a node, gpu:0 → cpu:0 keeps its PCIe link; the NIC does not relay gpu:0 to rc:0.
  EXPECT_EQ(hop_names(m, "node0/gpu:0", "node0/cpu:0"),
            (std::vector<std::string>{"pcie node0/gpu:0->node0/rc:0", "memory node0/rc:0->node0/cpu:0"}));
}

TEST(Cluster, CompositionErrorsNameTheField) {
  const Machine node = cpu_node();
  const NetworkSpec net{.bandwidth_Bps = 1e9, .latency_s = 1e-6};
  EXPECT_EQ(compose_error({}, net), "nodes | nodes = 0: a cluster needs at least one node");
  std::vector<ClusterNode> nodes = nodes_of(node, 2);
  nodes[1].name = "node0";
  EXPECT_EQ(compose_error(nodes, net), "nodes[1].name | nodes[1].name = node0: duplicate node name");
  nodes[1].name = "rack/1";
  EXPECT_EQ(compose_error(nodes, net),
            "nodes[1].name | nodes[1].name = rack/1: must not contain '/' (it separates a node from a device name)");
  nodes[1].name = "";
  EXPECT_EQ(compose_error(nodes, net), "nodes[1].name | nodes[1].name: must not be empty");
  nodes = nodes_of(node, 2);
  EXPECT_EQ(compose_error(nodes, {.bandwidth_Bps = 0, .latency_s = 1e-6}),
            "network.bandwidth_Bps | network.bandwidth_Bps = 0: must be a finite number > 0");
  EXPECT_EQ(compose_error(nodes, {.bandwidth_Bps = 1e9, .latency_s = -1}),
            "network.latency_s | network.latency_s = -1: must be a finite number >= 0");
  EXPECT_EQ(compose_error(nodes, {.bandwidth_Bps = 1e9, .latency_s = 0, .nics = {{"cpu:0"}, {"cpu:1", "plx:0"}}}),
            "network.nics[1][1] | network.nics[1][1] = plx:0: not a device or switch of node node0 (machine localhost)");
  EXPECT_EQ(compose_error(nodes, {.bandwidth_Bps = 1e9, .latency_s = 0, .nics = {{"cpu:0", "cpu:0"}}}),
            "network.nics[0][1] | network.nics[0][1] = cpu:0: names the same attach point twice");
  EXPECT_EQ(compose_error(nodes, {.bandwidth_Bps = 1e9, .latency_s = 0, .nics = {{}}}),
            "network.nics[0] | network.nics[0]: must name at least one attach point");
  Machine clash = node;
  clash.switches.push_back("nic0");
  clash.links.push_back({.a = "cpu:0", .b = "nic0", .kind = LinkKind::kPcie, .bandwidth_Bps = 1e9});
  EXPECT_EQ(compose_error(nodes_of(clash, 1), net),
            "network.nics[0] | network.nics[0] = nic0: node node0 already has a device or switch of that name");
  Machine slashed = node;
  slashed.devices[1].name = "x/cpu:1";
  EXPECT_EQ(compose_error(nodes_of(slashed, 1), net),
            "nodes[0].machine.devices[1].name | nodes[0].machine.devices[1].name = x/cpu:1: must not contain '/' "
            "(a node of a cluster must be a single-node machine)");
  EXPECT_EQ(compose_error(nodes_of(node, static_cast<int>(kMaxClusterDevices / 2 + 1)), net),
            "nodes | nodes = 2049 nodes of 4098 devices in all: a cluster may hold at most 4096 devices");
}

Calibration node_calibration(const std::string& host, double gemm_s) {
  Calibration c;
  c.backend = "cpu";
  c.host = host;
  c.created = host == "b" ? "2026-11-24T10:00:00Z" : "2026-11-24T09:00:00Z";
  for (int i = 0; i < 2; ++i) {
    DeviceCalibration d;
    d.device = "cpu:" + std::to_string(i);
    d.kernel_times_s[KernelSignature::gemm(64, 64, 64)] = gemm_s * (i + 1);
    c.devices.push_back(d);
  }
  c.copies.push_back({.src = "cpu:0", .dst = "cpu:1", .fit = {.latency_s = 3e-6, .bandwidth_Bps = 4e9}});
  return c;
}

TEST(Cluster, ComposedCalibrationLoadsAndPricesPrefixedDevices) {
  const std::vector<ClusterNode> nodes = nodes_of(cpu_node(), 2);
  const Machine m = compose_cluster("cpus", nodes, {.bandwidth_Bps = 1.1e9, .latency_s = 30e-6});
  const std::vector<ClusterCalibrationNode> cals = {{"node0", node_calibration("a", 1e-4)},
                                                    {"node1", node_calibration("b", 2e-4)}};
  const Calibration c = compose_cluster_calibration(cals);
  EXPECT_EQ(c.backend, "cpu");
  EXPECT_EQ(c.host, "a,b");
  EXPECT_EQ(c.created, "2026-11-24T10:00:00Z");
  ASSERT_EQ(c.devices.size(), 4u);
  EXPECT_EQ(c.devices[2].device, "node1/cpu:0");
  ASSERT_EQ(c.copies.size(), 2u);
  EXPECT_EQ(c.copies[1].src, "node1/cpu:0");
  EXPECT_EQ(c.copies[1].dst, "node1/cpu:1");

  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("placelab-cluster-" + std::to_string(::getpid()) + ".yaml");
  write_calibrated_machine(path, m, c);
  const std::unique_ptr<MachineSource> ms = load_machine_source(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(ms->calibration);
  ASSERT_EQ(ms->machine.num_devices(), 4u);
  const Op gemm{.name = "mm", .type = "MatMul", .kernel = KernelSignature::gemm(64, 64, 64)};
  const CostLookup l = ms->cost->lookup(gemm, id(ms->machine, "node1/cpu:1"));
  EXPECT_EQ(l.source, CostSource::kMeasured);
  EXPECT_DOUBLE_EQ(l.time_s, 2e-6 + 4e-4);  // launch overhead + node1's measured cpu:1 time
  // Copies inside a node use the node's measured fit; across nodes, the network's route.
  EXPECT_DOUBLE_EQ(ms->cost->transfer_time_s(4000, id(ms->machine, "node1/cpu:0"), id(ms->machine, "node1/cpu:1")),
                   3e-6 + 4000 / 4e9);
  EXPECT_DOUBLE_EQ(ms->cost->transfer_time_s(4000, id(ms->machine, "node0/cpu:1"), id(ms->machine, "node1/cpu:0")),
                   30e-6 + 4000 / 1.1e9);
  // Each calibrated device is priced by its own measurements.
  EXPECT_EQ(ms->cost->op_time_representative(id(ms->machine, "node1/cpu:1")), id(ms->machine, "node1/cpu:1"));
}

TEST(Cluster, ComposedCalibrationErrors) {
  std::vector<ClusterCalibrationNode> cals = {{"node0", node_calibration("a", 1e-4)}, {"node0", node_calibration("b", 1e-4)}};
  EXPECT_THROW(compose_cluster_calibration(cals), Error);
  cals[1].name = "n/1";
  EXPECT_THROW(compose_cluster_calibration(cals), Error);
  EXPECT_THROW(compose_cluster_calibration({}), Error);
}

TEST(OpTimeRepresentative, AnalyticModelGroupsDevicesWithEqualCostFields) {
  const Machine m = compose_cluster("dgx1x3", nodes_of(load_machine("dgx1"), 3),
                                    {.bandwidth_Bps = 12.5e9, .latency_s = 1.5e-6, .nics = {{"plx:0"}}});
  const AnalyticCostModel cost(m);
  for (DeviceId d = 0; d < m.num_devices(); ++d)
    EXPECT_EQ(cost.op_time_representative(d), m.devices[d].kind == DeviceKind::kCpu ? 0 : 2) << m.devices[d].name;
  Machine other = load_machine("dgx1");
  other.devices[5].launch_overhead_s = 6e-6;  // gpu:3
  other.devices[7].efficiency.reset();        // gpu:5
  other.finalize();
  const AnalyticCostModel cost2(other);
  EXPECT_EQ(cost2.op_time_representative(4), 2);
  EXPECT_EQ(cost2.op_time_representative(5), 5);
  EXPECT_EQ(cost2.op_time_representative(7), 7);
  EXPECT_EQ(cost2.op_time_representative(9), 2);
}

}  // namespace
}  // namespace placelab
