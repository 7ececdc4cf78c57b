#include "placelab/hwmodels/machine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <queue>
#include <tuple>
#include <unordered_map>


#include "placelab/graph/error.h"
#include "placelab/graph/numbers.h"

namespace placelab {
namespace {

// Routes are chosen for a reference transfer of this size, timed as the simulator times it:
// Σ latency + bytes / bottleneck bandwidth. 1 MiB is a typical activation or gradient tensor.
constexpr double kRouteReferenceBytes = 1 << 20;
// Partial routes kept per source at most (Machine::finalize): a bound on time and memory.
constexpr std::size_t kMaxRouteLabels = 4'000'000;

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

Route Machine::route(DeviceId src, DeviceId dst) const {
  PLACELAB_CHECK(routes_.size() == devices.size() * devices.size() && !routes_.empty())
      << "Machine::route needs finalize() after the last change";
  PLACELAB_CHECK(src < devices.size() && dst < devices.size() && src != dst) << src << " -> " << dst;
  const RouteEntry& e = routes_[static_cast<std::size_t>(src) * devices.size() + dst];
  return Route{std::span<const LinkDirection>(route_hops_).subspan(e.hop_begin, e.hop_end - e.hop_begin), e.latency_s,
               e.bandwidth_Bps};
}

void Machine::finalize() {
  routes_.clear();
  route_hops_.clear();
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
    if (!positive(d.peak_flops_per_s))
      throw MachineError(where + ".peak_flops", format_6g(d.peak_flops_per_s), "must be a finite number > 0");
    if (!positive(d.memory_bandwidth_Bps))
      throw MachineError(where + ".memory_bandwidth_Bps", format_6g(d.memory_bandwidth_Bps),
                         "must be a finite number > 0");
    if (d.memory_bytes <= 0)
      throw MachineError(where + ".memory_bytes", std::to_string(d.memory_bytes), "must be > 0");
    if (d.streams < 1 || d.streams > 256)
      throw MachineError(where + ".streams", std::to_string(d.streams), "must be in 1..256");
    if (!non_negative(d.launch_overhead_s))
      throw MachineError(where + ".launch_overhead_s", format_6g(d.launch_overhead_s),
                         "must be a finite number >= 0");
    if (!non_negative(d.dispatch_s) || d.dispatch_s > 1.0)
      throw MachineError(where + ".dispatch_s", format_6g(d.dispatch_s), "must be a finite number in [0, 1] s");
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
      throw MachineError(where + ".bandwidth_Bps", format_6g(l.bandwidth_Bps), "must be a finite number > 0");
    if (!non_negative(l.latency_s))
      throw MachineError(where + ".latency_s", format_6g(l.latency_s), "must be a finite number >= 0");
    if (l.reverse_bandwidth_Bps && !positive(*l.reverse_bandwidth_Bps))
      throw MachineError(where + ".reverse_bandwidth_Bps", format_6g(*l.reverse_bandwidth_Bps),
                         "must be a finite number > 0");
    if (l.reverse_latency_s && !non_negative(*l.reverse_latency_s))
      throw MachineError(where + ".reverse_latency_s", format_6g(*l.reverse_latency_s),
                         "must be a finite number >= 0");
  }

  // The route minimising latency + reference / bottleneck (ties: fewer hops, then the higher
  // bottleneck) lies on the Pareto front of (latency, hops, bottleneck): a route another one
  // beats in all three can never win. Martins' label-setting algorithm builds that front from each
  // source: labels leave a priority queue in (latency, hops, wider) order, and a label is kept at a
  // node only while no kept label there dominates it. Devices never relay, so labels reaching a
  // device other than the source stop there. A machine whose paths are unique (trees, switch
  // stars) has one label per node: the work per source is that of one Dijkstra, whatever the
  // number of distinct bandwidths (trying every bandwidth as a threshold took minutes for 1,000
  // devices with distinct link speeds).
  //
  // Machines of several nodes (device names `<node>/<local>`, cluster.h) add one rule: traffic
  // between two devices of one node stays on that node's own links. It never passes through a
  // switch of another node or without a node (the fabric), nor through a NIC (a switch with a
  // `network` link), which could otherwise relay between two of its attach points or send a
  // copy out over the network and back when that is quicker than the node's PCIe path. A label
  // records whether it has left its source's node; labels that have cannot reach a device of
  // that node, and dominate only labels that have left too. Machines without node prefixes
  // never set the flag, so their routes are those of the rule-free search.
  const std::size_t nd = devices.size();
  const std::size_t num_nodes = nd + switches.size();
  struct Out {
    LinkDirection dir;
    std::size_t to;
  };
  std::vector<std::vector<Out>> out(num_nodes);
  for (std::size_t i = 0; i < links.size(); ++i)
    for (int back = 0; back < 2; ++back) {
      auto dir = static_cast<LinkDirection>(2 * i + static_cast<std::size_t>(back));
      out[node.at(back ? links[i].b : links[i].a)].push_back({dir, node.at(back ? links[i].a : links[i].b)});
    }
  // Node prefix of every device and switch, as a small integer (0: no prefix), and which
  // switches have a network link.
  std::vector<uint32_t> node_group(num_nodes, 0);
  {
    std::unordered_map<std::string_view, uint32_t> group_of;
    auto group = [&](std::string_view full) -> uint32_t {
      const std::size_t slash = full.find('/');
      if (slash == std::string_view::npos) return 0;
      return group_of.try_emplace(full.substr(0, slash), static_cast<uint32_t>(group_of.size() + 1)).first->second;
    };
    for (std::size_t i = 0; i < nd; ++i) node_group[i] = group(devices[i].name);
    for (std::size_t i = 0; i < switches.size(); ++i) node_group[nd + i] = group(switches[i]);
  }
  std::vector<uint8_t> networked(num_nodes, 0);
  for (const Link& l : links)
    if (l.kind == LinkKind::kNetwork) networked[node.at(l.a)] = networked[node.at(l.b)] = 1;
  struct Label {
    double latency_s;
    int hops;
    double bandwidth_Bps;
    std::size_t node;
    std::size_t parent;  // index into labels; npos at the source
    LinkDirection dir;
    bool left_node = false;  // has passed a switch outside the source's node, or a NIC
    bool dead = false;
  };
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  auto dominates = [](const Label& a, const Label& b) {
    return a.latency_s <= b.latency_s && a.hops <= b.hops && a.bandwidth_Bps >= b.bandwidth_Bps &&
           (!a.left_node || b.left_node);
  };
  std::vector<RouteEntry> routes(nd * nd);
  std::vector<LinkDirection> route_hops;
  std::vector<Label> labels;
  std::vector<std::vector<std::size_t>> at(num_nodes);  // live labels per node
  for (std::size_t s = 0; s < nd; ++s) {
    labels.clear();
    for (auto& v : at) v.clear();
    auto later = [&](std::size_t a, std::size_t b) {  // priority: least latency, fewest hops, widest
      const Label &x = labels[a], &y = labels[b];
      return std::make_tuple(x.latency_s, x.hops, -x.bandwidth_Bps, a) > std::make_tuple(y.latency_s, y.hops, -y.bandwidth_Bps, b);
    };
    std::priority_queue<std::size_t, std::vector<std::size_t>, decltype(later)> queue(later);
    labels.push_back({0, 0, std::numeric_limits<double>::infinity(), s, kNone, 0});
    queue.push(0);
    const uint32_t home = node_group[s];
    while (!queue.empty()) {
      const std::size_t id = queue.top();
      queue.pop();
      if (labels[id].dead) continue;
      const std::size_t u = labels[id].node;
      if (u < nd && u != s) continue;  // a device other than the source does not forward
      for (const Out& o : out[u]) {
        if (o.to == s) continue;
        Label next{labels[id].latency_s + link_latency_s(o.dir), labels[id].hops + 1,
                   std::min(labels[id].bandwidth_Bps, link_bandwidth_Bps(o.dir)), o.to, id, o.dir,
                   labels[id].left_node ||
                       (home != 0 && o.to >= nd && (node_group[o.to] != home || networked[o.to] != 0))};
        std::vector<std::size_t>& here = at[o.to];
        if (std::any_of(here.begin(), here.end(), [&](std::size_t k) { return dominates(labels[k], next); })) continue;
        std::erase_if(here, [&](std::size_t k) {
          if (!dominates(next, labels[k])) return false;
          labels[k].dead = true;
          return true;
        });
        // Pareto fronts stay small on machines people build; a hostile mesh of switches could grow
        // them without bound.
        if (labels.size() >= kMaxRouteLabels)
          throw MachineError("links", std::to_string(links.size()) + " entries",
                             "too many alternative paths to route from " + devices[s].name + " (over " +
                                 std::to_string(kMaxRouteLabels) + " partial routes); join the switches in fewer loops");
        labels.push_back(next);
        here.push_back(labels.size() - 1);
        queue.push(labels.size() - 1);
      }
    }
    for (std::size_t t = 0; t < nd; ++t) {
      if (t == s) continue;
      std::size_t best = kNone;
      auto key = [&](std::size_t k) {
        return std::make_tuple(labels[k].latency_s + kRouteReferenceBytes / labels[k].bandwidth_Bps, labels[k].hops,
                               -labels[k].bandwidth_Bps);
      };
      const bool same_node = home != 0 && node_group[t] == home;
      for (std::size_t k : at[t])
        if (!(same_node && labels[k].left_node) && (best == kNone || key(k) < key(best))) best = k;
      if (best == kNone)
        throw MachineError("devices[" + std::to_string(t) + "]", devices[t].name,
                           "no route from " + devices[s].name +
                               (same_node ? " inside their node (traffic between devices of one node never leaves it: "
                                            "link both to a common switch of the node or to each other)"
                                          : " (devices never relay traffic: link both to a common switch or to each other)"));
      RouteEntry& r = routes[s * nd + t];
      r.latency_s = labels[best].latency_s;
      r.bandwidth_Bps = labels[best].bandwidth_Bps;
      r.hop_begin = static_cast<uint32_t>(route_hops.size());
      for (std::size_t k = best; labels[k].parent != kNone; k = labels[k].parent) route_hops.push_back(labels[k].dir);
      r.hop_end = static_cast<uint32_t>(route_hops.size());
      std::reverse(route_hops.begin() + r.hop_begin, route_hops.end());
      PLACELAB_CHECK(route_hops.size() < std::numeric_limits<uint32_t>::max()) << route_hops.size() << " hops";
    }
  }
  routes_ = std::move(routes);
  route_hops_ = std::move(route_hops);
}

bool identical_devices(const Device& a, const Device& b) {
  return a.kind == b.kind && a.peak_flops_per_s == b.peak_flops_per_s && a.memory_bandwidth_Bps == b.memory_bandwidth_Bps &&
         a.launch_overhead_s == b.launch_overhead_s && a.efficiency == b.efficiency;
}

}  // namespace placelab
