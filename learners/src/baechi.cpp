// Baechi's memory-constrained placers m-TOPO and m-ETF (Jeon et al., "Baechi: Fast Device Placement
// of Machine Learning Graphs", SoCC 2020, and the extended version, arXiv 2301.08695). The rules
// follow the paper's algorithm descriptions and the authors' code (github.com/beomyeol/baechi:
// placer/m_topo.py, placer/m_etf.py, placer/device.py, placer/placer_utils.py), as called by
// placer_lib.py's "m_topo" and "m_etf" methods: colocation groups kept whole, no memory
// reservation. Where we differ, the comment at the spot says so and why.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "placelab/graph/error.h"
#include "placelab/graph/transfers.h"
#include "placelab/learners/baselines.h"
#include "placelab/learners/grouping.h"
#include "registry_entries.h"

namespace placelab {

namespace {

// The devices ordinary ops are spread over: the GPUs, or every device when there is none.
std::vector<DeviceId> placement_targets(const Machine& machine, const char* who) {
  std::vector<DeviceId> targets = gpu_devices(machine);
  if (targets.empty())
    for (DeviceId d = 0; d < machine.num_devices(); ++d) targets.push_back(d);
  if (targets.empty()) throw InputError(std::string(who) + ": machine \"" + machine.name + "\" has no devices");
  return targets;
}

// Baechi's op memory (DeviceWrapper.get_op_memory): temporary + output bytes, where a variable's
// output is its value. Our ops keep the value apart (persistent_bytes) and have no temporary buffer.
int64_t baechi_op_bytes(const Op& op) { return op.output_bytes + op.persistent_bytes; }

}  // namespace

// ---- m-TOPO ------------------------------------------------------------------------------------

Placement m_topo_placement(const OpGraph& graph, const Machine& machine, const MTopoOptions& options) {
  const std::vector<DeviceId> targets = placement_targets(machine, "m_topo");
  const auto cpu = machine.default_cpu();
  const auto soft_placed = [&](OpId op) { return graph.op(op).cpu_only && cpu.has_value(); };
  const Grouping coloc = group_by_colocation(graph);

  // Baechi's TopoUniform share (_calculate_max_memory_per_device): Σ op memory / devices + the
  // largest op's memory, so that the devices end up evenly loaded and the last op of a share fits.
  std::vector<int64_t> group_bytes(coloc.num_groups(), 0);
  int64_t total_bytes = 0, largest_bytes = 0;
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    if (soft_placed(op)) continue;
    const int64_t bytes = baechi_op_bytes(graph.op(op));
    group_bytes[coloc.group_of(op)] += bytes;
    total_bytes += bytes;
    largest_bytes = std::max(largest_bytes, bytes);
  }
  const int64_t share = total_bytes / static_cast<int64_t>(targets.size()) + largest_bytes;
  // Like Baechi, the uniform share is not capped by the devices' own memory (the check is
  // commented out in m_topo.py): the static count adds every output ever produced, far above any
  // device's live peak on a training graph (GNMT-4 on p100x4: capping it at 11 GiB filled three
  // GPUs and left 13.75 GiB of live peak on the last), so it is a balance rule, not a fit test.
  const auto capacity = [&](std::size_t target) {
    return options.uniform ? share : machine.devices[targets[target]].memory_bytes;
  };

  Placement p(graph.num_ops(), targets.front());
  std::vector<int> group_device(coloc.num_groups(), -1);
  std::size_t current = 0;
  int64_t used = 0;
  for (OpId op : graph.topological_order()) {
    if (soft_placed(op)) {
      p[op] = *cpu;
      continue;
    }
    const GroupId g = coloc.group_of(op);
    if (group_device[g] < 0) {
      // A group that does not fit closes the device (Baechi: "no more operator can be placed on
      // this device"), even if a later, smaller one would fit: placement stays in topological order.
      while (current + 1 < targets.size() && used + group_bytes[g] > capacity(current)) {
        ++current;
        used = 0;
      }
      group_device[g] = static_cast<int>(targets[current]);
      used += group_bytes[g];
    }
    p[op] = static_cast<DeviceId>(group_device[g]);
  }
  return p;
}

// ---- m-ETF -------------------------------------------------------------------------------------

namespace {

// The ETF schedule being built: flat per-op and per-(op, device) arrays sized once, so that the
// selection loop allocates nothing. Transfers follow graph/transfers.h (one copy of a producer's
// largest data edge per destination device) and hold every link direction of their route in FIFO
// order, as in the simulator and heft_placement. Baechi models one channel per device instead
// (DeviceWrapper.send_tensor / recv_tensor); the machine's links are the finer model we have.
class EtfSchedule {
 public:
  EtfSchedule(const OpGraph& graph, const CostModel& cost, const MEtfOptions& options)
      : graph_(graph),
        cost_(cost),
        machine_(cost.machine()),
        options_(options),
        n_(graph.num_ops()),
        num_devices_(machine_.num_devices()),
        targets_(placement_targets(machine_, "m_etf")),
        cpu_(machine_.default_cpu()),
        coloc_(group_by_colocation(graph)),
        wire_(wire_bytes(graph)) {}

  Placement run();

 private:
  struct Choice {
    double start_s = std::numeric_limits<double>::infinity();
    std::size_t topo_pos = 0;
    OpId op = 0;
    DeviceId device = 0;
    bool found() const { return start_s < std::numeric_limits<double>::infinity(); }
  };

  void prepare();
  // TF soft placement: a cpu_only op runs on the first CPU, whatever its group's device (as
  // apply_soft_placement does for the other baselines), and does not choose that device.
  bool soft_placed(OpId op) const { return cpu_ && graph_.op(op).cpu_only; }
  // The devices op may run on: the first CPU for a soft-placed op, its group's device once the
  // group has one, else the targets. `storage` backs a one-device answer.
  std::span<const DeviceId> devices_of(OpId op, DeviceId& storage) const;
  // When all of op's inputs would be on d (dry run against the committed link times), and the
  // bytes the copies it would receive there take. Cached per (op, d) until a transfer is committed.
  void probe(OpId op, DeviceId d, double& ready_s, int64_t& copy_bytes);
  bool fits(OpId op, DeviceId d, int64_t copy_bytes) const;
  Choice select(bool respect_memory);
  void commit(OpId op, DeviceId d);
  void release_output(OpId producer);

  const OpGraph& graph_;
  const CostModel& cost_;
  const Machine& machine_;
  const MEtfOptions& options_;
  const std::size_t n_;
  const std::size_t num_devices_;
  const std::vector<DeviceId> targets_;
  const std::optional<DeviceId> cpu_;
  const Grouping coloc_;
  const std::vector<int64_t> wire_;

  std::vector<std::size_t> topo_pos_;
  std::vector<double> op_time_;          // [op * devices + d], s
  std::vector<double> stream_free_;      // [stream]: when it is next free, s
  std::vector<std::size_t> stream_begin_;  // device d's streams: [stream_begin_[d], stream_begin_[d+1])
  std::vector<double> link_free_;        // [link direction]: when it is next free, s
  std::vector<double> arrival_;          // [producer * devices + d]: its output's arrival on d; < 0: not sent
  std::vector<double> probe_ready_;      // [op * devices + d]: probe() cache
  std::vector<int64_t> probe_copy_bytes_;
  std::vector<uint64_t> probe_version_;  // link_version_ the cache entry was computed at, + 1
  uint64_t link_version_ = 0;            // bumped whenever a transfer is committed
  std::vector<int64_t> group_persistent_;
  std::vector<int> group_device_;
  std::vector<int64_t> used_bytes_;      // [d]: bytes live on d in the schedule
  std::vector<std::size_t> inputs_left_;     // [op]: predecessors not yet scheduled
  std::vector<std::size_t> consumers_left_;  // [op]: successors not yet scheduled
  std::vector<double> finish_;
  std::vector<OpId> ready_;
  Placement p_;
};

void EtfSchedule::prepare() {
  const std::vector<OpId> topo = graph_.topological_order();
  topo_pos_.assign(n_, 0);
  for (std::size_t i = 0; i < n_; ++i) topo_pos_[topo[i]] = i;
  op_time_.assign(n_ * num_devices_, 0.0);
  for (OpId op = 0; op < n_; ++op) {
    for (DeviceId d : targets_) op_time_[op * num_devices_ + d] = cost_.op_time_s(graph_.op(op), d);
    if (cpu_) op_time_[op * num_devices_ + *cpu_] = cost_.op_time_s(graph_.op(op), *cpu_);
  }
  stream_begin_.assign(num_devices_ + 1, 0);
  for (DeviceId d = 0; d < num_devices_; ++d)
    stream_begin_[d + 1] = stream_begin_[d] + static_cast<std::size_t>(std::max(1, machine_.devices[d].streams));
  stream_free_.assign(stream_begin_.back(), 0.0);
  link_free_.assign(machine_.num_link_directions(), 0.0);
  arrival_.assign(n_ * num_devices_, -1.0);
  probe_ready_.assign(n_ * num_devices_, 0.0);
  probe_copy_bytes_.assign(n_ * num_devices_, 0);
  probe_version_.assign(n_ * num_devices_, 0);
  group_persistent_.assign(coloc_.num_groups(), 0);
  for (OpId op = 0; op < n_; ++op) group_persistent_[coloc_.group_of(op)] += graph_.op(op).persistent_bytes;
  group_device_.assign(coloc_.num_groups(), -1);
  used_bytes_.assign(num_devices_, 0);
  inputs_left_.assign(n_, 0);
  consumers_left_.assign(n_, 0);
  finish_.assign(n_, 0.0);
  ready_.clear();
  ready_.reserve(n_);
  for (OpId op = 0; op < n_; ++op) {
    inputs_left_[op] = graph_.in_degree(op);
    consumers_left_[op] = graph_.out_degree(op);
    if (inputs_left_[op] == 0) ready_.push_back(op);
  }
  p_.assign(n_, targets_.front());
}

std::span<const DeviceId> EtfSchedule::devices_of(OpId op, DeviceId& storage) const {
  if (soft_placed(op)) {
    storage = *cpu_;
    return {&storage, 1};
  }
  const int g = group_device_[coloc_.group_of(op)];
  if (g < 0) return targets_;
  storage = static_cast<DeviceId>(g);
  return {&storage, 1};
}

void EtfSchedule::probe(OpId op, DeviceId d, double& ready_s, int64_t& copy_bytes) {
  const std::size_t key = op * num_devices_ + d;
  if (probe_version_[key] == link_version_ + 1) {
    ready_s = probe_ready_[key];
    copy_bytes = probe_copy_bytes_[key];
    return;
  }
  ready_s = 0;
  copy_bytes = 0;
  graph_.for_each_in_edge(op, [&](OpId src, const Tensor& t) {
    double at = finish_[src];  // a control edge or a local tensor: when the producer finishes
    if (!t.control && p_[src] != d) {
      const double arrived = arrival_[src * num_devices_ + d];
      if (arrived >= 0) {
        at = arrived;
      } else {
        double start = finish_[src];
        for (LinkDirection h : machine_.route(p_[src], d).hops) start = std::max(start, link_free_[h]);
        at = start + cost_.transfer_time_s(wire_[src], p_[src], d);
        copy_bytes += wire_[src];
      }
    }
    ready_s = std::max(ready_s, at);
  });
  probe_ready_[key] = ready_s;
  probe_copy_bytes_[key] = copy_bytes;
  probe_version_[key] = link_version_ + 1;
}

// Baechi's test (ReadyOpManager.get_ready_ts → DeviceWrapper.is_placeable, and
// ETF._is_placeable_group for an op whose group has no device yet): the op's memory, and its
// group's persistent bytes, must fit in what is free on the device now. We also count the input
// copies the op would receive there, which Baechi leaves out and the simulator allocates.
bool EtfSchedule::fits(OpId op, DeviceId d, int64_t copy_bytes) const {
  const GroupId g = coloc_.group_of(op);
  const int64_t group_bytes = group_device_[g] < 0 && !soft_placed(op) ? group_persistent_[g] : 0;
  return used_bytes_[d] + graph_.op(op).output_bytes + copy_bytes + group_bytes <= machine_.devices[d].memory_bytes;
}

EtfSchedule::Choice EtfSchedule::select(bool respect_memory) {
  Choice best;
  for (OpId op : ready_) {
    DeviceId storage = 0;
    for (DeviceId d : devices_of(op, storage)) {
      double ready_s = 0;
      int64_t copy_bytes = 0;
      probe(op, d, ready_s, copy_bytes);
      if (respect_memory && !fits(op, d, copy_bytes)) continue;
      double free_s = std::numeric_limits<double>::infinity();
      for (std::size_t s = stream_begin_[d]; s < stream_begin_[d + 1]; ++s) free_s = std::min(free_s, stream_free_[s]);
      const double start_s = std::max(ready_s, free_s);
      // Ties: the op earlier in topological order (Baechi's TimestampOpTuple), then the device
      // seen first, the lower id.
      if (start_s < best.start_s || (start_s == best.start_s && topo_pos_[op] < best.topo_pos))
        best = {start_s, topo_pos_[op], op, d};
    }
  }
  return best;
}

// Schedules op on d: its input copies (in input order; they may queue behind each other on a
// shared link), the earliest free stream, the group's device and persistent bytes, its output.
void EtfSchedule::commit(OpId op, DeviceId d) {
  double ready_s = 0;
  graph_.for_each_in_edge(op, [&](OpId src, const Tensor& t) {
    double at = finish_[src];
    if (!t.control && p_[src] != d) {
      double& arrived = arrival_[src * num_devices_ + d];
      if (arrived < 0) {
        const Route route = machine_.route(p_[src], d);
        double start = finish_[src];
        for (LinkDirection h : route.hops) start = std::max(start, link_free_[h]);
        arrived = start + cost_.transfer_time_s(wire_[src], p_[src], d);
        for (LinkDirection h : route.hops) link_free_[h] = arrived;
        used_bytes_[d] += wire_[src];
        ++link_version_;
      }
      at = arrived;
    }
    ready_s = std::max(ready_s, at);
  });
  std::size_t stream = stream_begin_[d];
  for (std::size_t s = stream_begin_[d]; s < stream_begin_[d + 1]; ++s)
    if (stream_free_[s] < stream_free_[stream]) stream = s;
  finish_[op] = std::max(ready_s, stream_free_[stream]) + op_time_[op * num_devices_ + d];
  stream_free_[stream] = finish_[op];
  p_[op] = d;

  const GroupId g = coloc_.group_of(op);
  if (group_device_[g] < 0 && !soft_placed(op)) {
    group_device_[g] = static_cast<int>(d);
    used_bytes_[d] += group_persistent_[g];
  }
  used_bytes_[d] += graph_.op(op).output_bytes;
  // Baechi frees an output when its last consumer runs (ETFDevice.deallocate_predecessor_memory);
  // an output nobody reads is freed at once.
  graph_.for_each_in_edge(op, [&](OpId src, const Tensor&) {
    if (--consumers_left_[src] == 0) release_output(src);
  });
  if (consumers_left_[op] == 0) release_output(op);

  ready_.erase(std::find(ready_.begin(), ready_.end(), op));
  graph_.for_each_out_edge(op, [&](OpId dst, const Tensor&) {
    if (--inputs_left_[dst] == 0) ready_.push_back(dst);
  });
}

void EtfSchedule::release_output(OpId producer) {
  used_bytes_[p_[producer]] -= graph_.op(producer).output_bytes;
  for (DeviceId d = 0; d < num_devices_; ++d)
    if (d != p_[producer] && arrival_[producer * num_devices_ + d] >= 0) used_bytes_[d] -= wire_[producer];
}

Placement EtfSchedule::run() {
  prepare();
  while (!ready_.empty()) {
    Choice c = select(options_.respect_memory);
    // No ready op fits anywhere: Baechi would stall here; we schedule the earliest pair anyway and
    // leave the OOM to the simulator.
    if (!c.found()) c = select(false);
    PLACELAB_CHECK(c.found()) << "m_etf: no device for " << ready_.size() << " ready ops";
    commit(c.op, c.device);
  }
  return std::move(p_);
}

}  // namespace

Placement m_etf_placement(const OpGraph& graph, const CostModel& cost, const MEtfOptions& options) {
  return EtfSchedule(graph, cost, options).run();
}

// ---- Registry entries --------------------------------------------------------------------------

BaselineEntry detail::m_topo_baseline_entry() {
  return {.name = "m_topo",
          .aliases = {},
          .summary = "Baechi's m-TOPO: colocation groups in topological order fill each GPU up to an even memory share",
          .paper = "Jeon et al., Baechi, SoCC 2020 (m-TOPO)",
          .argument = "",
          .place = [](const BaselineContext& c, const std::optional<std::string>&) {
            return m_topo_placement(c.graph, c.machine);
          }};
}

BaselineEntry detail::m_etf_baseline_entry() {
  return {.name = "m_etf",
          .aliases = {},
          .summary = "Baechi's m-ETF: earliest-start (op, GPU) pair first, skipping GPUs without the memory for the op",
          .paper = "Jeon et al., Baechi, SoCC 2020 (m-ETF)",
          .argument = "",
          .place = [](const BaselineContext& c, const std::optional<std::string>&) {
            return m_etf_placement(c.graph, c.cost);
          }};
}

}  // namespace placelab
