// The simulator's prepared graph (private to sim/): the flat arrays a Simulator builds once per
// (graph, cost model) and both execution models read — the dataflow event loop (simulator.cpp)
// and the eager pass (eager.cpp) — so that op times, routes, transfer times and capacities are
// computed by one piece of code whatever the framework.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "placelab/core/error.h"
#include "placelab/core/large_table.h"
#include "placelab/graph/op_graph.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/sim/simulator.h"

namespace placelab {
namespace sim_detail {

// An out-edge in CSR form. `in_pos` is the index of the same edge in the in-edge array, so a
// producer can leave per-edge information (which received copy feeds it) for its consumer.
struct OutEdge {
  uint32_t dst = 0;
  uint32_t in_pos = 0;
  bool data = true;  // false: a control edge, which carries no tensor
};

struct InEdge {
  uint32_t src = 0;
  bool data = true;
};

// What the event loop reads about an op when it starts or finishes, in one 32-byte record: its
// adjacency ranges and sizes then share one cache line instead of four arrays.
struct OpInfo {
  uint32_t out_begin = 0, out_end = 0;  // range in FlatGraph::out
  uint32_t in_begin = 0, in_end = 0;    // range in FlatGraph::in
  int64_t output_bytes = 0;
  int64_t send_bytes = 0;  // wire size of the op's output: max bytes of its data edges
};

// Per ordered device pair (src * num_devices + dst): the transfer time line latency + bytes ×
// seconds_per_byte when the cost model is affine for that pair (promised by
// CostModel::transfer_is_affine or checked at probe sizes), which saves a virtual call per
// transfer; otherwise the cost model is asked for every transfer. Its route is
// FlatGraph::route(pair index), read from the machine's own table: at 4,096 devices a copy
// cost 270 MB.
struct PairInfo {
  double latency_s = 0;
  double s_per_byte = 0;
  uint32_t queue = 0;  // the transfer queue of its first hop (see FlatGraph::num_queues)
  bool affine = false;
  // The destination has no copy engine (Device::copy_engine = false): the copy waits in its
  // ready queue and runs on one of its compute slots; no link is reserved.
  bool by_device = false;
};

// Everything an evaluation reads, flattened once so the hot loop touches only contiguous arrays.
struct FlatGraph {
  const CostModel* cost = nullptr;
  const Machine* machine = nullptr;
  uint32_t num_ops = 0;
  uint32_t num_devices = 0;
  uint32_t num_links = 0;         // link directions
  uint32_t num_data_edges = 0;    // bounds the number of transfers of one evaluation
  // Transfer queues: one per link direction that is the first hop of some route, numbered
  // densely. Only those ever hold a queue, so only they need a leaf in the event tree.
  uint32_t num_queues = 0;
  // Leaves of the event tree: compute slots + queues rounded up to a power of two, so every
  // leaf is tree_depth levels below the root and the replay loop has one trip count, which the
  // branch predictor learns (a ragged tree mispredicts its exit on about every other replay).
  uint32_t num_leaves = 1;
  uint32_t tree_depth = 0;
  uint32_t max_out_degree = 0;
  std::vector<OpInfo> ops;
  std::vector<OutEdge> out;
  std::vector<InEdge> in;
  std::vector<uint32_t> sources;  // ops without in-edges, by id: ready at t = 0
  // Op times per cost class (devices the cost model prices alike, CostModel::
  // op_time_representative): op * num_cost_classes + cost_class[device]. A cluster of 512
  // identical GPUs has one class for them, not 512 columns.
  uint32_t num_cost_classes = 0;
  std::vector<uint32_t> cost_class;            // per device
  std::vector<DeviceId> class_representative;  // per class: the device its op times were asked for
  std::vector<double> op_time_s;
  std::vector<int64_t> persistent_bytes;
  std::vector<uint8_t> cpu_only;
  std::vector<uint8_t> device_is_gpu;
  bool has_cpu = false;
  DeviceId default_cpu = 0;
  std::vector<PairInfo, LargeTableAllocator<PairInfo>> pairs;  // num_devices² (403 MB at 4,096 devices)
  // The machine's route table (Machine::route_table), which outlives the simulator.
  const RouteTable* routes = nullptr;
  // The hops of pair src × num_devices + dst, in order from the source.
  std::span<const LinkDirection> route(std::size_t pair) const { return routes->hops_of(pair); }
  std::vector<uint32_t> slot_off;   // device → first compute slot; num_devices + 1 entries
  // Per device: Device::parallel_capacity(), and whether ops in flight can outnumber it (streams >
  // full_speed_ops), in which case they share the device (docs/simulator.md, "Compute").
  std::vector<uint32_t> full_speed;
  std::vector<uint8_t> shared;
  std::vector<int64_t> capacity_bytes;

  // Eager graphs only (Execution::kEager; docs/simulator.md, "Eager execution").
  bool eager = false;
  std::vector<double> dispatch_s;       // per op: host seconds to issue it (CostModel::dispatch_time_s)
  std::vector<uint8_t> backward;        // per op: Phase::kBackward, issued by autograd's thread of its GPU
  std::vector<uint8_t> state;           // per op: only holds state (a parameter): never issued, ready at 0
  std::vector<int32_t> data_consumers;  // per op: its data out-edges (the readers its output waits for)
  double copy_dispatch_s = 0;           // host seconds to issue a copy (`.to(device)`): the first CPU's dispatch_s

  // Seconds `op` takes on `device` (its cost class's column of op_time_s).
  double op_time(uint32_t op, DeviceId device) const {
    return op_time_s[std::size_t{op} * num_cost_classes + cost_class[device]];
  }

  DeviceId effective_device(uint32_t op, DeviceId device) const {
    return (cpu_only[op] && device_is_gpu[device] && has_cpu) ? default_cpu : device;
  }
};

// Seconds `bytes` take from src to dst: the pair's line when affine, else the cost model's answer.
inline double transfer_duration(const FlatGraph& g, const PairInfo& pair, int64_t bytes, DeviceId src, DeviceId dst) {
  if (pair.affine) {
    // Finite and non-negative by construction (checked when the Simulator was built).
    return pair.latency_s + static_cast<double>(bytes) * pair.s_per_byte;
  }
  const double duration = g.cost->transfer_time_s(bytes, src, dst);
  // The event order and the per-link FIFO reasoning need finite, non-negative durations.
  PLACELAB_CHECK(duration >= 0 && duration < std::numeric_limits<double>::infinity())
      << g.cost->describe() << ": transfer_time_s(" << bytes << ", " << src << ", " << dst << ") = " << duration;
  return duration;
}

// Clears every field of `r` for a new step of `g` (devices zeroed, links sized), the same for both
// execution models; with `record`, the timeline starts with each device's persistent bytes, which
// the caller has summed into r.devices[d].persistent_bytes by then (record_persistent_samples).
inline void reset_result(const FlatGraph& g, SimResult& r) {
  r.devices.assign(g.num_devices, DeviceStats{});
  r.links.resize(g.num_links);
  r.step_time_s = 0;
  r.transfers = 0;
  r.oom = false;
  r.oom_device = 0;
  r.oom_excess_bytes = 0;
  r.host_busy_s = 0;
  r.timeline.clear();
  r.memory_timeline.clear();
  r.host_timeline.clear();
}

// The first memory sample of every device: its persistent bytes at t = 0 (docs/simulator.md).
inline void record_persistent_samples(const FlatGraph& g, SimResult& r) {
  for (uint32_t d = 0; d < g.num_devices; ++d)
    r.memory_timeline.push_back({0.0, static_cast<DeviceId>(d), r.devices[d].persistent_bytes,
                                 r.devices[d].persistent_bytes, MemorySample::kPersistent});
}

// Per-device peaks (persistent + the largest transient total) and the OOM verdict, the same rule
// for both execution models: the device with the largest excess, the smallest id among equals.
// `peak_transient(d)` is the largest transient total device d reached.
template <typename PeakTransient>
void settle_memory(const FlatGraph& g, SimResult& r, PeakTransient peak_transient) {
  int64_t worst = 0;
  for (uint32_t d = 0; d < g.num_devices; ++d) {
    DeviceStats& s = r.devices[d];
    s.peak_memory_bytes = s.persistent_bytes + peak_transient(d);
    const int64_t excess = s.peak_memory_bytes - g.capacity_bytes[d];
    if (excess > worst) {
      worst = excess;
      r.oom = true;
      r.oom_device = static_cast<DeviceId>(d);
      r.oom_excess_bytes = excess;
    }
  }
}

// Kernels a GPU's launch queue holds before the host blocks in the next launch. CUDA does not
// document the depth; 1,024 is the figure measured and quoted for current drivers (e.g. NVIDIA's
// developer forums, "launch queue ... 1024 entries"), an estimate.
inline constexpr uint32_t kLaunchQueueDepth = 1024;

inline constexpr uint32_t kNone = UINT32_MAX;

// A copy of one producer's output to one device, issued at its first consumer there.
struct EagerTransfer {
  DeviceId dst;
  int32_t refs;     // data edges into ops on dst still to be issued
  uint32_t next;    // the producer's next transfer, kNone at the end
  double end_s;     // when the copy is on dst
};

// One change of a device's memory in use, at a host issue time. Each host thread's changes are
// in time order; `next` chains them per thread for the final merge.
struct MemoryChange {
  double time_s;
  int64_t change;
  uint32_t buffer;
  DeviceId device;
  uint32_t next;
};

struct EagerScratch {
  std::vector<DeviceId> device;     // per op: effective device
  std::vector<double> issued_s;     // per op: host time its issue finished (the launch)
  std::vector<double> end_s;        // per op: when its result is complete on its device
  std::vector<int32_t> refs;        // per op: data consumers not yet issued
  std::vector<uint32_t> first_transfer;  // per op: its transfers (a list through EagerTransfer::next)
  std::vector<uint32_t> in_transfer;     // per in-edge (FlatGraph::in): the transfer feeding it, remote data edges only
  std::vector<EagerTransfer> transfers;
  std::vector<double> stream_free;  // per device: when its stream has run what was launched on it
  std::vector<double> thread_free;  // per host thread (0 main, 1 + d: autograd's thread for GPU d)
  std::vector<double> link_free;
  std::vector<double> link_busy;
  std::vector<int64_t> link_bytes;
  std::vector<double> launch_ring;  // per GPU × kLaunchQueueDepth: end times of its last kernels
  std::vector<uint32_t> launched;   // per device: kernels launched so far
  std::vector<MemoryChange> changes;
  std::vector<uint32_t> thread_head, thread_tail;  // per thread: its memory changes
  std::vector<uint32_t> active_threads;             // threads with changes left to merge
  std::vector<int64_t> transient, peak;            // per device

  void reserve_for(const FlatGraph& g) {
    const std::size_t n = g.num_ops, nd = g.num_devices;
    auto grow = [](auto& v, std::size_t size) {
      if (v.size() < size) v.resize(size);
    };
    grow(device, n);
    grow(issued_s, n);
    grow(end_s, n);
    grow(refs, n);
    grow(first_transfer, n);
    grow(in_transfer, g.in.size());
    grow(transfers, g.num_data_edges);
    grow(stream_free, nd);
    grow(thread_free, nd + 1);
    grow(link_free, g.num_links);
    grow(link_busy, g.num_links);
    grow(link_bytes, g.num_links);
    grow(launch_ring, nd * std::size_t{kLaunchQueueDepth});
    grow(launched, nd);
    grow(changes, 2 * (std::size_t{n} + g.num_data_edges));
    grow(thread_head, nd + 1);
    grow(thread_tail, nd + 1);
    grow(active_threads, nd + 1);
    grow(transient, nd);
    grow(peak, nd);
  }
};

// Fills `g` from a graph and a cost model (flat_graph.cpp): every value checked, every op's time
// asked once per cost class, every device pair's transfer line; throws InputError for a graph
// the simulator cannot run (a cycle, an eager graph out of program order).
void prepare(FlatGraph& g, const OpGraph& graph, const CostModel& cost);

// The eager execution model (docs/simulator.md, "Eager execution"): one pass over the ops in
// program order. Allocation-free after the first call with a given scratch.
void simulate_eager(const FlatGraph& g, std::span<const DeviceId> placement, EagerScratch& scratch, SimResult& r,
                    bool record);

}  // namespace sim_detail

// What a Simulator holds (simulator.h keeps it opaque); the eager schedule reads it too.
struct Simulator::Prepared : sim_detail::FlatGraph {};

}  // namespace placelab
