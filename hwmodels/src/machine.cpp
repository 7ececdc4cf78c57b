#include "placelab/hwmodels/machine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "placelab/core/error.h"
#include "placelab/core/numbers.h"
#include "route_search.h"

namespace placelab {

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
  PLACELAB_CHECK(routes_.hop_end.size() == devices.size() * devices.size() && !routes_.hop_end.empty())
      << "Machine::route needs finalize() after the last change";
  PLACELAB_CHECK(src < devices.size() && dst < devices.size() && src != dst) << src << " -> " << dst;
  const std::size_t i = static_cast<std::size_t>(src) * devices.size() + dst;
  Route r{routes_.hops_of(i), 0, std::numeric_limits<double>::infinity()};
  // In the route search's order, so the figures are the search's to the bit.
  for (LinkDirection d : r.hops) {
    r.latency_s += direction_latency_s_[d];
    r.bandwidth_Bps = std::min(r.bandwidth_Bps, direction_bandwidth_Bps_[d]);
  }
  if (const PairFigure* f = pair_figure(i)) {
    if (!std::isnan(f->latency_s)) r.latency_s = f->latency_s;
    if (!std::isnan(f->bandwidth_Bps)) r.bandwidth_Bps = f->bandwidth_Bps;
  }
  return r;
}

bool Machine::has_route_figure(DeviceId src, DeviceId dst) const {
  PLACELAB_CHECK(src < devices.size() && dst < devices.size()) << src << " -> " << dst;
  return pair_figure(static_cast<std::size_t>(src) * devices.size() + dst) != nullptr;
}

const Machine::PairFigure* Machine::pair_figure(std::size_t pair) const {
  if (pair_figures_.empty()) return nullptr;
  auto it = std::lower_bound(pair_figures_.begin(), pair_figures_.end(), pair,
                             [](const PairFigure& f, std::size_t p) { return f.pair < p; });
  return it != pair_figures_.end() && it->pair == pair ? &*it : nullptr;
}

void Machine::apply_route_figures() {
  pair_figures_.clear();
  if (route_figures.empty()) return;
  std::unordered_map<std::string_view, DeviceId> device_of;
  for (std::size_t d = 0; d < devices.size(); ++d) device_of.emplace(devices[d].name, static_cast<DeviceId>(d));
  std::unordered_map<std::size_t, std::size_t> entry_of_pair;  // which entry named a pair first
  for (std::size_t i = 0; i < route_figures.size(); ++i) {
    const RouteFigure& f = route_figures[i];
    const std::string where = "route_figures[" + std::to_string(i) + "]";
    auto ids = [&](const std::vector<std::string>& names, const char* key) {
      if (names.empty()) throw MachineError(where + "." + key, "", "must name at least one device");
      std::vector<DeviceId> out;
      for (std::size_t k = 0; k < names.size(); ++k) {
        auto it = device_of.find(names[k]);
        if (it == device_of.end())
          throw MachineError(where + "." + key + "[" + std::to_string(k) + "]", names[k], "not a device name");
        out.push_back(it->second);
      }
      return out;
    };
    const std::vector<DeviceId> from = ids(f.from, "from"), to = ids(f.to, "to");
    if (!f.bandwidth_Bps && !f.latency_s)
      throw MachineError(where, "", "must give bandwidth_Bps, latency_s or both");
    if (f.bandwidth_Bps && !(std::isfinite(*f.bandwidth_Bps) && *f.bandwidth_Bps > 0))
      throw MachineError(where + ".bandwidth_Bps", format_6g(*f.bandwidth_Bps), "must be a finite number > 0");
    if (f.latency_s && !(std::isfinite(*f.latency_s) && *f.latency_s >= 0))
      throw MachineError(where + ".latency_s", format_6g(*f.latency_s), "must be a finite number >= 0");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::size_t pairs = 0;
    for (DeviceId s : from)
      for (DeviceId t : to) {
        if (s == t) continue;
        const std::size_t pair = static_cast<std::size_t>(s) * devices.size() + t;
        if (auto [it, added] = entry_of_pair.try_emplace(pair, i); !added)
          throw MachineError(where, devices[s].name + " -> " + devices[t].name,
                             it->second == i ? "names this pair twice"
                                             : "already given by route_figures[" + std::to_string(it->second) + "]");
        pair_figures_.push_back({pair, f.latency_s.value_or(nan), f.bandwidth_Bps.value_or(nan)});
        ++pairs;
      }
    if (pairs == 0) throw MachineError(where, "", "names no pair of two different devices");
  }
  std::sort(pair_figures_.begin(), pair_figures_.end(),
            [](const PairFigure& a, const PairFigure& b) { return a.pair < b.pair; });
}

void Machine::finalize() {
  routes_ = {};
  pair_figures_.clear();
  if (devices.empty()) throw MachineError("devices", "", "must list at least one device");
  if (devices.size() > std::numeric_limits<DeviceId>::max())
    throw MachineError("devices", std::to_string(devices.size()) + " entries", "too many devices");
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  auto non_negative = [](double v) { return std::isfinite(v) && v >= 0; };
  std::unordered_set<std::string_view> node;  // device and switch names
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const Device& d = devices[i];
    std::string where = "devices[" + std::to_string(i) + "]";
    if (d.name.empty()) throw MachineError(where + ".name", "", "must not be empty");
    if (!node.insert(d.name).second) throw MachineError(where + ".name", d.name, "duplicate name");
    if (!positive(d.peak_flops_per_s))
      throw MachineError(where + ".peak_flops", format_6g(d.peak_flops_per_s), "must be a finite number > 0");
    if (!positive(d.memory_bandwidth_Bps))
      throw MachineError(where + ".memory_bandwidth_Bps", format_6g(d.memory_bandwidth_Bps),
                         "must be a finite number > 0");
    if (d.memory_bytes <= 0)
      throw MachineError(where + ".memory_bytes", std::to_string(d.memory_bytes), "must be > 0");
    if (d.streams < 1 || d.streams > 256)
      throw MachineError(where + ".streams", std::to_string(d.streams), "must be in 1..256");
    if (d.full_speed_ops < 1 || d.full_speed_ops > d.streams)
      throw MachineError(where + ".full_speed_ops", std::to_string(d.full_speed_ops),
                         "must be in 1..streams (" + std::to_string(d.streams) + ")");
    if (!non_negative(d.launch_overhead_s))
      throw MachineError(where + ".launch_overhead_s", format_6g(d.launch_overhead_s),
                         "must be a finite number >= 0");
    if (!non_negative(d.dispatch_s) || d.dispatch_s > 1.0)
      throw MachineError(where + ".dispatch_s", format_6g(d.dispatch_s), "must be a finite number in [0, 1] s");
  }
  for (std::size_t i = 0; i < switches.size(); ++i) {
    std::string where = "switches[" + std::to_string(i) + "]";
    if (switches[i].empty()) throw MachineError(where, "", "must not be empty");
    if (!node.insert(switches[i]).second)
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

  routes_ = search_routes(*this);
  direction_latency_s_.resize(num_link_directions());
  direction_bandwidth_Bps_.resize(num_link_directions());
  for (std::size_t d = 0; d < num_link_directions(); ++d) {
    direction_latency_s_[d] = link_latency_s(static_cast<LinkDirection>(d));
    direction_bandwidth_Bps_[d] = link_bandwidth_Bps(static_cast<LinkDirection>(d));
  }
  apply_route_figures();
}

bool identical_devices(const Device& a, const Device& b) {
  return a.kind == b.kind && a.peak_flops_per_s == b.peak_flops_per_s && a.memory_bandwidth_Bps == b.memory_bandwidth_Bps &&
         a.launch_overhead_s == b.launch_overhead_s && a.efficiency == b.efficiency;
}

}  // namespace placelab
