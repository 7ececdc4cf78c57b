#include "placelab/hwmodels/machine.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "placelab/hwmodels/cost_model.h"

namespace placelab {
namespace {

Device gpu(std::string name) {
  return {.name = std::move(name), .kind = DeviceKind::kGpu, .peak_flops_per_s = 4e12, .memory_bandwidth_Bps = 240e9,
          .memory_bytes = 12'000'000'000, .streams = 1, .launch_overhead_s = 5e-6};
}
Device cpu(std::string name) {
  Device d = gpu(std::move(name));
  d.kind = DeviceKind::kCpu;
  d.streams = 4;
  return d;
}
Link link(std::string a, std::string b, double bandwidth_Bps, double latency_s = 0,
          LinkKind kind = LinkKind::kPcie) {
  return {.a = std::move(a), .b = std::move(b), .kind = kind, .bandwidth_Bps = bandwidth_Bps, .latency_s = latency_s};
}

// The names of the link directions a route takes, in order ("pcie gpu:0->plx:0", …).
std::vector<std::string> hop_names(const Machine& m, const Route& r) {
  std::vector<std::string> names;
  for (LinkDirection d : r.hops) names.push_back(m.link_direction_name(d));
  return names;
}

// A host with two K80 boards, each two dies behind an on-board switch, boards under the root
// complex, as in the k80x4 preset but with round numbers.
Machine two_k80_boards() {
  Machine m;
  m.name = "k80-boards";
  m.devices = {cpu("cpu:0"), gpu("gpu:0"), gpu("gpu:1"), gpu("gpu:2"), gpu("gpu:3")};
  m.switches = {"rc:0", "plx:0", "plx:1"};
  m.links = {link("cpu:0", "rc:0", 60e9, 6e-6, LinkKind::kMemory),
             link("rc:0", "plx:0", 20e9, 1e-6),
             link("rc:0", "plx:1", 20e9, 1e-6),
             link("plx:0", "gpu:0", 11e9, 3e-6),
             link("plx:0", "gpu:1", 11e9, 3e-6),
             link("plx:1", "gpu:2", 11e9, 3e-6),
             link("plx:1", "gpu:3", 11e9, 3e-6)};
  m.finalize();
  return m;
}

TEST(MachineRoute, SameBoardDiesGoThroughTheBoardSwitchOnly) {
  Machine m = two_k80_boards();
  const Route& r = m.route(1, 2);
  EXPECT_EQ(hop_names(m, r), (std::vector<std::string>{"pcie gpu:0->plx:0", "pcie plx:0->gpu:1"}));
  EXPECT_DOUBLE_EQ(r.bandwidth_Bps, 11e9);
  EXPECT_DOUBLE_EQ(r.latency_s, 6e-6);
}

TEST(MachineRoute, AcrossBoardsGoesThroughTheRootComplex) {
  Machine m = two_k80_boards();
  const Route& r = m.route(2, 3);
  EXPECT_EQ(hop_names(m, r), (std::vector<std::string>{"pcie gpu:1->plx:0", "pcie plx:0->rc:0",
                                                        "pcie rc:0->plx:1", "pcie plx:1->gpu:2"}));
  EXPECT_DOUBLE_EQ(r.bandwidth_Bps, 11e9);
  EXPECT_DOUBLE_EQ(r.latency_s, 8e-6);
  const Route& host = m.route(0, 4);
  EXPECT_EQ(hop_names(m, host), (std::vector<std::string>{"memory cpu:0->rc:0", "pcie rc:0->plx:1",
                                                           "pcie plx:1->gpu:3"}));
  EXPECT_DOUBLE_EQ(host.latency_s, 10e-6);
}

TEST(MachineRoute, GpusDoNotForwardTraffic) {
  // gpu:0 – gpu:1 – gpu:2 by fast NVLink, gpu:0 and gpu:2 also under a slow switch: the copy
  // gpu:0 → gpu:2 must take the switch, since gpu:1 does not relay.
  Machine m;
  m.devices = {gpu("gpu:0"), gpu("gpu:1"), gpu("gpu:2")};
  m.switches = {"sw"};
  m.links = {link("gpu:0", "gpu:1", 50e9, 1e-6, LinkKind::kNvlink), link("gpu:1", "gpu:2", 50e9, 1e-6, LinkKind::kNvlink),
             link("gpu:0", "sw", 5e9, 10e-6), link("sw", "gpu:2", 5e9, 10e-6)};
  m.finalize();
  EXPECT_EQ(hop_names(m, m.route(0, 2)), (std::vector<std::string>{"pcie gpu:0->sw", "pcie sw->gpu:2"}));
  EXPECT_EQ(hop_names(m, m.route(0, 1)), (std::vector<std::string>{"nvlink gpu:0->gpu:1"}));
  EXPECT_EQ(hop_names(m, m.route(2, 1)), (std::vector<std::string>{"nvlink gpu:2->gpu:1"}));
}

TEST(MachineRoute, AsymmetricReverseBandwidthAndLatency) {
  Machine m;
  m.devices = {cpu("cpu:0"), gpu("gpu:0")};
  Link l = link("cpu:0", "gpu:0", 12e9, 5e-6);
  l.reverse_bandwidth_Bps = 8e9;
  l.reverse_latency_s = 7e-6;
  m.links = {l};
  m.finalize();
  EXPECT_DOUBLE_EQ(m.route(0, 1).bandwidth_Bps, 12e9);
  EXPECT_DOUBLE_EQ(m.route(0, 1).latency_s, 5e-6);
  EXPECT_DOUBLE_EQ(m.route(1, 0).bandwidth_Bps, 8e9);
  EXPECT_DOUBLE_EQ(m.route(1, 0).latency_s, 7e-6);
  EXPECT_EQ(m.link_direction_name(m.route(1, 0).hops[0]), "pcie gpu:0->cpu:0");
}

TEST(MachineRoute, BottleneckNotPerHopSumDecides) {
  // Direct link: 10 GB/s → 1 MiB in 105 µs. Three hops at 25 GB/s: 42 µs end to end (the
  // simulator holds all hops at once at the bottleneck rate), though 126 µs if each hop's time
  // were added up. The route must be the three hops.
  Machine m;
  m.devices = {gpu("gpu:0"), gpu("gpu:1")};
  m.switches = {"s1", "s2"};
  m.links = {link("gpu:0", "gpu:1", 10e9), link("gpu:0", "s1", 25e9), link("s1", "s2", 25e9), link("s2", "gpu:1", 25e9)};
  m.finalize();
  EXPECT_EQ(m.route(0, 1).hops.size(), 3u);
  EXPECT_DOUBLE_EQ(m.route(0, 1).bandwidth_Bps, 25e9);
}

TEST(MachineRoute, LatencyAndBandwidthTradeOffAtOneMebibyte) {
  // Path A: 100 µs + 1 MiB / 100 GB/s = 110.5 µs; path B: 1 µs + 1 MiB / 10 GB/s = 105.9 µs.
  Machine m;
  m.devices = {gpu("gpu:0"), gpu("gpu:1")};
  m.switches = {"a", "b"};
  m.links = {link("gpu:0", "a", 100e9, 50e-6), link("a", "gpu:1", 100e9, 50e-6), link("gpu:0", "b", 10e9, 0.5e-6),
             link("b", "gpu:1", 10e9, 0.5e-6)};
  m.finalize();
  EXPECT_EQ(hop_names(m, m.route(0, 1)), (std::vector<std::string>{"pcie gpu:0->b", "pcie b->gpu:1"}));
  // With A's latency at 90 µs it wins: 100.5 µs < 105.9 µs.
  m.links[0].latency_s = m.links[1].latency_s = 45e-6;
  m.finalize();
  EXPECT_EQ(hop_names(m, m.route(0, 1)), (std::vector<std::string>{"pcie gpu:0->a", "pcie a->gpu:1"}));
}

TEST(MachineRoute, TiesGoToFewerHops) {
  Machine m;
  m.devices = {gpu("gpu:0"), gpu("gpu:1")};
  m.switches = {"sw"};
  m.links = {link("gpu:0", "sw", 10e9), link("sw", "gpu:1", 10e9), link("gpu:0", "gpu:1", 10e9)};
  m.finalize();
  EXPECT_EQ(hop_names(m, m.route(0, 1)), (std::vector<std::string>{"pcie gpu:0->gpu:1"}));
}

TEST(MachineRoute, ParallelLinksUseTheFasterOne) {
  Machine m;
  m.devices = {gpu("gpu:0"), gpu("gpu:1")};
  m.links = {link("gpu:0", "gpu:1", 10e9, 2e-6, LinkKind::kPcie), link("gpu:0", "gpu:1", 48e9, 2e-6, LinkKind::kNvlink)};
  m.finalize();
  EXPECT_EQ(hop_names(m, m.route(0, 1)), (std::vector<std::string>{"nvlink gpu:0->gpu:1"}));
  EXPECT_EQ(hop_names(m, m.route(1, 0)), (std::vector<std::string>{"nvlink gpu:1->gpu:0"}));
}

TEST(MachineRoute, TransferTimeIsLatencyPlusBytesOverBottleneck) {
  Machine m = two_k80_boards();
  struct Fixed : CostModel {
    explicit Fixed(const Machine& machine) : CostModel(machine) {}
    double model_op_time_s(const Op&, DeviceId) const override { return 0; }
    std::string describe() const override { return "fixed"; }
  } cost(m);
  EXPECT_DOUBLE_EQ(cost.transfer_time_s(11'000'000, 1, 3), 8e-6 + 1e-3);
  EXPECT_DOUBLE_EQ(cost.transfer_time_s(0, 1, 2), 6e-6);
  EXPECT_DOUBLE_EQ(cost.transfer_time_s(1 << 20, 2, 2), 0);
}

// A route figure replaces the route's figures for the pairs it names, one direction, and nothing
// else: the hops (what a copy holds) are the search's, other pairs keep their hops' figures.
TEST(MachineRoute, RouteFigureGivesItsPairsTheirMeasuredFigures) {
  Machine plain = two_k80_boards();
  Machine m = plain;
  m.route_figures = {{.from = {"gpu:0", "gpu:1", "gpu:2", "gpu:3"}, .to = {"gpu:0", "gpu:1", "gpu:2", "gpu:3"},
                      .bandwidth_Bps = 8.9e9},
                     {.from = {"gpu:3"}, .to = {"cpu:0"}, .latency_s = 20e-6}};
  m.finalize();
  for (DeviceId s = 1; s < 5; ++s)
    for (DeviceId t = 1; t < 5; ++t) {
      if (s == t) continue;
      const Route r = m.route(s, t), before = plain.route(s, t);
      EXPECT_DOUBLE_EQ(r.bandwidth_Bps, 8.9e9);
      EXPECT_DOUBLE_EQ(r.latency_s, before.latency_s);  // left out: the hops' sum
      EXPECT_EQ(hop_names(m, r), hop_names(plain, before));
      EXPECT_TRUE(m.has_route_figure(s, t));
    }
  const Route d2h = m.route(4, 0);
  EXPECT_DOUBLE_EQ(d2h.latency_s, 20e-6);
  EXPECT_DOUBLE_EQ(d2h.bandwidth_Bps, 11e9);
  // The other direction and the other host pairs keep their hops' figures.
  EXPECT_DOUBLE_EQ(m.route(0, 4).latency_s, plain.route(0, 4).latency_s);
  EXPECT_FALSE(m.has_route_figure(0, 4));
  EXPECT_FALSE(m.has_route_figure(1, 0));
  struct Fixed : CostModel {
    explicit Fixed(const Machine& machine) : CostModel(machine) {}
    double model_op_time_s(const Op&, DeviceId) const override { return 0; }
    std::string describe() const override { return "fixed"; }
  } cost(m);
  EXPECT_DOUBLE_EQ(cost.transfer_time_s(8'900'000, 1, 3), 8e-6 + 1e-3);
}

// The message finalize() throws, and the field it names.
std::pair<std::string, std::string> finalize_error(Machine m) {
  try {
    m.finalize();
  } catch (const MachineError& e) {
    return {e.what(), e.field()};
  }
  return {"no error", ""};
}

TEST(MachineFinalize, DisconnectedDeviceNamesTheDeviceEntry) {
  Machine m = two_k80_boards();
  m.links.pop_back();  // gpu:3 loses its only link
  auto [message, field] = finalize_error(m);
  EXPECT_EQ(field, "devices[4]");
  EXPECT_EQ(message, "devices[4] = gpu:3: no route from cpu:0 (devices never relay traffic: link both to a "
                     "common switch or to each other)");
}

TEST(MachineFinalize, OnlyRouteThroughAnotherDeviceIsNoRoute) {
  Machine m;
  m.devices = {gpu("gpu:0"), gpu("gpu:1"), gpu("gpu:2")};
  m.links = {link("gpu:0", "gpu:1", 50e9), link("gpu:1", "gpu:2", 50e9)};
  EXPECT_EQ(finalize_error(m).second, "devices[2]");
}

TEST(MachineFinalize, RejectsBadValuesNamingFieldAndValue) {
  Machine base = two_k80_boards();
  {
    Machine m = base;
    m.devices[2].memory_bytes = -4;
    EXPECT_EQ(finalize_error(m).first, "devices[2].memory_bytes = -4: must be > 0");
  }
  {
    Machine m = base;
    m.devices[1].name = "cpu:0";
    EXPECT_EQ(finalize_error(m).first, "devices[1].name = cpu:0: duplicate name");
  }
  {
    Machine m = base;
    m.devices[0].streams = 0;
    EXPECT_EQ(finalize_error(m).first, "devices[0].streams = 0: must be in 1..256");
  }
  {
    Machine m = base;
    m.links[3].b = "gpu:7";
    EXPECT_EQ(finalize_error(m), std::make_pair(std::string("links[3].b = gpu:7: not a device or switch name"),
                                                std::string("links[3].b")));
  }
  {
    Machine m = base;
    m.links[1].reverse_bandwidth_Bps = 0;
    EXPECT_EQ(finalize_error(m).first, "links[1].reverse_bandwidth_Bps = 0: must be a finite number > 0");
  }
  {
    Machine m = base;
    m.links[1].latency_s = -1e-6;
    EXPECT_EQ(finalize_error(m).first, "links[1].latency_s = -1e-06: must be a finite number >= 0");
  }
  {
    Machine m = base;
    m.switches[2] = "gpu:0";
    EXPECT_EQ(finalize_error(m).first, "switches[2] = gpu:0: duplicate name (already a device or switch)");
  }
  {
    Machine m = base;
    m.links[0].b = "cpu:0";
    EXPECT_EQ(finalize_error(m).first, "links[0].b = cpu:0: must differ from a (a link joins two nodes)");
  }
  EXPECT_EQ(finalize_error(Machine{}).first, "devices: must list at least one device");
}

TEST(MachineFinalize, RejectsBadRouteFiguresNamingTheEntry) {
  Machine base = two_k80_boards();
  auto with = [&](std::vector<RouteFigure> figures) {
    Machine m = base;
    m.route_figures = std::move(figures);
    return finalize_error(m);
  };
  EXPECT_EQ(with({{.from = {"gpu:0"}, .to = {"rc:0"}, .bandwidth_Bps = 1e9}}),
            std::make_pair(std::string("route_figures[0].to[0] = rc:0: not a device name"),
                           std::string("route_figures[0].to[0]")));
  EXPECT_EQ(with({{.from = {}, .to = {"gpu:1"}, .bandwidth_Bps = 1e9}}).first,
            "route_figures[0].from: must name at least one device");
  EXPECT_EQ(with({{.from = {"gpu:0"}, .to = {"gpu:1"}}}).first,
            "route_figures[0]: must give bandwidth_Bps, latency_s or both");
  EXPECT_EQ(with({{.from = {"gpu:0"}, .to = {"gpu:1"}, .bandwidth_Bps = 0}}).first,
            "route_figures[0].bandwidth_Bps = 0: must be a finite number > 0");
  EXPECT_EQ(with({{.from = {"gpu:0"}, .to = {"gpu:1"}, .latency_s = -1e-6}}).first,
            "route_figures[0].latency_s = -1e-06: must be a finite number >= 0");
  EXPECT_EQ(with({{.from = {"gpu:0"}, .to = {"gpu:0"}, .latency_s = 1e-6}}).first,
            "route_figures[0]: names no pair of two different devices");
  EXPECT_EQ(with({{.from = {"gpu:0", "gpu:1"}, .to = {"gpu:2"}, .bandwidth_Bps = 9e9},
                  {.from = {"gpu:3"}, .to = {"gpu:2"}, .bandwidth_Bps = 9e9},
                  {.from = {"gpu:1"}, .to = {"gpu:2", "gpu:3"}, .latency_s = 1e-5}}),
            std::make_pair(std::string("route_figures[2] = gpu:1 -> gpu:2: already given by route_figures[0]"),
                           std::string("route_figures[2]")));
  EXPECT_EQ(with({{.from = {"gpu:0", "gpu:0"}, .to = {"gpu:2"}, .bandwidth_Bps = 9e9}}).first,
            "route_figures[0] = gpu:0 -> gpu:2: names this pair twice");
  // Each finalize applies the list as it is then.
  Machine m = base;
  m.route_figures = {{.from = {"gpu:0"}, .to = {"gpu:1"}, .bandwidth_Bps = 1e9}};
  m.finalize();
  EXPECT_DOUBLE_EQ(m.route(1, 2).bandwidth_Bps, 1e9);
  m.route_figures.clear();
  m.finalize();
  EXPECT_DOUBLE_EQ(m.route(1, 2).bandwidth_Bps, 11e9);
}

TEST(MachineFinalize, RouteNeedsFinalizeAfterTheLastChange) {
  Machine m = two_k80_boards();
  m.devices.push_back(gpu("gpu:4"));
  EXPECT_THROW(m.route(0, 1), Error);
  Machine fresh;
  fresh.devices = {gpu("gpu:0")};
  EXPECT_THROW(fresh.route(0, 0), Error);
}

TEST(Machine, LookupsAndNames) {
  Machine m = two_k80_boards();
  EXPECT_EQ(m.find_device("gpu:2"), DeviceId{3});
  EXPECT_FALSE(m.find_device("rc:0"));
  EXPECT_EQ(m.default_cpu(), DeviceId{0});
  EXPECT_EQ(m.num_link_directions(), 14u);
  EXPECT_EQ(link_kind_from_name("nvlink"), LinkKind::kNvlink);
  EXPECT_FALSE(link_kind_from_name("NVLink"));
  EXPECT_EQ(device_kind_name(DeviceKind::kCpu), "cpu");
}

}  // namespace
}  // namespace placelab
