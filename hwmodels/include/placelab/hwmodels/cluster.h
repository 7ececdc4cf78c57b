// Machines that span several nodes. compose_cluster copies each node's devices, switches and links
// under a `<node>/` prefix and joins the nodes by a network: every node's NICs link to one central
// fabric switch. compose_cluster_calibration prefixes node calibrations the same way, so that the
// pair is one calibrated machine file (write_calibrated_machine). Both take plain values and do no
// I/O: the YAML loader's `cluster:` form (docs/machines.md) and an MPI calibration (one rank per
// node, rank 0 composes) call them alike.
//
//   std::vector<ClusterNode> nodes = {{"node0", load_machine("dgx1")}, {"node1", load_machine("dgx1")}};
//   NetworkSpec net{.bandwidth_Bps = 10.2e9, .latency_s = 1.29e-6, .nics = {{"plx:0"}, {"plx:1"}}};
//   Machine m = compose_cluster("dgx1x2", nodes, net);  // node0/gpu:0 … node1/gpu:7, finalised
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/hwmodels/calibration.h"
#include "placelab/hwmodels/machine.h"

namespace placelab {

// The name of the central switch every NIC links to. It has no node prefix.
inline constexpr std::string_view kFabricSwitch = "fabric";
// Bounds of a composed machine, so that a short file cannot demand unbounded time or memory: the
// route table holds one route per ordered device pair (4,090 devices, 409 DGX-1 nodes: 16.7 M
// routes, 0.94 GB and 3.7 s to load and route on this project's 2-core machine).
inline constexpr std::size_t kMaxClusterNodes = 4096;
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
// Fuzzing builds (PLACELAB_FUZZ) cap it lower: under ASan a 640-device cluster takes 5.5 s to load
// and route, 2,040 devices 57 s — past the fuzzer's 10-s hang limit, from a one-digit mutation of
// a preset's `nodes:`. The limit is checked the same way; only the number differs.
inline constexpr std::size_t kMaxClusterDevices = 256;
#else
inline constexpr std::size_t kMaxClusterDevices = 4096;
#endif
inline constexpr std::size_t kMaxNicsPerNode = 64;

// The node of a device or switch name: the text before the first '/' ("node3" for
// "node3/gpu:0"); "" when the name has none (a single-node machine, or the fabric).
std::string_view node_of(std::string_view device_name);
// The name of node-local `local_name` in node `node`: "<node>/<local_name>".
std::string cluster_device_name(std::string_view node, std::string_view local_name);

// One node of a cluster: its name (non-empty, without '/') and its single-node machine (whose
// names have no '/'; need not be finalised).
struct ClusterNode {
  std::string name;
  Machine machine;
};

// The network between the nodes. Each NIC k of node n is a switch `<n>/nic<k>` with two kinds of
// link (LinkKind::kNetwork for the second, always):
//  - to each of its attach points inside the node: kind pcie (a NIC is a PCIe device),
//    `attach_bandwidth_Bps` per direction, latency 0;
//  - to the fabric switch: `bandwidth_Bps` per direction, latency `latency_s / 2`.
// So a transfer between attach points of two nodes takes latency_s + bytes / bandwidth_Bps
// (when the attach links are wider), the point-to-point figure a ping-pong measures between two
// hosts: the latency is split half on each NIC→fabric hop, and the node's own links carry
// whatever the path from a device to its NIC adds.
struct NetworkSpec {
  double bandwidth_Bps = 0;  // > 0: each NIC's link to the fabric, bytes/s per direction
  double latency_s = 0;      // >= 0: one-way seconds from an attach point to one in another node
  // Where each NIC sits: per NIC, the node-local switch or device names it links to (one or
  // more; e.g. DGX-1: {{"plx:0"}, {"plx:1"}, {"plx:2"}, {"plx:3"}}, one EDR NIC per PCIe switch).
  // Empty: one NIC linked to every device of the node — for nodes without switches, such as the
  // CPU-only machine `placelab calibrate --backend cpu` writes (devices never relay traffic, so a
  // NIC on one device would leave the others unreachable).
  std::vector<std::vector<std::string>> nics;
  // Bytes/s per direction of each NIC–attach point link. nullopt: the widest pcie link at the
  // attach point (both directions considered; a PCIe switch's uplink, a GPU's host link), or
  // bandwidth_Bps when the attach point has no pcie link (a CPU device of a calibrated node).
  std::optional<double> attach_bandwidth_Bps;
};

// The machine of `nodes` joined by `net`, named `name`, finalised. Devices come node by node,
// each node's in its own order (so a device's id is its node's first id + its local id);
// switches node by node, each node's own then its NICs, and the fabric last; links likewise.
// Routes between two devices of one node are the node's own (Machine::finalize). Throws
// MachineError with fields "nodes[2].name", "network.bandwidth_Bps", "network.nics[1][0]", … for
// a bad node name, a '/' in a node-local name, a value out of range, an attach point the node
// lacks, a NIC name the node already uses, or more than kMaxClusterNodes nodes or
// kMaxClusterDevices devices; and what finalize throws for the composed machine.
Machine compose_cluster(std::string name, std::span<const ClusterNode> nodes, const NetworkSpec& net);

// One node's calibration, for compose_cluster_calibration.
struct ClusterCalibrationNode {
  std::string name;          // the node's name, as given to compose_cluster
  Calibration calibration;   // device and copy names node-local ("cpu:0")
};

// The calibrations of `nodes` as one: every device and copy name prefixed with its node
// (`<node>/cpu:0`), devices and copies node by node. backend: the nodes' backends, distinct ones
// joined by "+"; host: the distinct hosts joined by ","; created: the latest. Throws Error for an
// empty or duplicate node name, a '/' in a node or device name, or no node.
Calibration compose_cluster_calibration(std::span<const ClusterCalibrationNode> nodes);

}  // namespace placelab
