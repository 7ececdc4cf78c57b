// The route search against an exhaustive one: on random machines of several nodes, every route
// is the best simple path by the rule machine.h states, and the table is the same bit for bit
// whatever the number of threads that searched it.

#include "route_search.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "placelab/hwmodels/machine.h"

namespace placelab {
namespace {

// A machine of `nodes` nodes (names `n<k>/…`): GPUs on two switches per node, a NIC per node with a
// network link to a fabric switch, NVLink-like direct links, and random extra links (some leaving
// the node). Bandwidths and latencies come from short lists so that many routes tie.
Machine random_cluster(int nodes, int gpus_per_node, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](auto const& list) { return list[std::uniform_int_distribution<std::size_t>(0, list.size() - 1)(rng)]; };
  const std::vector<double> bandwidths{10e9, 20e9, 25e9, 50e9};
  const std::vector<double> latencies{0, 1e-6, 2e-6};
  std::bernoulli_distribution coin(0.3);
  Machine m;
  m.name = "random-cluster";
  auto link = [&](const std::string& a, const std::string& b, LinkKind kind = LinkKind::kPcie) {
    Link l{.a = a, .b = b, .kind = kind, .bandwidth_Bps = pick(bandwidths), .latency_s = pick(latencies)};
    if (coin(rng)) l.reverse_bandwidth_Bps = pick(bandwidths);
    if (coin(rng)) l.reverse_latency_s = pick(latencies);
    m.links.push_back(l);
  };
  m.switches.push_back("fabric");
  for (int n = 0; n < nodes; ++n) {
    const std::string p = "n" + std::to_string(n) + "/";
    m.switches.insert(m.switches.end(), {p + "sw:0", p + "sw:1", p + "nic"});
    link(p + "sw:0", p + "sw:1");
    link(p + "nic", p + "sw:" + std::to_string(n % 2));
    link(p + "nic", "fabric", LinkKind::kNetwork);
    for (int g = 0; g < gpus_per_node; ++g) {
      const std::string name = p + "gpu:" + std::to_string(g);
      m.devices.push_back({.name = name, .kind = DeviceKind::kGpu, .peak_flops_per_s = 1e13,
                           .memory_bandwidth_Bps = 1e11, .memory_bytes = int64_t{1} << 34});
      link(name, p + "sw:" + std::to_string(g % 2));
      if (coin(rng)) link(name, p + "sw:" + std::to_string(1 - g % 2));
      if (g > 0 && coin(rng)) link(name, p + "gpu:" + std::to_string(g - 1), LinkKind::kNvlink);
    }
  }
  for (int k = 0; k < nodes; ++k) {  // loops inside and across nodes
    const std::string a = pick(m.switches), b = pick(m.switches);
    if (a != b) link(a, b);
  }
  return m;
}

struct Best {
  std::tuple<double, int, double, double> key{1e300, 0, 0, 0};  // cost, hops, −bandwidth, latency
  double latency_s = 0, bandwidth_Bps = 0;
};

// Every simple path from s that relays only through switches, by depth-first search.
void explore(const Machine& m, const std::vector<std::vector<std::pair<LinkDirection, std::size_t>>>& out,
             std::size_t s, std::size_t u, double latency_s, int hops, double bandwidth_Bps, bool inside,
             std::vector<char>& on_path, std::vector<Best>& best_any, std::vector<Best>& best_inside) {
  const std::size_t nd = m.devices.size();
  for (auto [dir, v] : out[u]) {
    if (on_path[v]) continue;
    const double lat = latency_s + m.link_latency_s(dir);
    const double bw = std::min(bandwidth_Bps, m.link_bandwidth_Bps(dir));
    if (v < nd) {
      const Best b{{lat + (1 << 20) / bw, hops + 1, -bw, lat}, lat, bw};
      if (b.key < best_any[v].key) best_any[v] = b;
      if (inside && b.key < best_inside[v].key) best_inside[v] = b;
      continue;
    }
    // A switch keeps a path in s's node when it carries the node's prefix and is not a NIC.
    const std::string& name = m.switches[v - nd];
    const std::string home = m.devices[s].name.substr(0, m.devices[s].name.find('/') + 1);
    const bool stays = inside && name.starts_with(home) && !name.ends_with("/nic");
    on_path[v] = 1;
    explore(m, out, s, v, lat, hops + 1, bw, stays, on_path, best_any, best_inside);
    on_path[v] = 0;
  }
}

TEST(RouteSearch, EveryRouteIsTheBestSimplePath) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Machine m = random_cluster(3, 4, seed);
    m.finalize();
    const std::size_t nd = m.devices.size();
    std::vector<std::vector<std::pair<LinkDirection, std::size_t>>> out(nd + m.switches.size());
    auto index = [&](const std::string& name) {
      for (std::size_t i = 0; i < nd; ++i)
        if (m.devices[i].name == name) return i;
      for (std::size_t i = 0; i < m.switches.size(); ++i)
        if (m.switches[i] == name) return nd + i;
      ADD_FAILURE() << name;
      return std::size_t{0};
    };
    for (std::size_t i = 0; i < m.links.size(); ++i) {
      out[index(m.links[i].a)].push_back({static_cast<LinkDirection>(2 * i), index(m.links[i].b)});
      out[index(m.links[i].b)].push_back({static_cast<LinkDirection>(2 * i + 1), index(m.links[i].a)});
    }
    for (std::size_t s = 0; s < nd; ++s) {
      std::vector<char> on_path(out.size(), 0);
      on_path[s] = 1;
      std::vector<Best> any(nd), inside(nd);
      explore(m, out, s, s, 0, 0, std::numeric_limits<double>::infinity(), true, on_path, any, inside);
      for (std::size_t t = 0; t < nd; ++t) {
        if (t == s) continue;
        const auto node = [](const std::string& name) { return name.substr(0, name.find('/')); };
        const bool same_node = node(m.devices[s].name) == node(m.devices[t].name);
        const Best& want = same_node ? inside[t] : any[t];
        const Route r = m.route(static_cast<DeviceId>(s), static_cast<DeviceId>(t));
        SCOPED_TRACE("seed " + std::to_string(seed) + ": " + m.devices[s].name + " -> " + m.devices[t].name);
        EXPECT_EQ(r.latency_s, want.latency_s);
        EXPECT_EQ(r.bandwidth_Bps, want.bandwidth_Bps);
        EXPECT_EQ(static_cast<int>(r.hops.size()), std::get<1>(want.key));
        // The hops are a path from s to t with the values the route states.
        double latency_s = 0, bandwidth_Bps = std::numeric_limits<double>::infinity();
        std::size_t at = s;
        for (LinkDirection d : r.hops) {
          const Link& l = m.links[d / 2];
          ASSERT_EQ(index(d % 2 ? l.b : l.a), at);
          at = index(d % 2 ? l.a : l.b);
          latency_s += m.link_latency_s(d);
          bandwidth_Bps = std::min(bandwidth_Bps, m.link_bandwidth_Bps(d));
        }
        EXPECT_EQ(at, t);
        EXPECT_EQ(latency_s, r.latency_s);
        EXPECT_EQ(bandwidth_Bps, r.bandwidth_Bps);
      }
    }
  }
}

TEST(RouteSearch, ThreadsChangeNothing) {
  // 20 nodes of 5 GPUs: 100 sources, over two rounds of three threads.
  Machine m = random_cluster(20, 5, 7);
  m.finalize();
  const RouteTable one = search_routes(m, 1);
  for (std::size_t threads : {2, 3, 7}) {
    const RouteTable many = search_routes(m, threads);
    EXPECT_TRUE(one.hop_end == many.hop_end) << threads << " threads";
    EXPECT_TRUE(one.hops == many.hops) << threads << " threads";
  }
  // An error is the first failing source's, as a serial search throws it.
  m.devices.push_back(m.devices.back());
  m.devices.back().name = "n19/gpu:9";  // no link reaches it
  auto message = [&](std::size_t threads) {
    try {
      search_routes(m, threads);
    } catch (const MachineError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(1), "devices[100] = n19/gpu:9: no route from n0/gpu:0 (devices never relay traffic: link both "
                        "to a common switch or to each other)");
  EXPECT_EQ(message(3), message(1));
}

}  // namespace
}  // namespace placelab
