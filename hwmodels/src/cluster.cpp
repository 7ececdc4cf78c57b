// Composition of multi-node machines and their calibrations (cluster.h).
#include "placelab/hwmodels/cluster.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <unordered_set>

#include "placelab/core/error.h"
#include "placelab/core/numbers.h"

namespace placelab {
namespace {

bool has_slash(std::string_view s) { return s.find('/') != std::string_view::npos; }

// Checks node names: non-empty, no '/', unique. `what(i)` names entry i in messages.
template <typename Name, typename Throw>
void check_node_names(std::size_t count, Name name_of, Throw fail) {
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string& n = name_of(i);
    const std::string field = "nodes[" + std::to_string(i) + "].name";
    if (n.empty()) fail(field, n, "must not be empty");
    if (has_slash(n)) fail(field, n, "must not contain '/' (it separates a node from a device name)");
    if (!seen.insert(n).second) fail(field, n, "duplicate node name");
  }
}

// The widest pcie link at `local` in `m` (either direction), or nullopt when it has none.
std::optional<double> widest_pcie(const Machine& m, std::string_view local) {
  std::optional<double> best;
  for (const Link& l : m.links) {
    if (l.kind != LinkKind::kPcie || (l.a != local && l.b != local)) continue;
    const double bw = std::max(l.bandwidth_Bps, l.reverse_bandwidth_Bps.value_or(l.bandwidth_Bps));
    if (!best || bw > *best) best = bw;
  }
  return best;
}

}  // namespace

std::string_view node_of(std::string_view device_name) {
  const std::size_t slash = device_name.find('/');
  return slash == std::string_view::npos ? std::string_view{} : device_name.substr(0, slash);
}

std::string cluster_device_name(std::string_view node, std::string_view local_name) {
  std::string out;
  out.reserve(node.size() + 1 + local_name.size());
  return out.append(node).append("/").append(local_name);
}

Machine compose_cluster(std::string name, std::span<const ClusterNode> nodes, const NetworkSpec& net) {
  auto fail = [](const std::string& field, const std::string& value, const std::string& rule) {
    throw MachineError(field, value, rule);
  };
  if (nodes.empty()) fail("nodes", "0", "a cluster needs at least one node");
  if (nodes.size() > kMaxClusterNodes)
    fail("nodes", std::to_string(nodes.size()), "must be at most " + std::to_string(kMaxClusterNodes));
  check_node_names(nodes.size(), [&](std::size_t i) -> const std::string& { return nodes[i].name; }, fail);
  std::size_t total_devices = 0;
  for (const ClusterNode& n : nodes) total_devices += n.machine.devices.size();
  if (total_devices > kMaxClusterDevices)
    fail("nodes", std::to_string(nodes.size()) + " nodes of " + std::to_string(total_devices) + " devices in all",
         "a cluster may hold at most " + std::to_string(kMaxClusterDevices) + " devices");
  if (!(std::isfinite(net.bandwidth_Bps) && net.bandwidth_Bps > 0))
    fail("network.bandwidth_Bps", format_6g(net.bandwidth_Bps), "must be a finite number > 0");
  if (!(std::isfinite(net.latency_s) && net.latency_s >= 0))
    fail("network.latency_s", format_6g(net.latency_s), "must be a finite number >= 0");
  if (net.attach_bandwidth_Bps && !(std::isfinite(*net.attach_bandwidth_Bps) && *net.attach_bandwidth_Bps > 0))
    fail("network.attach_bandwidth_Bps", format_6g(*net.attach_bandwidth_Bps), "must be a finite number > 0");
  if (net.nics.size() > kMaxNicsPerNode)
    fail("network.nics", std::to_string(net.nics.size()) + " NICs",
         "must be at most " + std::to_string(kMaxNicsPerNode) + " per node");
  for (std::size_t k = 0; k < net.nics.size(); ++k) {
    if (net.nics[k].empty()) fail("network.nics[" + std::to_string(k) + "]", "", "must name at least one attach point");
    for (std::size_t j = 0; j < net.nics[k].size(); ++j)
      for (std::size_t i = 0; i < j; ++i)
        if (net.nics[k][i] == net.nics[k][j])
          fail("network.nics[" + std::to_string(k) + "][" + std::to_string(j) + "]", net.nics[k][j],
               "names the same attach point twice");
  }

  Machine m;
  m.name = std::move(name);
  m.devices.reserve(total_devices);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const ClusterNode& node = nodes[i];
    const Machine& local = node.machine;
    const std::string where = "nodes[" + std::to_string(i) + "].machine";
    std::unordered_set<std::string_view> names;  // the node's devices and switches
    for (std::size_t d = 0; d < local.devices.size(); ++d) {
      if (has_slash(local.devices[d].name))
        fail(where + ".devices[" + std::to_string(d) + "].name", local.devices[d].name,
             "must not contain '/' (a node of a cluster must be a single-node machine)");
      names.insert(local.devices[d].name);
      Device dev = local.devices[d];
      dev.name = cluster_device_name(node.name, dev.name);
      m.devices.push_back(std::move(dev));
    }
    for (std::size_t s = 0; s < local.switches.size(); ++s) {
      if (has_slash(local.switches[s]))
        fail(where + ".switches[" + std::to_string(s) + "]", local.switches[s],
             "must not contain '/' (a node of a cluster must be a single-node machine)");
      names.insert(local.switches[s]);
      m.switches.push_back(cluster_device_name(node.name, local.switches[s]));
    }
    for (const Link& l : local.links) {
      Link copy = l;
      copy.a = cluster_device_name(node.name, l.a);
      copy.b = cluster_device_name(node.name, l.b);
      m.links.push_back(std::move(copy));
    }
    for (const RouteFigure& f : local.route_figures) {  // the node's measured paths, in each copy of it
      RouteFigure copy = f;
      for (std::vector<std::string>* list : {&copy.from, &copy.to})
        for (std::string& n : *list) n = cluster_device_name(node.name, n);
      m.route_figures.push_back(std::move(copy));
    }

    // The NICs: as listed, or one on every device.
    std::vector<std::vector<std::string>> attach = net.nics;
    if (attach.empty()) {
      attach.emplace_back();
      for (const Device& d : local.devices) attach.back().push_back(d.name);
    }
    for (std::size_t k = 0; k < attach.size(); ++k) {
      const std::string nic_local = "nic" + std::to_string(k);
      if (names.count(nic_local))
        fail("network.nics[" + std::to_string(k) + "]", nic_local,
             "node " + node.name + " already has a device or switch of that name");
      const std::string nic = cluster_device_name(node.name, nic_local);
      m.switches.push_back(nic);
      for (std::size_t j = 0; j < attach[k].size(); ++j) {
        const std::string& point = attach[k][j];
        if (!names.count(point))
          fail("network.nics[" + std::to_string(k) + "]" + (attach[k].size() > 1 ? "[" + std::to_string(j) + "]" : ""),
               point, "not a device or switch of node " + node.name + " (machine " + local.name + ")");
        const double bw = net.attach_bandwidth_Bps.value_or(widest_pcie(local, point).value_or(net.bandwidth_Bps));
        m.links.push_back(Link{.a = nic, .b = cluster_device_name(node.name, point), .kind = LinkKind::kPcie,
                               .bandwidth_Bps = bw, .latency_s = 0});
      }
      m.links.push_back(Link{.a = nic, .b = std::string(kFabricSwitch), .kind = LinkKind::kNetwork,
                             .bandwidth_Bps = net.bandwidth_Bps, .latency_s = net.latency_s / 2});
    }
  }
  m.switches.emplace_back(kFabricSwitch);
  const std::size_t nics_per_node = net.nics.empty() ? 1 : net.nics.size();
  m.description = std::to_string(nodes.size()) + " node" + (nodes.size() == 1 ? "" : "s") + " (" + nodes.front().machine.name +
                  (nodes.size() > 1 && nodes.back().machine.name != nodes.front().machine.name ? ", …" : "") +
                  "), " + std::to_string(nics_per_node) + " NIC" + (nics_per_node == 1 ? "" : "s") +
                  " each on a network of " + format_6g(net.bandwidth_Bps / 1e9) + " GB/s per NIC and direction, " +
                  format_6g(net.latency_s * 1e6) + " us between nodes";
  m.finalize();
  return m;
}

Calibration compose_cluster_calibration(std::span<const ClusterCalibrationNode> nodes) {
  auto fail = [](const std::string& field, const std::string& value, const std::string& rule) {
    throw Error(field + (value.empty() ? "" : " = " + value) + ": " + rule);
  };
  if (nodes.empty()) fail("nodes", "0", "a cluster calibration needs at least one node");
  check_node_names(nodes.size(), [&](std::size_t i) -> const std::string& { return nodes[i].name; }, fail);
  Calibration out;
  std::vector<std::string> backends, hosts;
  auto add_distinct = [](std::vector<std::string>& list, const std::string& s) {
    if (!s.empty() && std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
  };
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const ClusterCalibrationNode& node = nodes[i];
    const Calibration& c = node.calibration;
    add_distinct(backends, c.backend);
    add_distinct(hosts, c.host);
    out.created = std::max(out.created, c.created);  // ISO 8601 UTC: text order is time order
    for (const DeviceCalibration& d : c.devices) {
      if (has_slash(d.device))
        fail("nodes[" + std::to_string(i) + "].calibration.devices", d.device, "must not contain '/'");
      DeviceCalibration copy = d;
      copy.device = cluster_device_name(node.name, d.device);
      out.devices.push_back(std::move(copy));
    }
    for (const CopyCalibration& cc : c.copies) {
      if (has_slash(cc.src) || has_slash(cc.dst))
        fail("nodes[" + std::to_string(i) + "].calibration.copies", cc.src + " -> " + cc.dst, "must not contain '/'");
      CopyCalibration copy = cc;
      copy.src = cluster_device_name(node.name, cc.src);
      copy.dst = cluster_device_name(node.name, cc.dst);
      out.copies.push_back(std::move(copy));
    }
  }
  for (const std::string& b : backends) out.backend += (out.backend.empty() ? "" : "+") + b;
  for (const std::string& h : hosts) out.host += (out.host.empty() ? "" : ",") + h;
  return out;
}

}  // namespace placelab
