#include "placelab/hwmodels/machine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>
#include <unordered_map>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>

#include "placelab/graph/error.h"

namespace placelab {
namespace {

// Routes are chosen for a reference transfer of this size, timed as the simulator times it:
// Σ latency + bytes / bottleneck bandwidth. 1 MiB is a typical activation or gradient tensor.
constexpr double kRouteReferenceBytes = 1 << 20;

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Lexicographic Dijkstra distance: total latency, then hop count.
struct PathCost {
  double latency_s = 0;
  int hops = 0;
  friend bool operator<(const PathCost& x, const PathCost& y) {
    return std::tie(x.latency_s, x.hops) < std::tie(y.latency_s, y.hops);
  }
};
struct PathCostCombine {
  PathCost operator()(const PathCost& x, const PathCost& y) const {
    return {x.latency_s + y.latency_s, x.hops + y.hops};
  }
};

struct RouteEdge {
  PathCost cost;
  LinkDirection dir = 0;
  double bandwidth_Bps = 0;
};
using RouteGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property, RouteEdge>;

}  // namespace

MachineError::MachineError(std::string field, std::string value, std::string rule)
    : Error(field + (value.empty() ? "" : " = " + value) + ": " + rule), field_(std::move(field)) {}

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
  PLACELAB_CHECK(routes_.size() == devices.size() * devices.size() && !routes_.empty())
      << "Machine::route needs finalize() after the last change";
  PLACELAB_CHECK(src < devices.size() && dst < devices.size() && src != dst) << src << " -> " << dst;
  return routes_[static_cast<std::size_t>(src) * devices.size() + dst];
}

void Machine::finalize() {
  routes_.clear();
  if (devices.empty()) throw MachineError("devices", "", "must list at least one device");
  if (devices.size() > std::numeric_limits<DeviceId>::max())
    throw MachineError("devices", std::to_string(devices.size()) + " entries", "too many devices");
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  auto non_negative = [](double v) { return std::isfinite(v) && v >= 0; };
  std::unordered_map<std::string, std::size_t> node;  // devices first, then switches
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const Device& d = devices[i];
    std::string where = "devices[" + std::to_string(i) + "]";
    if (d.name.empty()) throw MachineError(where + ".name", "", "must not be empty");
    if (!node.emplace(d.name, i).second) throw MachineError(where + ".name", d.name, "duplicate name");
    if (!positive(d.peak_flops))
      throw MachineError(where + ".peak_flops", format_number(d.peak_flops), "must be a finite number > 0");
    if (!positive(d.memory_bandwidth_Bps))
      throw MachineError(where + ".memory_bandwidth_Bps", format_number(d.memory_bandwidth_Bps),
                         "must be a finite number > 0");
    if (d.memory_bytes <= 0)
      throw MachineError(where + ".memory_bytes", std::to_string(d.memory_bytes), "must be > 0");
    if (d.streams < 1 || d.streams > 256)
      throw MachineError(where + ".streams", std::to_string(d.streams), "must be in 1..256");
    if (!non_negative(d.launch_overhead_s))
      throw MachineError(where + ".launch_overhead_s", format_number(d.launch_overhead_s),
                         "must be a finite number >= 0");
  }
  for (std::size_t i = 0; i < switches.size(); ++i) {
    std::string where = "switches[" + std::to_string(i) + "]";
    if (switches[i].empty()) throw MachineError(where, "", "must not be empty");
    if (!node.emplace(switches[i], devices.size() + i).second)
      throw MachineError(where, switches[i], "duplicate name (already a device or switch)");
  }
  for (std::size_t i = 0; i < links.size(); ++i) {
    const Link& l = links[i];
    std::string where = "links[" + std::to_string(i) + "]";
    if (!node.count(l.a)) throw MachineError(where + ".a", l.a, "not a device or switch name");
    if (!node.count(l.b)) throw MachineError(where + ".b", l.b, "not a device or switch name");
    if (l.a == l.b) throw MachineError(where + ".b", l.b, "must differ from a (a link joins two nodes)");
    if (!positive(l.bandwidth_Bps))
      throw MachineError(where + ".bandwidth_Bps", format_number(l.bandwidth_Bps), "must be a finite number > 0");
    if (!non_negative(l.latency_s))
      throw MachineError(where + ".latency_s", format_number(l.latency_s), "must be a finite number >= 0");
    if (l.reverse_bandwidth_Bps && !positive(*l.reverse_bandwidth_Bps))
      throw MachineError(where + ".reverse_bandwidth_Bps", format_number(*l.reverse_bandwidth_Bps),
                         "must be a finite number > 0");
    if (l.reverse_latency_s && !non_negative(*l.reverse_latency_s))
      throw MachineError(where + ".reverse_latency_s", format_number(*l.reverse_latency_s),
                         "must be a finite number >= 0");
  }

  // The route minimising latency + reference / bottleneck is found exactly by trying every
  // candidate bottleneck B: among paths using only link directions of bandwidth >= B, the one of
  // least latency (Dijkstra) is the best path whose bottleneck is at least B. The fastest over
  // all B wins; ties go to fewer hops, then to the higher bottleneck.
  const std::size_t nd = devices.size();
  const std::size_t num_nodes = nd + switches.size();
  std::vector<double> thresholds;
  for (LinkDirection dir = 0; dir < num_link_directions(); ++dir) thresholds.push_back(link_bandwidth_Bps(dir));
  std::sort(thresholds.begin(), thresholds.end(), std::greater<>());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());

  std::vector<Route> routes(nd * nd);
  std::vector<std::size_t> pred(num_nodes);
  std::vector<PathCost> dist(num_nodes);
  for (std::size_t s = 0; s < nd; ++s) {
    std::vector<std::tuple<double, int, double>> best(nd, {std::numeric_limits<double>::infinity(), 0, 0});
    for (double threshold : thresholds) {
      RouteGraph g(num_nodes);
      for (std::size_t i = 0; i < links.size(); ++i) {
        for (int back = 0; back < 2; ++back) {
          auto dir = static_cast<LinkDirection>(2 * i + static_cast<std::size_t>(back));
          std::size_t u = node.at(back ? links[i].b : links[i].a);
          std::size_t v = node.at(back ? links[i].a : links[i].b);
          if (u < nd && u != s) continue;  // a device other than the source does not forward
          if (link_bandwidth_Bps(dir) < threshold) continue;
          boost::add_edge(u, v, RouteEdge{{link_latency_s(dir), 1}, dir, link_bandwidth_Bps(dir)}, g);
        }
      }
      boost::dijkstra_shortest_paths(
          g, s,
          boost::predecessor_map(pred.data())
              .distance_map(dist.data())
              .weight_map(boost::get(&RouteEdge::cost, g))
              .distance_compare(std::less<PathCost>())
              .distance_combine(PathCostCombine())
              .distance_inf(PathCost{std::numeric_limits<double>::infinity(), std::numeric_limits<int>::max()})
              .distance_zero(PathCost{}));
      for (std::size_t t = 0; t < nd; ++t) {
        if (t == s || pred[t] == t) continue;
        Route r;
        r.bandwidth_Bps = std::numeric_limits<double>::infinity();
        for (std::size_t v = t; v != s; v = pred[v]) {
          std::size_t u = pred[v];
          // Among parallel u→v edges Dijkstra relaxed the cheapest; prefer the wider on a tie.
          const RouteEdge* chosen = nullptr;
          for (auto [it, end] = boost::out_edges(u, g); it != end; ++it) {
            if (boost::target(*it, g) != v) continue;
            const RouteEdge& e = g[*it];
            if (!chosen || e.cost < chosen->cost ||
                (!(chosen->cost < e.cost) && e.bandwidth_Bps > chosen->bandwidth_Bps))
              chosen = &e;
          }
          PLACELAB_CHECK(chosen != nullptr) << "route reconstruction " << u << "->" << v;
          r.hops.push_back(chosen->dir);
          r.latency_s += chosen->cost.latency_s;
          r.bandwidth_Bps = std::min(r.bandwidth_Bps, chosen->bandwidth_Bps);
        }
        std::reverse(r.hops.begin(), r.hops.end());
        double time_s = r.latency_s + kRouteReferenceBytes / r.bandwidth_Bps;
        auto key = std::make_tuple(time_s, static_cast<int>(r.hops.size()), -r.bandwidth_Bps);
        Route& slot = routes[s * nd + t];
        if (slot.hops.empty() || key < best[t]) {
          best[t] = key;
          slot = std::move(r);
        }
      }
    }
    for (std::size_t t = 0; t < nd; ++t)
      if (t != s && routes[s * nd + t].hops.empty())
        throw MachineError("devices[" + std::to_string(t) + "]", devices[t].name,
                           "no route from " + devices[s].name +
                               " (devices never relay traffic: link both to a common switch or to each other)");
  }
  routes_ = std::move(routes);
}

}  // namespace placelab
