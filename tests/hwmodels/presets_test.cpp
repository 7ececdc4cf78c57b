// Every built-in preset loads, finalises, and routes each device pair the way its topology
// comment says; every number in a preset carries a source comment.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "placelab/hwmodels/machine_io.h"

namespace placelab {
namespace {

const std::vector<std::string> kExpectedPresets = {"dgx1",   "dgx1x64-ib100", "dgx1x8-ib100", "h100x8",
                                                   "h100x8x32-ndr400", "k80x2", "k80x4", "k80x8", "p100x4"};

std::vector<std::string> hop_names(const Machine& m, DeviceId src, DeviceId dst) {
  std::vector<std::string> names;
  for (LinkDirection d : m.route(src, dst).hops) names.push_back(m.link_direction_name(d));
  return names;
}
DeviceId id(const Machine& m, std::string_view name) {
  auto d = m.find_device(name);
  if (!d) throw std::runtime_error("no device " + std::string(name));
  return *d;
}

TEST(Presets, NamesAreSortedAndComplete) { EXPECT_EQ(preset_names(), kExpectedPresets); }

class EveryPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPreset, LoadsAndRoutesEveryPairThroughSwitchesOnly) {
  Machine m = load_machine(GetParam());
  EXPECT_EQ(m.name, GetParam());
  EXPECT_FALSE(m.description.empty());
  ASSERT_TRUE(m.default_cpu());
  std::set<std::string> switches(m.switches.begin(), m.switches.end());
  for (DeviceId s = 0; s < m.num_devices(); ++s) {
    for (DeviceId t = 0; t < m.num_devices(); ++t) {
      if (s == t) continue;
      const Route& r = m.route(s, t);
      ASSERT_FALSE(r.hops.empty());
      EXPECT_GT(r.bandwidth_Bps, 0);
      // Consecutive hops chain, start at s, end at t, and pass only through switches.
      for (std::size_t h = 0; h < r.hops.size(); ++h) {
        const Link& l = m.links[r.hops[h] / 2];
        const std::string& from = r.hops[h] % 2 == 0 ? l.a : l.b;
        const std::string& to = r.hops[h] % 2 == 0 ? l.b : l.a;
        EXPECT_EQ(from == m.devices[s].name, h == 0) << from;
        EXPECT_EQ(to == m.devices[t].name, h + 1 == r.hops.size()) << to;
        if (h + 1 < r.hops.size()) {
          EXPECT_TRUE(switches.count(to)) << GetParam() << ": " << to << " relays";
        }
      }
    }
  }
}

// Every line that sets a number (a device's or link's quantity, a cluster's node count or
// network) ends with a "# source" comment.
TEST_P(EveryPreset, EveryNumberHasASourceComment) {
  const std::string text(preset_yaml(GetParam()));
  std::istringstream in{text};
  const std::regex number_field(
      R"(^\s*(peak_flops|memory_bandwidth_Bps|memory_bytes|streams|launch_overhead_s|bandwidth_Bps|latency_s|reverse_bandwidth_Bps|reverse_latency_s|attach_bandwidth_Bps|node|nodes|nics):)");
  int numbers = 0;
  for (std::string line; std::getline(in, line);) {
    if (!std::regex_search(line, number_field)) continue;
    ++numbers;
    auto hash = line.find(" # ");
    ASSERT_NE(hash, std::string::npos) << GetParam() << ": " << line;
    EXPECT_GT(line.size(), hash + 8) << GetParam() << ": comment too short: " << line;
  }
  // A cluster preset sets its node, node count and network; a node preset every device and link.
  EXPECT_GT(numbers, text.find("\ncluster:") != std::string::npos ? 4 : 10);
}

// The cluster presets: node counts, NICs per node, and a cross-node route through the fabric
// that pays the network's measured latency once.
TEST(Presets, ClustersComposeTheirNodePresets) {
  struct Case {
    std::string name, node;
    std::size_t nodes, nics_per_node;
    std::string src, dst;
    double network_latency_s;
  };
  for (const Case& c : {Case{"dgx1x8-ib100", "dgx1", 8, 4, "node0/gpu:1", "node7/gpu:6", 1.29e-6},
                        Case{"dgx1x64-ib100", "dgx1", 64, 4, "node63/gpu:0", "node1/gpu:3", 1.29e-6},
                        Case{"h100x8x32-ndr400", "h100x8", 32, 8, "node5/gpu:2", "node9/gpu:7", 1.29e-6}}) {
    const Machine m = load_machine(c.name);
    const Machine node = load_machine(c.node);
    EXPECT_EQ(m.num_devices(), c.nodes * node.num_devices()) << c.name;
    EXPECT_EQ(m.switches.size(), c.nodes * (node.switches.size() + c.nics_per_node) + 1) << c.name;
    // Within a node, the node preset's own route; across nodes, once through the fabric.
    const Route inside = m.route(*m.find_device("node3/gpu:1"), *m.find_device("node3/gpu:6"));
    const Route local = node.route(*node.find_device("gpu:1"), *node.find_device("gpu:6"));
    EXPECT_EQ(inside.latency_s, local.latency_s) << c.name;
    EXPECT_EQ(inside.bandwidth_Bps, local.bandwidth_Bps) << c.name;  // the node's route figures too
    EXPECT_EQ(inside.hops.size(), local.hops.size()) << c.name;
    const Route across = m.route(*m.find_device(c.src), *m.find_device(c.dst));
    int network_hops = 0;
    for (LinkDirection d : across.hops) network_hops += m.links[d / 2].kind == LinkKind::kNetwork;
    EXPECT_EQ(network_hops, 2) << c.name;
    // GPU to GPU across nodes: the network's measured figures (GPUDirect: PCIe hops inside them).
    EXPECT_DOUBLE_EQ(across.latency_s, c.network_latency_s) << c.name;
  }
  const Machine d = load_machine("dgx1x8-ib100");
  EXPECT_DOUBLE_EQ(d.route(*d.find_device("node0/gpu:1"), *d.find_device("node7/gpu:6")).bandwidth_Bps, 10.2e9);
  // H100: each GPU sends through its own NIC, straight to the peer GPU's: the network's latency.
  const Machine h = load_machine("h100x8x32-ndr400");
  const Route r = h.route(*h.find_device("node0/gpu:3"), *h.find_device("node1/gpu:6"));
  EXPECT_EQ(r.hops.size(), 4u);
  EXPECT_DOUBLE_EQ(r.latency_s, 1.29e-6);
  EXPECT_DOUBLE_EQ(r.bandwidth_Bps, 50e9);
}

// Test names allow letters, digits and '_' only: "dgx1x8-ib100" runs as dgx1x8_ib100.
INSTANTIATE_TEST_SUITE_P(Presets, EveryPreset, ::testing::ValuesIn(kExpectedPresets),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Presets, K80DeviceCountsAndBoards) {
  EXPECT_EQ(load_machine("k80x2").num_devices(), 3u);
  EXPECT_EQ(load_machine("k80x4").num_devices(), 5u);
  EXPECT_EQ(load_machine("k80x8").num_devices(), 9u);
  Machine m = load_machine("k80x4");
  const Device& die = m.devices[id(m, "gpu:0")];
  EXPECT_DOUBLE_EQ(die.peak_flops_per_s, 4.37e12);
  EXPECT_EQ(die.streams, 1);
  EXPECT_EQ(m.devices[id(m, "cpu:0")].kind, DeviceKind::kCpu);
}

TEST(Presets, K80SameBoardCrossesOnlyTheBoardSwitch) {
  Machine m = load_machine("k80x4");
  EXPECT_EQ(hop_names(m, id(m, "gpu:0"), id(m, "gpu:1")),
            (std::vector<std::string>{"pcie gpu:0->plx:0", "pcie plx:0->gpu:1"}));
  const Route& r = m.route(id(m, "gpu:0"), id(m, "gpu:1"));
  EXPECT_DOUBLE_EQ(r.bandwidth_Bps, 8.89e9);  // measured P2P, a route figure (the die link is 11.3 GB/s)
  EXPECT_NEAR(r.latency_s, 7.2e-6, 1e-12);    // measured same-board P2P 6.7–7.8 µs
  EXPECT_TRUE(m.has_route_figure(id(m, "gpu:0"), id(m, "gpu:1")));
}

TEST(Presets, K80AcrossBoardsGoesThroughTheRootComplex) {
  Machine m = load_machine("k80x8");
  EXPECT_EQ(hop_names(m, id(m, "gpu:1"), id(m, "gpu:6")),
            (std::vector<std::string>{"pcie gpu:1->plx:0", "pcie plx:0->rc:0", "pcie rc:0->plx:3",
                                      "pcie plx:3->gpu:6"}));
  const Route& r = m.route(id(m, "gpu:1"), id(m, "gpu:6"));
  EXPECT_DOUBLE_EQ(r.bandwidth_Bps, 8.89e9);  // measured P2P across boards, a route figure
  EXPECT_NEAR(r.latency_s, 9.4e-6, 1e-12);    // measured cross-board P2P 8.0–11.6 µs
  // Host to die: memory, uplink, die link; the die link (11.3 GB/s, measured H2D) is the bottleneck.
  const Route& h2d = m.route(id(m, "cpu:0"), id(m, "gpu:5"));
  EXPECT_EQ(h2d.hops.size(), 3u);
  EXPECT_DOUBLE_EQ(h2d.bandwidth_Bps, 11.3e9);
  EXPECT_FALSE(m.has_route_figure(id(m, "cpu:0"), id(m, "gpu:5")));
  // Every die-to-die pair carries the P2P figure.
  for (DeviceId a = 1; a < m.num_devices(); ++a)
    for (DeviceId b = 1; b < m.num_devices(); ++b)
      if (a != b) {
        EXPECT_DOUBLE_EQ(m.route(a, b).bandwidth_Bps, 8.89e9) << a << " -> " << b;
      }
}

TEST(Presets, P100x4SocketsAndQpi) {
  Machine m = load_machine("p100x4");
  EXPECT_EQ(m.num_devices(), 6u);
  auto route = [&](const char* a, const char* b) { return m.route(id(m, a), id(m, b)); };
  // Same socket: host copies at the measured NUMA-local rates; GPU to GPU through the root
  // complex at a P2P figure (the K80 server's, an estimate), not at either GPU's host rate.
  EXPECT_EQ(hop_names(m, id(m, "gpu:0"), id(m, "gpu:1")),
            (std::vector<std::string>{"pcie gpu:0->rc:0", "pcie rc:0->gpu:1"}));
  EXPECT_DOUBLE_EQ(route("gpu:0", "gpu:1").bandwidth_Bps, 8.89e9);
  EXPECT_DOUBLE_EQ(route("gpu:0", "gpu:1").latency_s, 8.8e-6);
  EXPECT_DOUBLE_EQ(route("gpu:1", "cpu:0").bandwidth_Bps, 12.89e9);  // D2H
  EXPECT_DOUBLE_EQ(route("cpu:0", "gpu:1").bandwidth_Bps, 12.15e9);  // H2D
  EXPECT_DOUBLE_EQ(route("cpu:0", "gpu:1").latency_s, 8.5e-6);
  // Across sockets, one QPI segment, but a figure per path: host memory at the measured NUMA-remote
  // rates, GPU to GPU staged through the host at the K80 server's cross-socket rate.
  EXPECT_EQ(hop_names(m, id(m, "cpu:0"), id(m, "gpu:2")),
            (std::vector<std::string>{"memory cpu:0->rc:0", "qpi rc:0->rc:1", "pcie rc:1->gpu:2"}));
  EXPECT_DOUBLE_EQ(route("cpu:0", "gpu:2").bandwidth_Bps, 3.78e9);
  EXPECT_DOUBLE_EQ(route("gpu:0", "cpu:1").bandwidth_Bps, 2.54e9);
  EXPECT_DOUBLE_EQ(route("gpu:0", "cpu:1").latency_s, 9.5e-6);
  EXPECT_EQ(hop_names(m, id(m, "gpu:0"), id(m, "gpu:3")),
            (std::vector<std::string>{"pcie gpu:0->rc:0", "qpi rc:0->rc:1", "pcie rc:1->gpu:3"}));
  EXPECT_DOUBLE_EQ(route("gpu:0", "gpu:3").bandwidth_Bps, 7.8e9);
  EXPECT_DOUBLE_EQ(route("gpu:3", "gpu:0").latency_s, 24e-6);
  // CPU to CPU: the direct QPI link, not the PCIe path.
  EXPECT_EQ(hop_names(m, id(m, "cpu:0"), id(m, "cpu:1")), (std::vector<std::string>{"qpi cpu:0->cpu:1"}));
}

TEST(Presets, Dgx1NvlinkCubeMeshAndPcieFallback) {
  Machine m = load_machine("dgx1");
  EXPECT_EQ(m.num_devices(), 10u);
  // NV2 pair: one bonded link of 48.48 GB/s; NV1 pair: 24.24 GB/s.
  EXPECT_EQ(hop_names(m, id(m, "gpu:0"), id(m, "gpu:3")), (std::vector<std::string>{"nvlink gpu:0->gpu:3"}));
  EXPECT_DOUBLE_EQ(m.route(id(m, "gpu:0"), id(m, "gpu:3")).bandwidth_Bps, 48.48e9);
  EXPECT_DOUBLE_EQ(m.route(id(m, "gpu:1"), id(m, "gpu:0")).bandwidth_Bps, 24.24e9);
  // Each GPU has 6 NVLinks: NV2 pairs count twice.
  for (int g = 0; g < 8; ++g) {
    std::string name = "gpu:" + std::to_string(g);
    double links = 0;
    for (const Link& l : m.links)
      if (l.kind == LinkKind::kNvlink && (l.a == name || l.b == name)) links += l.bandwidth_Bps > 40e9 ? 2 : 1;
    EXPECT_EQ(links, 6) << name;
  }
  // gpu:0 and gpu:5 share no NVLink: PCIe switch, both root complexes, QPI, PCIe switch.
  EXPECT_EQ(hop_names(m, id(m, "gpu:0"), id(m, "gpu:5")),
            (std::vector<std::string>{"pcie gpu:0->plx:0", "pcie plx:0->rc:0", "qpi rc:0->rc:1",
                                      "pcie rc:1->plx:2", "pcie plx:2->gpu:5"}));
  // Staged through host memory: the measured cross-socket figures of the V100 node, per direction.
  EXPECT_DOUBLE_EQ(m.route(id(m, "gpu:0"), id(m, "gpu:5")).bandwidth_Bps, 10.6e9);
  EXPECT_DOUBLE_EQ(m.route(id(m, "gpu:5"), id(m, "gpu:0")).bandwidth_Bps, 11.1e9);
  EXPECT_DOUBLE_EQ(m.route(id(m, "gpu:0"), id(m, "gpu:5")).latency_s, 17.5e-6);
  // Host copies: the PCIe links' rates and a host crossing's latency (one more µs to the far socket).
  EXPECT_DOUBLE_EQ(m.route(id(m, "gpu:6"), id(m, "cpu:1")).bandwidth_Bps, 11.4e9);
  EXPECT_DOUBLE_EQ(m.route(id(m, "gpu:6"), id(m, "cpu:1")).latency_s, 8.5e-6);
  EXPECT_DOUBLE_EQ(m.route(id(m, "cpu:0"), id(m, "gpu:6")).bandwidth_Bps, 12e9);
  EXPECT_DOUBLE_EQ(m.route(id(m, "cpu:0"), id(m, "gpu:6")).latency_s, 9.5e-6);
  // Every pair of a GPU and another device has a figure of its own or a direct NVLink.
  for (DeviceId s = 0; s < m.num_devices(); ++s)
    for (DeviceId t = 0; t < m.num_devices(); ++t)
      if (s != t && (m.devices[s].kind == DeviceKind::kGpu || m.devices[t].kind == DeviceKind::kGpu)) {
        EXPECT_TRUE(m.has_route_figure(s, t) || m.route(s, t).hops.size() == 1) << s << " -> " << t;
      }
  int no_nvlink_pairs = 0;
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b)
      no_nvlink_pairs += m.route(id(m, "gpu:" + std::to_string(a)), id(m, "gpu:" + std::to_string(b))).hops.size() > 1;
  EXPECT_EQ(no_nvlink_pairs, 12);
}

TEST(Presets, H100x8AllPairsThroughNvswitch) {
  Machine m = load_machine("h100x8");
  EXPECT_EQ(m.num_devices(), 10u);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      DeviceId s = id(m, "gpu:" + std::to_string(a)), t = id(m, "gpu:" + std::to_string(b));
      EXPECT_EQ(hop_names(m, s, t), (std::vector<std::string>{"nvlink gpu:" + std::to_string(a) + "->nvswitch:0",
                                                              "nvlink nvswitch:0->gpu:" + std::to_string(b)}));
      EXPECT_DOUBLE_EQ(m.route(s, t).bandwidth_Bps, 376e9);
    }
  }
  EXPECT_DOUBLE_EQ(m.route(id(m, "cpu:1"), id(m, "gpu:7")).bandwidth_Bps, 53e9);
}

TEST(Presets, UnknownNamesListThePresets) {
  try {
    load_machine("k80x16");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "machine = k80x16: not a preset or a machine file; presets: dgx1, dgx1x64-ib100, dgx1x8-ib100, h100x8, "
              "h100x8x32-ndr400, k80x2, k80x4, k80x8, p100x4");
  }
  try {
    preset_yaml("tpu");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "preset = tpu: unknown machine preset; presets: dgx1, dgx1x64-ib100, dgx1x8-ib100, h100x8, "
              "h100x8x32-ndr400, k80x2, k80x4, k80x8, p100x4");
  }
  // A path that does not exist is reported as a file, not as an unknown preset.
  EXPECT_THROW(
      {
        try {
          load_machine("no/such/k80x4.yaml");
        } catch (const InputError& e) {
          EXPECT_EQ(std::string(e.what()), "no/such/k80x4.yaml: cannot open machine file");
          throw;
        }
      },
      InputError);
}

TEST(Presets, YamlTextMatchesTheSourceFile) {
  // The compiled-in text is the file in hwmodels/presets/, byte for byte.
  for (const std::string& name : preset_names()) {
    std::string path = std::string(PLACELAB_SOURCE_DIR) + "/hwmodels/presets/" + name + ".yaml";
    Machine from_file = read_machine_yaml(path);
    EXPECT_EQ(from_file.name, name);
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), preset_yaml(name)) << name;
  }
}

}  // namespace
}  // namespace placelab
