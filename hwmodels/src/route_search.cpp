#include "route_search.h"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <limits>
#include <queue>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "placelab/core/error.h"
#include "placelab/core/workers.h"

namespace placelab {
namespace {

// Routes are chosen for a reference transfer of this size, timed as the simulator times it:
// Σ latency + bytes / bottleneck bandwidth. 1 MiB is a typical activation or gradient tensor.
constexpr double kRouteReferenceBytes = 1 << 20;
// Partial routes kept per source at most: a bound on time and memory.
constexpr std::size_t kMaxRouteLabels = 4'000'000;
// Sources per thread and round: a round's hops are held twice (in the workers' rows, then in the
// table), so a round stays small next to the table.
constexpr std::size_t kSourcesPerThreadRound = 16;
// Below this many devices the search runs on the calling thread (the presets: under 0.1 s).
constexpr std::size_t kMinDevicesForThreads = 256;
constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// The route minimising latency + reference / bottleneck (ties: fewer hops, then the higher
// bottleneck) lies on the Pareto front of (latency, hops, bottleneck): a route another one beats
// in all three can never win. Martins' label-setting algorithm builds that front from each
// source: labels leave a priority queue in (latency, hops, wider) order, and a label is kept at a
// switch only while no kept label there dominates it. A machine whose paths are unique (trees,
// switch stars) has one label per switch: the work per source is that of one Dijkstra, whatever
// the number of distinct bandwidths (trying every bandwidth as a threshold took minutes for
// 1,000 devices with distinct link speeds).
//
// Devices never relay, so a label reaching a device other than the source is a finished route:
// it competes only for that device's best route (the least cost, then fewer hops, then the wider
// bottleneck, then the lower latency where the cost's sum rounded two apart; then the route that
// stays in its node, then the first found: exactly the label the Pareto front at the device would
// keep and pick) and never enters the queue. Keeping a front at every device cost the square of
// a switch's front per device: a random 4,096-device machine took 31.6 s to route, 7.6 s without.
//
// Machines of several nodes (device names `<node>/<local>`, cluster.h) add one rule: traffic
// between two devices of one node stays on that node's own links. It never passes through a
// switch of another node or without a node (the fabric), nor through a NIC (a switch with a
// `network` link), which could otherwise relay between two of its attach points or send a copy
// out over the network and back when that is quicker than the node's PCIe path. A label records
// whether it has left its source's node; labels that have cannot reach a device of that node,
// and dominate only labels that have left too. Machines without node prefixes never set the
// flag, so their routes are those of the rule-free search.
class RouteSearch {
 public:
  explicit RouteSearch(const Machine& m) : m_(m), nd_(m.devices.size()), out_(nd_ + m.switches.size()) {
    std::unordered_map<std::string_view, std::size_t> node;  // devices first, then switches
    for (std::size_t i = 0; i < nd_; ++i) node.emplace(m.devices[i].name, i);
    for (std::size_t i = 0; i < m.switches.size(); ++i) node.emplace(m.switches[i], nd_ + i);
    for (std::size_t i = 0; i < m.links.size(); ++i)
      for (int back = 0; back < 2; ++back) {
        const auto dir = static_cast<LinkDirection>(2 * i + static_cast<std::size_t>(back));
        out_[node.at(back ? m.links[i].b : m.links[i].a)].push_back(
            {dir, node.at(back ? m.links[i].a : m.links[i].b), m.link_latency_s(dir), m.link_bandwidth_Bps(dir),
             kRouteReferenceBytes / m.link_bandwidth_Bps(dir)});
      }
    // Node prefix of every device and switch, as a small integer (0: no prefix), and which
    // switches have a network link.
    group_.assign(out_.size(), 0);
    std::unordered_map<std::string_view, uint32_t> group_of;
    auto group = [&](std::string_view full) -> uint32_t {
      const std::size_t slash = full.find('/');
      if (slash == std::string_view::npos) return 0;
      return group_of.try_emplace(full.substr(0, slash), static_cast<uint32_t>(group_of.size() + 1)).first->second;
    };
    for (std::size_t i = 0; i < nd_; ++i) group_[i] = group(m.devices[i].name);
    for (std::size_t i = 0; i < m.switches.size(); ++i) group_[nd_ + i] = group(m.switches[i]);
    networked_.assign(out_.size(), 0);
    for (const Link& l : m.links)
      if (l.kind == LinkKind::kNetwork) networked_[node.at(l.a)] = networked_[node.at(l.b)] = 1;
  }

  // One thread's working memory, reused from source to source.
  struct Scratch;

  // The routes from source s: their hops, in destination order, appended to `hops`, and where
  // each destination's end in it (row[t]; row[s] ends an empty route).
  void search(std::size_t s, Scratch& x, std::span<uint32_t> row, std::vector<LinkDirection>& hops) const;

  std::size_t num_devices() const { return nd_; }

 private:
  struct Out {
    LinkDirection dir;
    std::size_t to;
    double latency_s, bandwidth_Bps;
    double reference_s;  // the reference transfer's time at this link's bandwidth
  };

  const Machine& m_;
  std::size_t nd_;
  std::vector<std::vector<Out>> out_;  // per device and switch
  std::vector<uint32_t> group_;
  std::vector<uint8_t> networked_;
};

// Division is monotone, so the reference transfer's time at a route's bottleneck,
// R / min(b1, b2), is max(R / b1, R / b2) to the bit: labels and links carry R / b, and extending a
// route divides nothing (170 million device relaxations route a random 4,096-device machine).
struct Label {
  double latency_s;
  int hops;
  double bandwidth_Bps;
  double reference_s;  // kRouteReferenceBytes / bandwidth_Bps
  std::size_t node;
  std::size_t parent;  // index into labels; kNone at the source
  LinkDirection dir;
  bool left_node = false;  // has passed a switch outside the source's node, or a NIC
  bool dead = false;
};

bool dominates(const Label& a, const Label& b) {
  return a.latency_s <= b.latency_s && a.hops <= b.hops && a.bandwidth_Bps >= b.bandwidth_Bps &&
         (!a.left_node || b.left_node);
}

// A finished route to one device: a label's extension over its last link.
struct Candidate {
  double cost_s = 0;  // latency + reference / bandwidth
  double latency_s = 0;
  int hops = 0;
  double bandwidth_Bps = 0;
  std::size_t parent = kNone;  // the label it extends; kNone: no route yet
  LinkDirection dir = 0;
  bool left_node = false;
};

bool better(const Candidate& a, const Candidate& incumbent) {
  const Candidate& b = incumbent;
  if (b.parent == kNone) return true;
  if (a.cost_s != b.cost_s) return a.cost_s < b.cost_s;
  if (a.hops != b.hops) return a.hops < b.hops;
  if (a.bandwidth_Bps != b.bandwidth_Bps) return a.bandwidth_Bps > b.bandwidth_Bps;
  if (a.latency_s != b.latency_s) return a.latency_s < b.latency_s;
  return !a.left_node && b.left_node;
}

// The queue's order, with the label's keys copied in so that comparing reads no label.
struct Queued {
  double latency_s;
  int hops;
  double bandwidth_Bps;
  std::size_t label;
  bool operator>(const Queued& o) const {  // later: more latency, more hops, narrower, created later
    if (latency_s != o.latency_s) return latency_s > o.latency_s;
    if (hops != o.hops) return hops > o.hops;
    if (bandwidth_Bps != o.bandwidth_Bps) return bandwidth_Bps < o.bandwidth_Bps;
    return label > o.label;
  }
};

}  // namespace

struct RouteSearch::Scratch {
  std::vector<Label> labels;
  std::vector<std::vector<std::size_t>> at;  // live labels per switch (index: node)
  std::vector<Candidate> best_any, best_inside;  // per target: any route; one that stays in the node
  // best_any's costs (infinite: none yet), dense: most relaxations lose on cost alone, and this
  // array stays in the first-level cache where best_any does not.
  std::vector<double> any_cost;
  std::priority_queue<Queued, std::vector<Queued>, std::greater<>> queue;
};

void RouteSearch::search(std::size_t s, Scratch& x, std::span<uint32_t> row, std::vector<LinkDirection>& hops) const {
  x.labels.clear();
  x.at.resize(out_.size());
  for (auto& v : x.at) v.clear();
  x.best_any.assign(nd_, Candidate{});
  x.any_cost.assign(nd_, std::numeric_limits<double>::infinity());
  const uint32_t home = group_[s];
  // Only a source of a node has routes that must stay inside it.
  if (home != 0) x.best_inside.assign(nd_, Candidate{});
  x.labels.push_back({0, 0, std::numeric_limits<double>::infinity(), 0, s, kNone, 0});
  x.queue.push({0, 0, std::numeric_limits<double>::infinity(), 0});
  while (!x.queue.empty()) {
    const std::size_t id = x.queue.top().label;
    x.queue.pop();
    if (x.labels[id].dead) continue;
    for (const Out& o : out_[x.labels[id].node]) {
      if (o.to == s) continue;
      const Label& from = x.labels[id];
      const double latency_s = from.latency_s + o.latency_s;
      const double bandwidth_Bps = std::min(from.bandwidth_Bps, o.bandwidth_Bps);
      const double reference_s = std::max(from.reference_s, o.reference_s);
      if (o.to < nd_) {
        const double cost_s = latency_s + reference_s;
        // better() loses on a higher cost; a route that must stay in its node may still win there.
        if (cost_s > x.any_cost[o.to] && (home == 0 || from.left_node)) continue;
        const Candidate c{cost_s, latency_s, from.hops + 1, bandwidth_Bps, id, o.dir, from.left_node};
        if (better(c, x.best_any[o.to])) x.best_any[o.to] = c, x.any_cost[o.to] = cost_s;
        if (home != 0 && !c.left_node && better(c, x.best_inside[o.to])) x.best_inside[o.to] = c;
        continue;
      }
      const Label next{latency_s, from.hops + 1, bandwidth_Bps, reference_s, o.to, id, o.dir,
                       from.left_node || (home != 0 && (group_[o.to] != home || networked_[o.to] != 0))};
      std::vector<std::size_t>& here = x.at[o.to];
      if (std::any_of(here.begin(), here.end(), [&](std::size_t k) { return dominates(x.labels[k], next); })) continue;
      std::erase_if(here, [&](std::size_t k) {
        if (!dominates(next, x.labels[k])) return false;
        x.labels[k].dead = true;
        return true;
      });
      // Pareto fronts stay small on machines people build; a hostile mesh of switches could grow
      // them without bound.
      if (x.labels.size() >= kMaxRouteLabels)
        throw MachineError("links", std::to_string(m_.links.size()) + " entries",
                           "too many alternative paths to route from " + m_.devices[s].name + " (over " +
                               std::to_string(kMaxRouteLabels) + " partial routes); join the switches in fewer loops");
      x.labels.push_back(next);
      here.push_back(x.labels.size() - 1);
      x.queue.push({next.latency_s, next.hops, next.bandwidth_Bps, x.labels.size() - 1});
    }
  }
  for (std::size_t t = 0; t < nd_; ++t) {
    if (t != s) {
      const bool same_node = home != 0 && group_[t] == home;
      const Candidate& best = same_node ? x.best_inside[t] : x.best_any[t];
      if (best.parent == kNone)
        throw MachineError("devices[" + std::to_string(t) + "]", m_.devices[t].name,
                           "no route from " + m_.devices[s].name +
                               (same_node ? " inside their node (traffic between devices of one node never leaves it: "
                                            "link both to a common switch of the node or to each other)"
                                          : " (devices never relay traffic: link both to a common switch or to each other)"));
      // A label's hop count is its depth: the route is written from its end back.
      hops.resize(hops.size() + static_cast<std::size_t>(best.hops));
      auto hop = hops.end();
      *--hop = best.dir;
      for (std::size_t k = best.parent; x.labels[k].parent != kNone; k = x.labels[k].parent) *--hop = x.labels[k].dir;
    }
    row[t] = static_cast<uint32_t>(hops.size());
  }
}

RouteTable search_routes(const Machine& machine, std::size_t threads) {
  const RouteSearch search(machine);
  const std::size_t nd = search.num_devices();
  RouteTable table;
  table.hop_end.resize(nd * nd);
  if (threads == 0)
    threads = nd < kMinDevicesForThreads
                  ? 1
                  : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, nd / (kMinDevicesForThreads / 2));
  const std::size_t round = threads * kSourcesPerThreadRound;
  std::vector<std::vector<LinkDirection>> row_hops(round);
  std::vector<std::size_t> row_base(round);
  std::vector<std::exception_ptr> errors(round);
  std::vector<RouteSearch::Scratch> scratch(threads);
  for (std::size_t first = 0; first < nd; first += round) {
    const std::size_t count = std::min(round, nd - first);
    auto row = [&](std::size_t i) { return std::span(table.hop_end).subspan((first + i) * nd, nd); };
    run_on_workers(threads, [&](std::size_t w) {
      for (std::size_t i = w; i < count; i += threads) {
        row_hops[i].clear();
        try {
          search.search(first + i, scratch[w], row(i), row_hops[i]);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    });
    // Rows join the table in source order: the first failing source's error, as a serial search
    // would throw it, and hop offsets independent of the thread count. The workers copy their
    // rows in (a serial copy was a third of the time on 4,096 devices).
    std::size_t end = table.hops.size();
    for (std::size_t i = 0; i < count; ++i) {
      if (errors[i]) std::rethrow_exception(errors[i]);
      row_base[i] = end;
      end += row_hops[i].size();
    }
    PLACELAB_CHECK(end < std::numeric_limits<uint32_t>::max()) << end << " hops";
    // The first round's rows predict the rest: one allocation for the table's hops.
    if (first == 0 && count < nd) table.hops.reserve(end + end / count * (nd - count) * 21 / 20);
    table.hops.resize(end);
    run_on_workers(threads, [&](std::size_t w) {
      for (std::size_t i = w; i < count; i += threads) {
        for (uint32_t& e : row(i)) e += static_cast<uint32_t>(row_base[i]);
        std::copy(row_hops[i].begin(), row_hops[i].end(), table.hops.begin() + static_cast<std::ptrdiff_t>(row_base[i]));
      }
    });
  }
  return table;
}

}  // namespace placelab
