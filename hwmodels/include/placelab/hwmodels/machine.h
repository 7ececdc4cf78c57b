// A machine: compute devices, the links between them (with intermediate switch nodes such as a
// K80 board's PCIe switch or a host root complex), and the routes transfers take. Routes are
// fastest paths over the link graph (GPUs and CPUs never relay traffic; switches do), computed
// once when the machine is finalised.
//
//   Machine m;  m.name = "toy";
//   m.devices = {{.name = "cpu:0", .kind = DeviceKind::kCpu, ...}, {.name = "gpu:0", ...}};
//   m.links = {{.a = "cpu:0", .b = "gpu:0", .kind = LinkKind::kPcie, .bandwidth_Bps = 12e9}};
//   m.finalize();                       // validates, builds routes; throws Error on a bad machine
//   const Route& r = m.route(0, 1);
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/core/error.h"
#include "placelab/core/large_table.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/efficiency.h"

namespace placelab {

// What Machine::finalize throws: `field` is the path of the offending entry in the machine's
// YAML form ("devices[2].memory_bytes", "links[3].a", "devices[4]"), so a loader can point at
// the line that holds it. what() is "field = value: rule" (or "field: rule" without a value).
class MachineError : public Error {
 public:
  MachineError(std::string field, std::string value, std::string rule);
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

enum class DeviceKind : uint8_t { kCpu, kGpu };

// Host seconds per op of PyTorch eager when a machine file gives none: the median host time
// (cpu_op duration) of the 1,671 kernel-launching top-level ops of three steady steps of a real
// ResNet-50-like training run on a V100 node (the Kineto trace v100-sxm2-cnn-training of
// docs/calibration.md; both autograd threads, profiler on with shapes recorded, which inflates it).
inline constexpr double kDefaultDispatchS = 46.5e-6;
std::string_view device_kind_name(DeviceKind kind);  // "cpu", "gpu"

// One compute device. Units are in the names: FLOP/s, bytes/s, bytes, seconds.
struct Device {
  std::string name;                    // "cpu:0", "gpu:3"
  DeviceKind kind = DeviceKind::kGpu;
  std::string model;                   // "Tesla K80 (one GK210 die)"; informational
  double peak_flops_per_s = 0;        // peak FP32 FLOP/s (the file key is peak_flops)
  double memory_bandwidth_Bps = 0;     // device memory bandwidth, bytes/s
  int64_t memory_bytes = 0;            // usable memory capacity
  int streams = 1;                     // compute slots: how many ops may be in flight at once
  // How many ops run at full speed together; more in flight share the device, each at
  // full_speed_ops / in-flight of its speed (docs/simulator.md, "Compute"). 1 where an op's time
  // is the whole device's (a GPU kernel, a TensorFlow op spread over a socket's intra-op pool);
  // `streams` where each op runs on a core of its own (placelab's CPU executor).
  int full_speed_ops = 1;
  // The ops this device runs at once at full speed: the processors a schedule or a bound may
  // count it as.
  int parallel_capacity() const { return streams < full_speed_ops ? streams : full_speed_ops; }
  double launch_overhead_s = 0;        // fixed cost added to every op run here
  // CPUs: seconds an eager framework's host thread on this CPU spends issuing one op (PyTorch:
  // Python, the dispatcher, autograd's bookkeeping and the launch call); the simulator's eager
  // mode charges it per op (docs/simulator.md, "Eager execution"). Only the machine's first CPU's
  // figure is used. The default is kDefaultDispatchS.
  double dispatch_s = kDefaultDispatchS;
  // true: copies into this device run on DMA engines, beside its ops (a GPU). false: the device's
  // own cores copy — a received tensor is a memcpy that takes one of its compute slots, as in
  // placelab's CPU executor (`placelab calibrate --backend cpu` writes false).
  bool copy_engine = true;
  // How close this device type comes to its peaks, per kernel class and size (efficiency.h); the
  // analytic cost model uses it. nullopt: AnalyticCostModel::Options' flat per-kind efficiencies.
  std::optional<EfficiencyProfile> efficiency;
};

// Two devices of one type: the same kind, peaks, launch overhead and efficiency profile (what the
// analytic model prices; `model` is free text that presets use for a device's place in the node
// too, "… PCIe switch 0, socket 0", so it is not compared). A measurement of one stands for the other (docs/calibration.md,
// "Identical devices"): CalibratedCostModel prices such devices alike, and `calibrate --backend
// trace` writes one GPU's measured launch gap to every GPU identical to it.
bool identical_devices(const Device& a, const Device& b);

enum class LinkKind : uint8_t { kPcie, kNvlink, kQpi, kNetwork, kMemory };
std::string_view link_kind_name(LinkKind kind);                      // "pcie", "nvlink", …
std::optional<LinkKind> link_kind_from_name(std::string_view name);  // nullopt if unknown

// A bidirectional link between two nodes (device or switch names). Each direction is its own
// FIFO resource in the simulator; `bandwidth_Bps`/`latency_s` are per direction (a→b), and the
// reverse direction uses the `reverse_*` values when set.
struct Link {
  std::string a, b;
  LinkKind kind = LinkKind::kPcie;
  double bandwidth_Bps = 0;       // bytes/s in the a→b direction
  double latency_s = 0;           // seconds, a→b
  std::optional<double> reverse_bandwidth_Bps;
  std::optional<double> reverse_latency_s;
};

// The measured figures of whole routes, for paths whose measurement no link's own figure gives:
// a GPU-to-GPU copy staged through host memory across sockets is not limited by the socket link's
// rate for GPU-to-host copies, and P2P between two GPUs is slower than either GPU's host link. A
// copy from any device of `from` to any device of `to` (a device and itself excepted) takes
// latency_s + bytes / bandwidth_Bps with these values in place of the route's sum of hop latencies
// and bottleneck bandwidth; a figure left out keeps the hops' one. Only the figures change: the
// route (the link directions a copy holds, where copies contend) is still the search's over the
// links' figures. One direction per entry; an ordered pair may be named by one entry only.
struct RouteFigure {
  std::vector<std::string> from, to;    // device names
  std::optional<double> bandwidth_Bps;  // bytes/s; nullopt: the route's bottleneck
  std::optional<double> latency_s;      // seconds; nullopt: the sum of the route's hop latencies
};

// The resource one transfer direction occupies: link index × 2 + (0 for a→b, 1 for b→a).
using LinkDirection = uint32_t;

// The path a transfer takes from one device to another. `hops` views the Machine's route
// table: valid while the Machine lives and is not finalised again.
struct Route {
  std::span<const LinkDirection> hops;  // in order from source to destination
  double latency_s = 0;                 // sum of hop latencies, or the pair's RouteFigure
  double bandwidth_Bps = 0;             // bottleneck (minimum) bandwidth along the hops, or the pair's RouteFigure
};

// Every device-to-device route of a finalised machine, flat: a machine of 640 devices (64 DGX-1)
// has 409,600 routes, and a heap block for each made `placelab simulate` on it 0.13 s slower,
// allocating and freeing them. Only the hops are kept: a route's latency and bandwidth are sums
// and minima over them (Machine::route), which at 4,096 devices saves 270 of 670 MB.
// Machine::finalize fills it (search_routes, route_search.cpp), in huge pages where it is large.
struct RouteTable {
  // per (source, destination), row-major: where its hops end in `hops`
  std::vector<uint32_t, LargeTableAllocator<uint32_t>> hop_end;
  // every route's hops, one after another (a pair's begin at the last one's end)
  std::vector<LinkDirection, LargeTableAllocator<LinkDirection>> hops;
  // The hops of pair src × devices + dst (none when src == dst); for Machine::route and the
  // simulator's hot loop.
  std::span<const LinkDirection> hops_of(std::size_t pair) const {
    const uint32_t begin = pair == 0 ? 0 : hop_end[pair - 1];
    return std::span<const LinkDirection>(hops).subspan(begin, hop_end[pair] - begin);
  }
};

struct Machine {
  std::string name;
  std::string description;
  std::vector<Device> devices;
  std::vector<std::string> switches;  // intermediate nodes that compute nothing
  std::vector<Link> links;
  std::vector<RouteFigure> route_figures;  // measured figures of whole routes (YAML `route_figures`)

  // Validates names, values and connectivity and computes all device-to-device routes. A route
  // minimises the time of a 1 MiB reference transfer, Σ latency + bytes / bottleneck bandwidth
  // (the simulator's transfer model); ties go to fewer hops. Only switches and the source device
  // forward traffic: a path never passes through another device. On a machine of several nodes
  // (names `<node>/<local>`, cluster.h), a route between two devices of one node passes only
  // through that node's switches and never through a NIC (a switch with a `network` link).
  // Then applies route_figures to the pairs they name.
  // Throws MachineError naming the entry at fault (a value out of range, an unknown link
  // endpoint, a device no route reaches, a route figure naming no device or a pair twice).
  // Must be called after any change and before route().
  void finalize();

  std::size_t num_devices() const { return devices.size(); }
  std::optional<DeviceId> find_device(std::string_view name) const;
  // The route from src to dst (src ≠ dst): its hops, and its figures (the hops' sum and minimum,
  // or the pair's RouteFigure). Requires finalize() after the last change.
  Route route(DeviceId src, DeviceId dst) const;
  // Whether a RouteFigure gives the route from src to dst its figures; for reports.
  bool has_route_figure(DeviceId src, DeviceId dst) const;
  // Every route at once, for the simulator's pair table (which reads it rather than copying it).
  const RouteTable& route_table() const { return routes_; }
  // Number of directed link resources (2 × links.size()).
  std::size_t num_link_directions() const { return 2 * links.size(); }
  // "pcie gpu:0->switch:0" for a link direction; for traces and reports.
  std::string link_direction_name(LinkDirection dir) const;
  double link_bandwidth_Bps(LinkDirection dir) const;
  double link_latency_s(LinkDirection dir) const;
  // The first CPU device; ops marked cpu_only run there under soft placement. nullopt if none.
  std::optional<DeviceId> default_cpu() const;

 private:
  // A RouteFigure as it applies to one ordered pair (src × devices + dst); NaN: the hops' figure.
  struct PairFigure {
    std::size_t pair;
    double latency_s, bandwidth_Bps;
  };
  // Validates route_figures and fills pair_figures_; part of finalize().
  void apply_route_figures();
  const PairFigure* pair_figure(std::size_t pair) const;

  RouteTable routes_;
  std::vector<double> direction_latency_s_, direction_bandwidth_Bps_;  // per link direction, for route()
  std::vector<PairFigure> pair_figures_;  // sorted by pair; a few per node, so searched, not a table
};

}  // namespace placelab
