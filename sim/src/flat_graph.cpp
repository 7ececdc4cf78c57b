// The simulator's preparation: a graph and a cost model flattened once into the arrays the event
// loop reads (flat_graph.h), with every check of their values done here, not per evaluation.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <exception>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "placelab/core/error.h"
#include "placelab/core/workers.h"
#include "placelab/graph/transfers.h"
#include "flat_graph.h"

namespace placelab::sim_detail {
namespace {

// Whether an eager graph's op only holds state: it reads nothing, computes nothing (no flops, no
// kernel) and keeps persistent bytes — a variable, which in PyTorch is a parameter or buffer: a
// tensor that exists before the step, not a call the program issues (docs/simulator.md).
bool holds_state_only(const OpGraph& graph, OpId op) {
  const Op& o = graph.op(op);
  return graph.in_degree(op) == 0 && o.persistent_bytes > 0 && o.flops == 0 && o.kernel.cls == KernelClass::kNoop;
}

// Below this many devices the pair table is filled on the calling thread (every preset).
constexpr std::size_t kMinDevicesForPairThreads = 256;

// The transfer line of one pair (s != t). Affine check: the line through 0 and 2^34 bytes must
// reproduce the model at every probe size to 1e-12 relative (far below any modelling error);
// else the simulator asks per transfer. A model that promises affinity
// (CostModel::transfer_is_affine) skips the probes, not the line, so the figures are the same.
// The line must also stay finite up to the largest wire size of this graph, so the hot loop
// needs no check of its durations.
void fill_pair(PairInfo& pair, const Machine& machine, const CostModel& cost, DeviceId s, DeviceId t,
               int64_t max_send_bytes) {
  constexpr double kFar = 17179869184.0;  // 2^34 bytes: dividing by it is exact
  const double latency = cost.transfer_time_s(0, s, t);
  const double per_byte = (cost.transfer_time_s(static_cast<int64_t>(kFar), s, t) - latency) / kFar;
  bool affine = latency >= 0 && per_byte >= 0 && std::isfinite(latency) && std::isfinite(per_byte) &&
                std::isfinite(latency + static_cast<double>(max_send_bytes) * per_byte);
  if (affine && !cost.transfer_is_affine(s, t)) {
    for (int64_t probe : {int64_t{1}, int64_t{1000}, int64_t{4096}, int64_t{1} << 20, int64_t{123456789},
                          int64_t{1} << 30}) {
      const double exact = cost.transfer_time_s(probe, s, t);
      const double line = latency + static_cast<double>(probe) * per_byte;
      affine = affine && std::abs(exact - line) <= 1e-12 * std::abs(exact);
    }
  }
  pair.affine = affine;
  pair.latency_s = latency;
  pair.s_per_byte = per_byte;
  pair.by_device = !machine.devices[t].copy_engine;
}

// The pair table: every ordered pair's transfer line (on every core from
// kMinDevicesForPairThreads devices: 16.8 million pairs at 4,096), then, in pair order, the queue
// of each route's first hop, so queue numbers do not depend on the thread count. The routes
// themselves stay in the machine's table.
void fill_pairs(FlatGraph& g, const Machine& machine, const CostModel& cost, int64_t max_send_bytes) {
  const DeviceId nd = static_cast<DeviceId>(machine.num_devices());
  const RouteTable& table = machine.route_table();
  PLACELAB_CHECK(table.hop_end.size() == std::size_t{nd} * nd) << "the machine is not finalised";
  g.routes = &table;
  g.pairs.assign(std::size_t{nd} * nd, {});
  std::size_t threads = 1;
  if (nd >= kMinDevicesForPairThreads) threads = std::max<std::size_t>(1, std::thread::hardware_concurrency());
  std::atomic<std::size_t> next_row{0};  // wider than DeviceId: every worker counts once past nd
  // The first failure in row order wins, as a serial fill would raise it.
  std::vector<std::pair<DeviceId, std::exception_ptr>> failures(threads, {nd, nullptr});
  auto work = [&](std::size_t w) {
    for (std::size_t row = next_row++; row < nd; row = next_row++) {
      const auto s = static_cast<DeviceId>(row);
      try {
        for (DeviceId t = 0; t < nd; ++t)
          if (s != t) fill_pair(g.pairs[std::size_t{s} * nd + t], machine, cost, s, t, max_send_bytes);
      } catch (...) {
        failures[w] = {s, std::current_exception()};
        return;
      }
    }
  };
  run_on_workers(threads, work);
  const auto first = std::min_element(failures.begin(), failures.end(),
                                      [](const auto& a, const auto& b) { return a.first < b.first; });
  if (first->second) std::rethrow_exception(first->second);
  std::vector<uint32_t> queue_of_link(g.num_links, std::numeric_limits<uint32_t>::max());
  for (std::size_t i = 0; i < g.pairs.size(); ++i) {
    if (i / nd == i % nd) continue;
    const std::span<const LinkDirection> hops = g.route(i);
    PLACELAB_CHECK(!hops.empty()) << "no hops from " << machine.devices[i / nd].name << " to "
                                  << machine.devices[i % nd].name;
    uint32_t& queue = queue_of_link[hops.front()];
    if (queue == std::numeric_limits<uint32_t>::max()) queue = g.num_queues++;
    g.pairs[i].queue = queue;
  }
}

// CSR adjacency. The in-edge array is filled while walking out-edges, so each out-edge knows
// the position of its twin in-edge.
void fill_adjacency(FlatGraph& g, const OpGraph& graph) {
  const uint32_t n = g.num_ops;
  g.ops.assign(n, {});
  uint32_t out_total = 0, in_total = 0;
  for (OpId op = 0; op < n; ++op) {
    OpInfo& info = g.ops[op];
    info.out_begin = out_total;
    info.out_end = out_total += static_cast<uint32_t>(graph.out_degree(op));
    info.in_begin = in_total;
    info.in_end = in_total += static_cast<uint32_t>(graph.in_degree(op));
    if (info.in_begin == info.in_end) g.sources.push_back(op);
    g.max_out_degree = std::max(g.max_out_degree, info.out_end - info.out_begin);
  }
  g.out.resize(out_total);
  g.in.resize(in_total);
  std::vector<uint32_t> in_fill(n);
  for (OpId op = 0; op < n; ++op) in_fill[op] = g.ops[op].in_begin;
  for (OpId op = 0; op < n; ++op) {
    uint32_t k = g.ops[op].out_begin;
    graph.for_each_out_edge(op, [&](OpId dst, const Tensor& t) {
      PLACELAB_CHECK(t.bytes >= 0) << "edge " << graph.op(op).name << " -> " << graph.op(dst).name
                                   << " has bytes = " << t.bytes;
      const bool data = !t.control;
      const uint32_t pos = in_fill[dst]++;
      g.in[pos] = {op, data};
      g.out[k++] = {dst, pos, data};
      if (data) ++g.num_data_edges;
    });
  }
}

// Devices whose op times are the same form one cost class, timed once per op.
void fill_cost_classes(FlatGraph& g, const OpGraph& graph, const CostModel& cost) {
  const Machine& machine = cost.machine();
  const uint32_t nd = g.num_devices;
  // A measured time keyed by a device name the machine lacks is a mistake in the graph file.
  check_measured_times(graph, machine);
  // Devices an op's measured time names are their own class (CostModel::op_time_representatives).
  const std::vector<DeviceId> representatives = cost.op_time_representatives(graph);
  g.cost_class.resize(nd);
  for (DeviceId d = 0; d < nd; ++d) {
    const DeviceId rep = representatives[d];
    PLACELAB_CHECK(rep <= d && machine.devices[rep].kind == machine.devices[d].kind &&
                   (rep == d || representatives[rep] == rep))
        << cost.describe() << ": op_time_representative(" << machine.devices[d].name << ") = " << rep;
    if (rep == d) {
      g.cost_class[d] = g.num_cost_classes++;
      g.class_representative.push_back(d);
    } else {
      g.cost_class[d] = g.cost_class[rep];
    }
  }
}

// Per op: its sizes, its largest send, and its time on each cost class; returns the largest send.
int64_t fill_op_data(FlatGraph& g, const OpGraph& graph, const CostModel& cost) {
  const Machine& machine = cost.machine();
  const uint32_t n = g.num_ops;
  const uint32_t nc = g.num_cost_classes;
  g.op_time_s.resize(std::size_t{n} * nc);
  g.persistent_bytes.resize(n);
  g.cpu_only.resize(n);
  int64_t max_send_bytes = 0;
  for (OpId op = 0; op < n; ++op) {
    const Op& o = graph.op(op);
    PLACELAB_CHECK(o.output_bytes >= 0 && o.persistent_bytes >= 0)
        << "op " << o.name << ": output_bytes = " << o.output_bytes << ", persistent_bytes = " << o.persistent_bytes;
    g.ops[op].output_bytes = o.output_bytes;
    g.persistent_bytes[op] = o.persistent_bytes;
    g.cpu_only[op] = o.cpu_only ? 1 : 0;
    // One copy per (producer, destination device) of the producer's largest data edge: the rule
    // of graph/transfers.h, which the executors and HEFT follow too.
    g.ops[op].send_bytes = wire_bytes(graph, op);
    max_send_bytes = std::max(max_send_bytes, g.ops[op].send_bytes);
    for (uint32_t c = 0; c < nc; ++c) {
      const DeviceId d = g.class_representative[c];
      const double t = cost.op_time_s(o, d);
      PLACELAB_CHECK(t >= 0 && std::isfinite(t)) << cost.describe() << ": op_time_s(" << o.name << ", "
                                                 << machine.devices[d].name << ") = " << t;
      g.op_time_s[std::size_t{op} * nc + c] = t;
    }
  }

  return max_send_bytes;
}

// Per device: GPU or not, its compute slots, its memory; and the default CPU.
void fill_devices(FlatGraph& g, const Machine& machine) {
  const uint32_t nd = g.num_devices;
  g.device_is_gpu.resize(nd);
  g.slot_off.assign(nd + 1, 0);
  g.full_speed.resize(nd);
  g.shared.resize(nd);
  g.capacity_bytes.resize(nd);
  for (DeviceId d = 0; d < nd; ++d) {
    const Device& dev = machine.devices[d];
    PLACELAB_CHECK(dev.streams >= 1 && dev.streams <= std::numeric_limits<uint16_t>::max())
        << dev.name << ".streams = " << dev.streams;
    g.device_is_gpu[d] = dev.kind == DeviceKind::kGpu ? 1 : 0;
    g.slot_off[d + 1] = g.slot_off[d] + static_cast<uint32_t>(dev.streams);
    PLACELAB_CHECK(dev.full_speed_ops >= 1) << dev.name << ".full_speed_ops = " << dev.full_speed_ops;
    g.full_speed[d] = static_cast<uint32_t>(dev.parallel_capacity());
    g.shared[d] = dev.streams > dev.full_speed_ops ? 1 : 0;
    g.capacity_bytes[d] = dev.memory_bytes;
  }
  if (auto cpu = machine.default_cpu()) {
    g.has_cpu = true;
    g.default_cpu = *cpu;
  }
}

// The eager model's inputs (docs/simulator.md, "Eager execution"): what the host pays per op
// and who issues each op. Its pass walks ops in id order as program order, so every edge must
// run forward in it.
void fill_eager(FlatGraph& g, const OpGraph& graph, const CostModel& cost) {
  const Machine& machine = cost.machine();
  const uint32_t n = g.num_ops;
  g.eager = true;
  g.dispatch_s.resize(n);
  g.backward.resize(n);
  g.state.resize(n);
  g.data_consumers.assign(n, 0);
  for (OpId op = 0; op < n; ++op) {
    for (uint32_t k = g.ops[op].out_begin; k < g.ops[op].out_end; ++k) g.data_consumers[op] += g.out[k].data;
    const Op& o = graph.op(op);
    g.state[op] = holds_state_only(graph, op) ? 1 : 0;
    const double t = g.state[op] ? 0.0 : cost.dispatch_time_s(o);
    PLACELAB_CHECK(t >= 0 && std::isfinite(t)) << cost.describe() << ": dispatch_time_s(" << o.name << ") = " << t;
    g.dispatch_s[op] = t;
    g.backward[op] = o.phase == Phase::kBackward ? 1 : 0;
    for (uint32_t k = g.ops[op].in_begin; k < g.ops[op].in_end; ++k)
      if (g.in[k].src > op)
        throw InputError("eager graph: op " + ("'" + o.name + "'") + " (" + std::to_string(op) + ") consumes op " +
                         ("'" + graph.op(g.in[k].src).name + "'") + " (" + std::to_string(g.in[k].src) +
                         "), which comes later; an eager graph lists its ops in program order");
  }
  g.copy_dispatch_s = g.has_cpu ? machine.devices[g.default_cpu].dispatch_s : kDefaultDispatchS;
}

}  // namespace

void prepare(FlatGraph& g, const OpGraph& graph, const CostModel& cost) {
  (void)graph.topological_order();  // throws InputError naming the ops of a cycle
  const Machine& machine = cost.machine();
  PLACELAB_CHECK(machine.num_devices() > 0) << "machine '" << machine.name << "' has no devices";
  PLACELAB_CHECK(graph.num_ops() < std::numeric_limits<uint32_t>::max()) << graph.num_ops() << " ops";
  // Transfer ids (at most one per edge) are event ids in 32 bits.
  PLACELAB_CHECK(graph.num_edges() < std::numeric_limits<uint32_t>::max()) << graph.num_edges() << " edges";
  g.cost = &cost;
  g.machine = &machine;
  g.num_ops = static_cast<uint32_t>(graph.num_ops());
  g.num_devices = static_cast<uint32_t>(machine.num_devices());
  g.num_links = static_cast<uint32_t>(machine.num_link_directions());
  const uint32_t nd = g.num_devices;

  fill_adjacency(g, graph);
  fill_cost_classes(g, graph, cost);
  const int64_t max_send_bytes = fill_op_data(g, graph, cost);
  fill_devices(g, machine);
  fill_pairs(g, machine, cost, max_send_bytes);
  if (graph.execution() == Execution::kEager) fill_eager(g, graph, cost);
  g.num_leaves = std::bit_ceil(g.slot_off[nd] + g.num_queues);
  g.tree_depth = static_cast<uint32_t>(std::countr_zero(g.num_leaves));
}

}  // namespace placelab::sim_detail
