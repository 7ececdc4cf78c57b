// `placelab machines [NAME] [--yaml] [--routes]`: the presets, or one machine in detail; a machine
// of several nodes (hwmodels/cluster.h) as a summary of its nodes, its network and its routes.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "placelab/core/keys.h"
#include "placelab/core/units.h"
#include "placelab/hwmodels/cluster.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/hwmodels/machine_source.h"

namespace placelab::cli {
namespace {

// "2 x cpu Intel Xeon E5-2698 v4 (...), 8 x gpu Tesla V100 SXM2 16 GB": devices by kind, each kind
// named by the part its models share (presets append ", socket 1", ", board 0" per device).
std::string device_summary(const Machine& m) {
  std::string out;
  for (DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kGpu}) {
    int count = 0;
    std::string common;
    for (const Device& d : m.devices) {
      if (d.kind != kind) continue;
      if (count++ == 0) {
        common = d.model;
      } else {
        std::size_t n = 0;
        while (n < common.size() && n < d.model.size() && common[n] == d.model[n]) ++n;
        common.resize(n);
      }
    }
    if (count == 0) continue;
    // Cut back to the last complete item ("..., PCIe switch " → "...").
    if (auto comma = common.rfind(", "); comma != std::string::npos && count > 1) common.resize(comma);
    while (!common.empty() && (common.back() == ' ' || common.back() == ',')) common.pop_back();
    out += fmt::format("{}{} x {} {}", out.empty() ? "" : ", ", count, device_kind_name(kind), common.empty() ? "?" : common);
  }
  return out;
}

// The device table. `local` strips a cluster device's node prefix.
void print_devices(std::span<const Device* const> devices, bool local) {
  fmt::print("{:<10} {:<4} {:>8} {:>10} {:>11} {:>7} {:>10} {:>9}  {}\n", "device", "kind", "TFLOP/s", "mem BW", "memory",
             "streams", "full-speed", "launch", "model");
  for (const Device* d : devices) {
    const std::string name = local ? d->name.substr(node_of(d->name).size() + 1) : d->name;
    fmt::print("{:<10} {:<4} {:>8.2f} {:>10} {:>11} {:>7} {:>10} {:>9}  {}\n", name, device_kind_name(d->kind),
               d->peak_flops_per_s / 1e12, format_rate(d->memory_bandwidth_Bps), format_bytes(d->memory_bytes), d->streams,
               d->full_speed_ops, format_seconds(d->launch_overhead_s), d->model);
  }
}

std::string link_bandwidth(const Link& l) {
  std::string bw = format_rate(l.bandwidth_Bps);
  if (l.reverse_bandwidth_Bps && *l.reverse_bandwidth_Bps != l.bandwidth_Bps)
    bw += " / " + format_rate(*l.reverse_bandwidth_Bps);
  return bw;
}

// The link table; `strip` characters are cut from the front of both endpoint names.
void print_links(std::span<const Link* const> links, std::size_t strip) {
  fmt::print("{:<7} {:<28} {:>11} {:>9}\n", "link", "endpoints", "bandwidth", "latency");
  for (const Link* l : links)
    fmt::print("{:<7} {:<28} {:>11} {:>9}\n", link_kind_name(l->kind), l->a.substr(strip) + " <-> " + l->b.substr(strip),
               link_bandwidth(*l), format_seconds(l->latency_s));
}

// A machine of more devices lists its routes only when asked (--routes): 4,096 devices have 16.8
// million, 874 MB of text.
constexpr std::size_t kMaxDevicesWithRoutesListed = 64;

void print_machine(const Machine& m, bool all_routes, const std::string& argument) {
  fmt::print("{}: {}\n\n", m.name, m.description);
  std::vector<const Device*> devices;
  for (const Device& d : m.devices) devices.push_back(&d);
  print_devices(devices, false);
  if (!m.switches.empty()) fmt::print("\nswitches: {}\n", join_names(m.switches));
  std::vector<const Link*> links;
  for (const Link& l : m.links) links.push_back(&l);
  fmt::print("\n");
  print_links(links, 0);
  if (!all_routes && m.num_devices() > kMaxDevicesWithRoutesListed) {
    fmt::print("\n{} routes; every one (bottleneck bandwidth, latency): `placelab machines {} --routes`.\n",
               m.num_devices() * (m.num_devices() - 1), argument);
    return;
  }
  fmt::print("\nroutes (bottleneck bandwidth, latency{}):\n",
             m.route_figures.empty() ? "" : "; * the machine's measured figure of the whole route");
  for (DeviceId s = 0; s < m.num_devices(); ++s)
    for (DeviceId t = 0; t < m.num_devices(); ++t) {
      if (s == t) continue;
      const Route& r = m.route(s, t);
      fmt::print("  {:>8} -> {:<8} {:>10} {:>9}  {} hop{}{}\n", m.devices[s].name, m.devices[t].name,
                 format_rate(r.bandwidth_Bps), format_seconds(r.latency_s), r.hops.size(),
                 r.hops.size() == 1 ? "" : "s", m.has_route_figure(s, t) ? "  *" : "");
    }
}

// ---- Machines of several nodes (hwmodels/cluster.h) ----------------------------------------------

// One node of a cluster as the machine holds it: its devices, switches and NICs (switches with a
// network link), the links inside it and the links of its NICs.
struct NodeView {
  std::string name;
  std::vector<DeviceId> devices;
  std::vector<std::string> switches;  // without the prefix, NICs excluded
  std::vector<std::string> nics;      // full names
  std::vector<const Link*> links;     // both ends in the node, no NIC
  std::vector<const Link*> nic_links; // NIC to an attach point in the node
  std::vector<const Link*> network;   // NIC to a node-less switch (the fabric)
  // What must match for two nodes to print as one: local names and every figure.
  std::string layout;
};

// The nodes of `m` in device order; empty unless every device has a node prefix.
std::vector<NodeView> cluster_nodes(const Machine& m) {
  std::vector<NodeView> nodes;
  std::map<std::string, std::size_t, std::less<>> index;
  for (DeviceId d = 0; d < m.num_devices(); ++d) {
    const std::string_view node = node_of(m.devices[d].name);
    if (node.empty()) return {};
    auto [it, added] = index.try_emplace(std::string(node), nodes.size());
    if (added) nodes.push_back({.name = std::string(node)});
    nodes[it->second].devices.push_back(d);
  }
  std::set<std::string, std::less<>> nics;
  for (const Link& l : m.links)
    if (l.kind == LinkKind::kNetwork)
      for (const std::string* end : {&l.a, &l.b})
        if (!node_of(*end).empty()) nics.insert(*end);
  auto node_at = [&](std::string_view name) -> NodeView* {
    auto it = index.find(node_of(name));
    return it == index.end() ? nullptr : &nodes[it->second];
  };
  for (const std::string& s : m.switches)
    if (NodeView* n = node_at(s)) {
      if (nics.count(s)) {
        n->nics.push_back(s);
      } else {
        n->switches.push_back(s.substr(n->name.size() + 1));
      }
    }
  for (const Link& l : m.links) {
    NodeView* a = node_at(l.a);
    NodeView* b = node_at(l.b);
    const bool nic_a = nics.count(l.a) > 0, nic_b = nics.count(l.b) > 0;
    if (l.kind == LinkKind::kNetwork && (a == nullptr) != (b == nullptr)) {
      (a ? a : b)->network.push_back(&l);
    } else if (a && a == b && (nic_a || nic_b)) {
      a->nic_links.push_back(&l);
    } else if (a && a == b) {
      a->links.push_back(&l);
    }
  }
  for (NodeView& n : nodes) {
    const std::size_t strip = n.name.size() + 1;
    for (DeviceId d : n.devices) {
      const Device& x = m.devices[d];
      n.layout += fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{};", x.name.substr(strip), device_kind_name(x.kind), x.model,
                              x.peak_flops_per_s, x.memory_bandwidth_Bps, x.memory_bytes, x.streams, x.full_speed_ops,
                              x.launch_overhead_s, x.copy_engine);
    }
    for (const std::string& s : n.switches) n.layout += s + ";";
    for (const auto* list : {&n.links, &n.nic_links})
      for (const Link* l : *list)
        n.layout += fmt::format("{}|{}|{}|{}|{}|{}|{};", l->a.substr(strip), l->b.substr(strip), link_kind_name(l->kind),
                                l->bandwidth_Bps, l->latency_s, l->reverse_bandwidth_Bps.value_or(-1),
                                l->reverse_latency_s.value_or(-1));
    for (const Link* l : n.network)
      n.layout += fmt::format("net|{}|{}|{}|{};", l->bandwidth_Bps, l->latency_s, l->reverse_bandwidth_Bps.value_or(-1),
                              l->reverse_latency_s.value_or(-1));
  }
  // Route figures, to the node of their first source (a composed node's figures name its devices only).
  for (const RouteFigure& f : m.route_figures) {
    if (f.from.empty()) continue;
    NodeView* n = node_at(f.from.front());
    if (n == nullptr) continue;
    const std::size_t strip = n->name.size() + 1;
    std::string text = "figure|";
    for (const auto* names : {&f.from, &f.to}) {
      for (const std::string& d : *names) text.append(d.substr(std::min(strip, d.size()))).append(",");
      text.append("|");
    }
    n->layout += fmt::format("{}{}|{};", text, f.bandwidth_Bps.value_or(-1), f.latency_s.value_or(-1));
  }
  return nodes;
}

// "node0, node1, node2" or "node0 … node63" for a run of four or more.
std::string node_list(const std::vector<const NodeView*>& nodes) {
  if (nodes.size() >= 4) return fmt::format("{} … {}", nodes.front()->name, nodes.back()->name);
  std::string out;
  for (const NodeView* n : nodes) out += (out.empty() ? "" : ", ") + n->name;
  return out;
}

// "10.2 GB/s" or "11.4-12.0 GB/s", "1.3 us" or "2.3-18.3 us": the range of a set of values.
template <typename Format>
std::string range_text(double lo, double hi, Format format) {
  return lo == hi ? format(lo) : format(lo) + " to " + format(hi);
}

// Routes between device kinds from node `a` to node `b` (a == b: inside one node), summarised.
void print_route_summary(const Machine& m, const NodeView& a, const NodeView& b) {
  for (DeviceKind from : {DeviceKind::kCpu, DeviceKind::kGpu})
    for (DeviceKind to : {DeviceKind::kCpu, DeviceKind::kGpu}) {
      double bw_lo = 0, bw_hi = 0, lat_lo = 0, lat_hi = 0;
      std::size_t hops_lo = 0, hops_hi = 0, count = 0;
      for (DeviceId s : a.devices)
        for (DeviceId t : b.devices) {
          if (s == t || m.devices[s].kind != from || m.devices[t].kind != to) continue;
          const Route r = m.route(s, t);
          if (count++ == 0) {
            bw_lo = bw_hi = r.bandwidth_Bps;
            lat_lo = lat_hi = r.latency_s;
            hops_lo = hops_hi = r.hops.size();
          }
          bw_lo = std::min(bw_lo, r.bandwidth_Bps), bw_hi = std::max(bw_hi, r.bandwidth_Bps);
          lat_lo = std::min(lat_lo, r.latency_s), lat_hi = std::max(lat_hi, r.latency_s);
          hops_lo = std::min(hops_lo, r.hops.size()), hops_hi = std::max(hops_hi, r.hops.size());
        }
      if (count == 0) continue;
      fmt::print("  {} -> {}  {:>4} pairs  {:>24}  {:>20}  {} hops\n", device_kind_name(from), device_kind_name(to), count,
                 range_text(bw_lo, bw_hi, format_rate), range_text(lat_lo, lat_hi, format_seconds),
                 hops_lo == hops_hi ? std::to_string(hops_lo) : fmt::format("{}-{}", hops_lo, hops_hi));
    }
}

// A multi-node machine, compactly: the nodes, one of each kind of node in detail (devices,
// switches, links inside it), its NICs and the network, and route summaries by device kind.
void print_cluster(const Machine& m, const std::vector<NodeView>& nodes, const std::string& argument) {
  fmt::print("{}: {}\n\n", m.name, m.description);
  int cpus = 0, gpus = 0;
  for (const Device& d : m.devices) (d.kind == DeviceKind::kCpu ? cpus : gpus)++;
  std::vector<const NodeView*> all;
  for (const NodeView& n : nodes) all.push_back(&n);
  fmt::print("nodes      {} ({}), {} devices in all: {} cpu, {} gpu\n", nodes.size(), node_list(all), m.num_devices(),
             cpus, gpus);

  // Nodes of one layout print once.
  std::vector<std::vector<const NodeView*>> groups;
  for (const NodeView& n : nodes) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.front()->layout == n.layout; });
    if (it == groups.end()) {
      groups.push_back({&n});
    } else {
      it->push_back(&n);
    }
  }
  for (const auto& group : groups) {
    const NodeView& n = *group.front();
    const std::size_t strip = n.name.size() + 1;
    std::vector<const Device*> devices;
    for (DeviceId d : n.devices) devices.push_back(&m.devices[d]);
    Machine local;  // for device_summary
    for (const Device* d : devices) local.devices.push_back(*d);
    fmt::print("\n{} {}: {}\n\n", group.size() == 1 ? "node" : fmt::format("{} nodes", group.size()), node_list(group),
               device_summary(local));
    print_devices(devices, true);
    if (!n.switches.empty()) {
      std::string sw;
      for (const auto& s : n.switches) sw += (sw.empty() ? "" : ", ") + s;
      fmt::print("\nswitches: {}\n", sw);
    }
    if (!n.links.empty()) {
      fmt::print("\n");
      print_links(n.links, strip);
    }
    fmt::print("\nroutes inside the node (bottleneck bandwidth, latency):\n");
    print_route_summary(m, n, n);

    // NICs: where each sits, and its link to the fabric. A transfer between two nodes crosses
    // two NIC–fabric links: their latencies add up to the network's point-to-point latency.
    std::string network;
    if (!n.network.empty()) {
      const Link& l = *n.network.front();
      network = fmt::format(", NIC to NIC across nodes {}", format_seconds(l.latency_s + l.reverse_latency_s.value_or(l.latency_s)));
    }
    fmt::print("\nnetwork    {} NIC{} per node{}\n", n.nics.size(), n.nics.size() == 1 ? "" : "s", network);
    for (const std::string& nic : n.nics) {
      std::string attach, attach_links;
      for (const Link* l : n.nic_links) {
        if (l->a != nic && l->b != nic) continue;
        const std::string& other = l->a == nic ? l->b : l->a;
        attach += (attach.empty() ? "" : ", ") + other.substr(strip);
        attach_links = fmt::format("{} {}, {}", link_kind_name(l->kind), link_bandwidth(*l), format_seconds(l->latency_s));
      }
      for (const Link* l : n.network) {
        if (l->a != nic && l->b != nic) continue;
        const std::string& fabric = l->a == nic ? l->b : l->a;
        fmt::print("  {:<6} on {:<14} {:<20} to {}: {}, {}\n", nic.substr(strip), attach, "(" + attach_links + ")",
                   fabric, link_bandwidth(*l), format_seconds(l->latency_s));
      }
    }
  }
  if (nodes.size() > 1) {
    fmt::print("\nroutes between two nodes, {} -> {} (bottleneck bandwidth, latency):\n", nodes[0].name, nodes[1].name);
    print_route_summary(m, nodes[0], nodes[1]);
  }
  fmt::print("\nEvery device, link and route: `placelab machines {} --routes`.\n", argument);
}

}  // namespace

void add_machines_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("machines", "List the machine presets, or show one machine in detail");
  auto name = std::make_shared<std::string>();
  auto yaml = std::make_shared<bool>(false);
  auto routes = std::make_shared<bool>(false);
  cmd->add_option("machine", *name, "A preset name, a machine YAML file or a calibrated machine file to show in detail");
  cmd->add_flag("--yaml", *yaml, "Print the machine's YAML (a preset's source, with its sources cited)");
  cmd->add_flag("--routes", *routes,
                "List every route (a machine of over 64 devices prints their count), and a machine of several nodes "
                "every device and link too, as for one node, instead of a summary");
  cmd->footer("Examples:\n  placelab machines\n  placelab machines k80x4\n  placelab machines dgx1 --yaml\n"
              "  placelab machines dgx1x8-ib100");
  cmd->callback([name, yaml, routes] {
    if (name->empty()) {
      if (*yaml) throw InputError("--yaml needs a machine name");
      const std::vector<std::string> presets = preset_names();
      std::size_t width = 8;
      for (const std::string& p : presets) width = std::max(width, p.size());
      fmt::print("{:<{}} {:>7}  {}\n", "preset", width, "devices", "description");
      for (const std::string& p : presets) {
        Machine m = load_machine(p);
        fmt::print("{:<{}} {:>7}  {}\n{:<{}} {}\n", p, width, m.num_devices(), m.description, "", width + 9,
                   device_summary(m));
      }
      fmt::print("\nShow one with `placelab machines <name>`; use one with `--machine <name>` or `--machine file.yaml`.\n");
      return;
    }
    if (*yaml) {
      std::vector<std::string> names = preset_names();
      if (std::find(names.begin(), names.end(), *name) != names.end()) {
        std::cout << preset_yaml(*name);
        return;
      }
    }
    const std::unique_ptr<MachineSource> source = load_machine_source(*name);
    const Machine& m = source->machine;
    const std::vector<NodeView> nodes = *routes ? std::vector<NodeView>{} : cluster_nodes(m);
    if (nodes.empty()) {
      print_machine(m, *routes, *name);
    } else {
      print_cluster(m, nodes, *name);
    }
  });
}

}  // namespace placelab::cli
