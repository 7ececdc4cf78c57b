#include "placelab/hwmodels/machine.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>

#include "placelab/graph/error.h"

namespace placelab {
namespace {

// A transfer's route is chosen for a reference size: time = Σ latency + bytes/bandwidth per hop.
constexpr double kRouteReferenceBytes = 1 << 20;

std::string field_error(std::string_view where, std::string_view rule) {
  return std::string(where) + ": " + std::string(rule);
}

}  // namespace

std::string_view device_kind_name(DeviceKind kind) { return kind == DeviceKind::kCpu ? "cpu" : "gpu"; }

std::string_view link_kind_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::kPcie: return "pcie";
    case LinkKind::kNvlink: return "nvlink";
    case LinkKind::kQpi: return "qpi";
    case LinkKind::kNetwork: return "network";
    case LinkKind::kMemory: return "memory";
  }
  return "pcie";
}

std::optional<LinkKind> link_kind_from_name(std::string_view name) {
  for (LinkKind k : {LinkKind::kPcie, LinkKind::kNvlink, LinkKind::kQpi, LinkKind::kNetwork, LinkKind::kMemory})
    if (link_kind_name(k) == name) return k;
  return std::nullopt;
}

std::optional<DeviceId> Machine::find_device(std::string_view device_name) const {
  for (std::size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name == device_name) return static_cast<DeviceId>(i);
  return std::nullopt;
}

std::optional<DeviceId> Machine::default_cpu() const {
  for (std::size_t i = 0; i < devices.size(); ++i)
    if (devices[i].kind == DeviceKind::kCpu) return static_cast<DeviceId>(i);
  return std::nullopt;
}

double Machine::link_bandwidth_Bps(LinkDirection dir) const {
  const Link& l = links.at(dir / 2);
  return (dir % 2 == 1 && l.reverse_bandwidth_Bps) ? *l.reverse_bandwidth_Bps : l.bandwidth_Bps;
}

double Machine::link_latency_s(LinkDirection dir) const {
  const Link& l = links.at(dir / 2);
  return (dir % 2 == 1 && l.reverse_latency_s) ? *l.reverse_latency_s : l.latency_s;
}

std::string Machine::link_direction_name(LinkDirection dir) const {
  const Link& l = links.at(dir / 2);
  const std::string& from = dir % 2 == 0 ? l.a : l.b;
  const std::string& to = dir % 2 == 0 ? l.b : l.a;
  return std::string(link_kind_name(l.kind)) + " " + from + "->" + to;
}

const Route& Machine::route(DeviceId src, DeviceId dst) const {
  PLACELAB_CHECK(!routes_.empty()) << "Machine::route before finalize()";
  PLACELAB_CHECK(src < devices.size() && dst < devices.size() && src != dst) << src << " -> " << dst;
  return routes_[static_cast<std::size_t>(src) * devices.size() + dst];
}

void Machine::finalize() {
  if (devices.empty()) throw Error(field_error("devices", "must list at least one device"));
  if (devices.size() > std::numeric_limits<DeviceId>::max())
    throw Error(field_error("devices", "too many devices"));
  std::unordered_map<std::string, std::size_t> node;  // devices first, then switches
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const Device& d = devices[i];
    std::string where = "devices[" + std::to_string(i) + "]";
    if (d.name.empty()) throw Error(field_error(where + ".name", "must not be empty"));
    if (!node.emplace(d.name, i).second) throw Error(field_error(where + ".name = " + d.name, "duplicate name"));
    if (!(d.peak_flops > 0)) throw Error(field_error(where + ".peak_flops", "must be > 0"));
    if (!(d.memory_bandwidth_Bps > 0)) throw Error(field_error(where + ".memory_bandwidth_Bps", "must be > 0"));
    if (d.memory_bytes <= 0) throw Error(field_error(where + ".memory_bytes", "must be > 0"));
    if (d.streams < 1 || d.streams > 256) throw Error(field_error(where + ".streams", "must be in 1..256"));
    if (!(d.launch_overhead_s >= 0)) throw Error(field_error(where + ".launch_overhead_s", "must be >= 0"));
  }
  for (std::size_t i = 0; i < switches.size(); ++i)
    if (switches[i].empty() || !node.emplace(switches[i], devices.size() + i).second)
      throw Error(field_error("switches[" + std::to_string(i) + "] = " + switches[i], "empty or duplicate name"));
  for (std::size_t i = 0; i < links.size(); ++i) {
    const Link& l = links[i];
    std::string where = "links[" + std::to_string(i) + "]";
    if (!node.count(l.a)) throw Error(field_error(where + ".a = " + l.a, "not a device or switch name"));
    if (!node.count(l.b)) throw Error(field_error(where + ".b = " + l.b, "not a device or switch name"));
    if (l.a == l.b) throw Error(field_error(where, "a link must join two different nodes"));
    for (LinkDirection dir : {LinkDirection(2 * i), LinkDirection(2 * i + 1)}) {
      if (!(link_bandwidth_Bps(dir) > 0)) throw Error(field_error(where + ".bandwidth_Bps", "must be > 0"));
      if (!(link_latency_s(dir) >= 0)) throw Error(field_error(where + ".latency_s", "must be >= 0"));
    }
  }

  // Per source device: a directed graph in which only switches and the source itself forward
  // traffic (GPUs do not relay copies for others), then Dijkstra on the reference transfer time.
  using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                  boost::property<boost::edge_weight_t, double, boost::property<boost::edge_index_t, LinkDirection>>>;
  const std::size_t num_nodes = devices.size() + switches.size();
  const std::size_t nd = devices.size();
  routes_.assign(nd * nd, Route{});
  for (std::size_t s = 0; s < nd; ++s) {
    G g(num_nodes);
    for (std::size_t i = 0; i < links.size(); ++i) {
      for (int back = 0; back < 2; ++back) {
        auto dir = static_cast<LinkDirection>(2 * i + static_cast<std::size_t>(back));
        std::size_t u = node.at(back ? links[i].b : links[i].a), v = node.at(back ? links[i].a : links[i].b);
        if (u < nd && u != s) continue;  // a device other than the source does not forward
        double w = link_latency_s(dir) + kRouteReferenceBytes / link_bandwidth_Bps(dir);
        boost::add_edge(u, v, {w, dir}, g);
      }
    }
    std::vector<std::size_t> pred(num_nodes);
    std::vector<double> dist(num_nodes);
    boost::dijkstra_shortest_paths(g, s, boost::predecessor_map(pred.data()).distance_map(dist.data()));
    for (std::size_t t = 0; t < nd; ++t) {
      if (t == s) continue;
      if (pred[t] == t)
        throw Error(field_error("links", "no route from " + devices[s].name + " to " + devices[t].name));
      Route r;
      r.bandwidth_Bps = std::numeric_limits<double>::infinity();
      for (std::size_t v = t; v != s; v = pred[v]) {
        std::size_t u = pred[v];
        // The cheapest parallel edge u→v is the one Dijkstra relaxed.
        LinkDirection best = 0;
        double best_w = std::numeric_limits<double>::infinity();
        for (auto [it, end] = boost::out_edges(u, g); it != end; ++it) {
          if (boost::target(*it, g) != v) continue;
          double w = boost::get(boost::edge_weight, g, *it);
          if (w < best_w) best_w = w, best = boost::get(boost::edge_index, g, *it);
        }
        r.hops.push_back(best);
        r.latency_s += link_latency_s(best);
        r.bandwidth_Bps = std::min(r.bandwidth_Bps, link_bandwidth_Bps(best));
      }
      std::reverse(r.hops.begin(), r.hops.end());
      routes_[s * nd + t] = std::move(r);
    }
  }
}

}  // namespace placelab
