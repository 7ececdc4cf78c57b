// Baechi's memory-constrained placers m-TOPO, m-ETF and m-SCT (Jeon et al., "Baechi: Fast Device
// Placement of Machine Learning Graphs", SoCC 2020, and the extended version, arXiv 2301.08695). The
// rules follow the paper's algorithm descriptions and the authors' code (github.com/beomyeol/baechi:
// placer/m_topo.py, placer/m_etf.py, placer/m_sct.py, placer/device.py, placer/placer_utils.py), as
// called by placer_lib.py's "m_topo", "m_etf" and "m_sct" methods: colocation groups kept whole, no
// memory reservation. Where we differ, the comment at the spot says so and why.
#include <coin/ClpSimplex.hpp>
#include <coin/ClpSolve.hpp>
#include <coin/CoinPackedMatrix.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "placelab/core/error.h"
#include "placelab/core/numbers.h"
#include "placelab/graph/transfers.h"
#include "placelab/learners/baselines.h"
#include "placelab/learners/grouping.h"
#include "placelab/sim/eager_schedule.h"
#include "placelab/sim/link_book.h"
#include "placelab/sim/simulator.h"
#include "dataflow_list.h"
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
// Given favorite children (m-SCT), the schedule also follows SCT's rule for them (see select()).
// On an eager graph the times are the eager model's own (EagerSchedule): the ready op is the next in
// program order, and its start on a device is where the simulator would start it.
class EtfSchedule {
 public:
  // `favorite`: empty for m-ETF; for m-SCT, each op's favorite child (sct_favorite_children).
  EtfSchedule(const OpGraph& graph, const CostModel& cost, bool respect_memory,
              std::vector<std::optional<OpId>> favorite, const char* who)
      : graph_(graph),
        cost_(cost),
        machine_(cost.machine()),
        respect_memory_(respect_memory),
        favorite_(std::move(favorite)),
        n_(graph.num_ops()),
        num_devices_(machine_.num_devices()),
        targets_(placement_targets(machine_, who)),
        cpu_(machine_.default_cpu()),
        coloc_(group_by_colocation(graph)),
        wire_(wire_bytes(graph)) {
    if (graph.execution() == Execution::kEager) {
      simulator_ = std::make_unique<Simulator>(graph, cost);
      eager_.emplace(*simulator_);
    }
  }

  ListSchedule run();

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  struct Choice {
    double start_s = kNever;
    std::size_t topo_pos = 0;
    bool favored = false;  // op is the favorite child the device is kept for
    OpId op = 0;
    DeviceId device = 0;
    bool found() const { return start_s < kNever; }
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
  // When op could start on d (kNever when it does not fit there and memory is respected).
  double start_on(OpId op, DeviceId d, bool respect_memory);
  void keep_devices_for_favorites(bool respect_memory);
  Choice select(bool respect_memory);
  void commit(OpId op, DeviceId d);
  void schedule_on_streams(OpId op, DeviceId d);
  // When src's output, sent to d once src finishes, is there (`commit`: its links are held).
  double copy_end_s(OpId src, DeviceId d, bool commit) {
    return links_.book(machine_.route(p_[src], d).hops, finish_[src], cost_.transfer_time_s(wire_[src], p_[src], d),
                       commit);
  }
  void release_output(OpId producer);

  const OpGraph& graph_;
  const CostModel& cost_;
  const Machine& machine_;
  const bool respect_memory_;
  const std::vector<std::optional<OpId>> favorite_;
  const std::size_t n_;
  const std::size_t num_devices_;
  const std::vector<DeviceId> targets_;
  const std::optional<DeviceId> cpu_;
  const Grouping coloc_;
  const std::vector<int64_t> wire_;
  std::unique_ptr<Simulator> simulator_;  // eager graphs: the schedule's rule
  std::optional<EagerSchedule> eager_;

  std::vector<std::size_t> topo_pos_;
  std::vector<double> op_time_;          // [op * devices + d], s
  std::vector<double> stream_free_;      // [stream]: when it is next free, s
  std::vector<std::size_t> stream_begin_;  // device d's streams: [stream_begin_[d], stream_begin_[d+1])
  LinkBook links_;
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
  std::vector<char> scheduled_;                   // [op]
  std::vector<std::optional<OpId>> last_op_;      // [d]: the op scheduled on d last (m-SCT)
  std::vector<std::optional<OpId>> kept_for_;     // [d]: the favorite child d is kept for (m-SCT)
  std::vector<double> starts_;                    // select()'s scratch: one op's start per device
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
    stream_begin_[d + 1] = stream_begin_[d] + static_cast<std::size_t>(machine_.devices[d].parallel_capacity());
  stream_free_.assign(stream_begin_.back(), 0.0);
  links_.reset(machine_.num_link_directions());
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
  scheduled_.assign(n_, 0);
  last_op_.assign(num_devices_, std::nullopt);
  kept_for_.assign(num_devices_, std::nullopt);
  starts_.reserve(num_devices_);
  ready_.clear();
  ready_.reserve(n_);
  for (OpId op = 0; op < n_; ++op) {
    inputs_left_[op] = graph_.in_degree(op);
    consumers_left_[op] = graph_.out_degree(op);
    if (inputs_left_[op] == 0 && !eager_) ready_.push_back(op);
  }
  if (eager_ && n_ > 0) ready_.push_back(0);  // program order: one op at a time
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
        at = copy_end_s(src, d, /*commit=*/false);
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

double EtfSchedule::start_on(OpId op, DeviceId d, bool respect_memory) {
  if (eager_) {
    const EagerSchedule::Times t = eager_->probe(op, d);
    return respect_memory && !fits(op, d, t.copy_bytes) ? kNever : t.start_s;
  }
  double ready_s = 0;
  int64_t copy_bytes = 0;
  probe(op, d, ready_s, copy_bytes);
  if (respect_memory && !fits(op, d, copy_bytes)) return kNever;
  double free_s = kNever;
  for (std::size_t s = stream_begin_[d]; s < stream_begin_[d + 1]; ++s) free_s = std::min(free_s, stream_free_[s]);
  return std::max(ready_s, free_s);
}

// SCT's rule (Hanen & Munier 1995; Baechi's SCTDevice.get_op_to_schedule, which turns the device
// AWAKE): a device is kept for the favorite child of the op it ran last when that child is ready,
// not yet scheduled, fits there, and starts there no later than on any other device it may use.
// Baechi skips this when the child's colocation group is already placed (its 'p' is set), even on
// this very device; we keep the device then too, the one place the child can go.
void EtfSchedule::keep_devices_for_favorites(bool respect_memory) {
  for (DeviceId d = 0; d < num_devices_; ++d) {
    kept_for_[d].reset();
    if (!last_op_[d]) continue;
    const std::optional<OpId> child = favorite_[*last_op_[d]];
    if (!child || scheduled_[*child] || inputs_left_[*child] != 0) continue;
    if (eager_ && *child != ready_.front()) continue;  // it cannot run before the op PyTorch issues next
    double here_s = kNever, elsewhere_s = kNever;
    DeviceId storage = 0;
    for (DeviceId e : devices_of(*child, storage)) {
      double& earliest_s = e == d ? here_s : elsewhere_s;
      earliest_s = std::min(earliest_s, start_on(*child, e, respect_memory));
    }
    if (here_s < kNever && here_s <= elsewhere_s) kept_for_[d] = *child;
  }
}

// The (op, device) pair that starts first. With favorite children (m-SCT), a device kept for a
// favorite child takes that child at its start time, and any other op only once it is urgent
// (Baechi's SCTDevice._get_op_on_await): at the latest of its start times over the devices it
// may use and fits (placer_utils.ReadyOpManager's urgent_ts), when its inputs could be on all of
// them. Baechi runs this as an event loop over device clocks; taking the earliest (start, op)
// pair is the same choice without the clocks, as in m-ETF.
EtfSchedule::Choice EtfSchedule::select(bool respect_memory) {
  if (!favorite_.empty()) keep_devices_for_favorites(respect_memory);
  Choice best;
  for (OpId op : ready_) {
    DeviceId storage = 0;
    const std::span<const DeviceId> devices = devices_of(op, storage);
    starts_.clear();
    double urgent_s = 0;
    for (DeviceId d : devices) {
      starts_.push_back(start_on(op, d, respect_memory));
      if (starts_.back() < kNever) urgent_s = std::max(urgent_s, starts_.back());
    }
    for (std::size_t k = 0; k < devices.size(); ++k) {
      const DeviceId d = devices[k];
      if (!(starts_[k] < kNever)) continue;
      const bool favored = kept_for_[d] == op;
      const double start_s = kept_for_[d] && !favored ? std::max(starts_[k], urgent_s) : starts_[k];
      // Ties: the op earlier in topological order (Baechi's TimestampOpTuple), then the device
      // kept for it, then the device seen first, the lower id.
      if (start_s < best.start_s ||
          (start_s == best.start_s &&
           (topo_pos_[op] < best.topo_pos || (topo_pos_[op] == best.topo_pos && favored && !best.favored))))
        best = {start_s, topo_pos_[op], favored, op, d};
    }
  }
  return best;
}

// Schedules op on d: its input copies (in input order; they may queue behind each other on a
// shared link), the earliest free stream, the group's device and persistent bytes, its output.
void EtfSchedule::commit(OpId op, DeviceId d) {
  if (eager_) {
    finish_[op] = eager_->commit(op, d).end_s;
    // The copies it received, for the memory bookkeeping below (their times are the schedule's).
    graph_.for_each_in_edge(op, [&](OpId src, const Tensor& t) {
      double& arrived = arrival_[src * num_devices_ + d];
      if (t.control || p_[src] == d || arrived >= 0) return;
      arrived = finish_[src];
      used_bytes_[d] += wire_[src];
    });
  } else {
    schedule_on_streams(op, d);
  }
  p_[op] = d;
  scheduled_[op] = 1;
  last_op_[d] = op;

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
    if (--inputs_left_[dst] == 0 && !eager_) ready_.push_back(dst);
  });
  if (eager_ && op + 1 < n_) ready_.push_back(op + 1);
}

// The dataflow model's part of commit: op's input copies (in input order; they may queue behind
// each other on a shared link) and the earliest free stream of d.
void EtfSchedule::schedule_on_streams(OpId op, DeviceId d) {
  double ready_s = 0;
  graph_.for_each_in_edge(op, [&](OpId src, const Tensor& t) {
    double at = finish_[src];
    if (!t.control && p_[src] != d) {
      double& arrived = arrival_[src * num_devices_ + d];
      if (arrived < 0) {
        arrived = copy_end_s(src, d, /*commit=*/true);
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
}

void EtfSchedule::release_output(OpId producer) {
  used_bytes_[p_[producer]] -= graph_.op(producer).output_bytes;
  for (DeviceId d = 0; d < num_devices_; ++d)
    if (d != p_[producer] && arrival_[producer * num_devices_ + d] >= 0) used_bytes_[d] -= wire_[producer];
}

ListSchedule EtfSchedule::run() {
  prepare();
  while (!ready_.empty()) {
    Choice c = select(respect_memory_);
    // No ready op fits anywhere: Baechi would stall here; we schedule the earliest pair anyway and
    // leave the OOM to the simulator.
    if (!c.found()) c = select(false);
    PLACELAB_CHECK(c.found()) << "no device for " << ready_.size() << " ready ops";
    commit(c.op, c.device);
  }
  if (eager_) return {std::move(p_), eager_->makespan_s()};
  // p_ is the plan in ETF's own model of the executor; the schedule is the simulator's run of it,
  // refined with the same rule inside the simulator (dataflow_list.h).
  return detail::dataflow_list_schedule(
      graph_, cost_,
      {.kind = favorite_.empty() ? detail::DataflowListRule::Kind::kEtf : detail::DataflowListRule::Kind::kSct,
       .candidates = targets_, .respect_memory = respect_memory_, .favorite = favorite_},
      p_);
}

}  // namespace

ListSchedule m_etf_schedule(const OpGraph& graph, const CostModel& cost, const MEtfOptions& options) {
  return EtfSchedule(graph, cost, options.respect_memory, {}, "m_etf").run();
}

Placement m_etf_placement(const OpGraph& graph, const CostModel& cost, const MEtfOptions& options) {
  return m_etf_schedule(graph, cost, options).placement;
}

// ---- m-SCT -------------------------------------------------------------------------------------
// Baechi §3 (m-SCT): Hanen & Munier's SCT ("An approximation algorithm for scheduling dependent
// tasks on m processors with small communication delays", 1995) with m-ETF's memory test. An LP
// relaxation picks each op's favorite child (FavoriteChildLp); the list schedule (EtfSchedule with
// favorites) keeps a device for the favorite child of the op it ran last.

void MSctOptions::validate() const {
  if (!(favorite_threshold >= 0.0 && favorite_threshold < 1.0))
    throw InputError("m_sct.favorite_threshold = " + format_exact(favorite_threshold) + ": must be in [0, 1)");
}

namespace {

// One edge of Baechi's op graph (a networkx DiGraph): the tensors between two ops merged into one
// edge (placer_lib.py, PlacementGraphGenerator._add_edges). `data` when any of them is a tensor.
struct LpEdge {
  OpId parent = 0;
  OpId child = 0;
  bool data = false;
};

std::vector<LpEdge> distinct_edges(const OpGraph& graph) {
  std::vector<LpEdge> edges;
  edges.reserve(graph.num_edges());
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> edge_to(graph.num_ops(), kNone);  // [child]: its edge from the current parent
  for (OpId parent = 0; parent < graph.num_ops(); ++parent) {
    const std::size_t first = edges.size();
    graph.for_each_out_edge(parent, [&](OpId child, const Tensor& t) {
      std::size_t& e = edge_to[child];
      if (e == kNone || e < first) {  // unset, or set by an earlier parent
        e = edges.size();
        edges.push_back({parent, child, false});
      }
      edges[e].data = edges[e].data || !t.control;
    });
  }
  return edges;
}

// Baechi's FavoriteChildLPSolver (m_sct.py) in CLP's terms. Columns: x_e in [0, 1] per data edge,
// s_i >= 0 per op, the makespan w >= 0; minimise w. Rows (Baechi's rule numbers; rules 1 and 2 are
// the column bounds here):
//   3. s_i - s_j + c_ij x_ij <= -p_i  per edge (no x on a control edge: it carries nothing, where
//      Baechi prices it as a 4-byte tensor and lets it be a favorite);
//   4. Σ_j x_ij >= out-degree - 1     per op with two or more data children;
//   5. Σ_i x_ij >= in-degree - 1      per op with two or more data parents;
//   6. s_i - w <= -p_i                per op without successors (Baechi writes it for every op;
//      rule 3 implies the others).
// Times are in µs, as Baechi's, which keeps CLP's tolerances (1e-7) meaningful.
class FavoriteChildLp {
 public:
  FavoriteChildLp(const OpGraph& graph, const CostModel& cost)
      : graph_(graph),
        cost_(cost),
        targets_(placement_targets(cost.machine(), "m_sct")),
        cpu_(cost.machine().default_cpu()),
        edges_(distinct_edges(graph)),
        wire_(wire_bytes(graph)) {}

  // Per data edge (in edges_ order, control edges skipped): the optimal x.
  std::vector<double> solve();
  const std::vector<LpEdge>& edges() const { return edges_; }

 private:
  // The devices op may use, as the schedule sees them: the first CPU for a soft-placed op.
  std::span<const DeviceId> devices_of(OpId op) const {
    if (cpu_ && graph_.op(op).cpu_only) return {&*cpu_, 1};
    return targets_;
  }
  // p_i: op's mean time over its devices (Baechi profiles one GPU type; ours may differ).
  double op_time_us(OpId op) const;
  // c_ij: the mean time, over pairs of distinct devices the two may use, of what parent sends.
  double transfer_time_us(const LpEdge& e) const;

  const OpGraph& graph_;
  const CostModel& cost_;
  const std::vector<DeviceId> targets_;
  const std::optional<DeviceId> cpu_;
  const std::vector<LpEdge> edges_;
  const std::vector<int64_t> wire_;
};

double FavoriteChildLp::op_time_us(OpId op) const {
  double sum_s = 0;
  for (DeviceId d : devices_of(op)) sum_s += cost_.op_time_s(graph_.op(op), d);
  return 1e6 * sum_s / static_cast<double>(devices_of(op).size());
}

double FavoriteChildLp::transfer_time_us(const LpEdge& e) const {
  double sum_s = 0;
  int pairs = 0;
  for (DeviceId from : devices_of(e.parent))
    for (DeviceId to : devices_of(e.child))
      if (from != to) {
        sum_s += cost_.transfer_time_s(wire_[e.parent], from, to);
        ++pairs;
      }
  return pairs == 0 ? 0.0 : 1e6 * sum_s / pairs;
}

std::vector<double> FavoriteChildLp::solve() {
  const std::size_t n = graph_.num_ops();
  std::vector<int> x_of(edges_.size(), -1);  // [edge]: its x column, -1 for a control edge
  int num_x = 0;
  for (std::size_t e = 0; e < edges_.size(); ++e)
    if (edges_[e].data) x_of[e] = num_x++;
  const auto s_of = [&](OpId op) { return num_x + static_cast<int>(op); };
  const int w = num_x + static_cast<int>(n);
  const int num_columns = w + 1;

  std::vector<int> rows, columns;
  std::vector<double> elements, row_lower, row_upper;
  const auto add_row = [&](double lower, double upper) {
    row_lower.push_back(lower);
    row_upper.push_back(upper);
    return static_cast<int>(row_lower.size()) - 1;
  };
  const auto add = [&](int row, int column, double value) {
    rows.push_back(row);
    columns.push_back(column);
    elements.push_back(value);
  };
  const double kInf = COIN_DBL_MAX;

  std::vector<double> p_us(n);
  for (OpId op = 0; op < n; ++op) p_us[op] = op_time_us(op);
  std::vector<std::vector<int>> out_x(n), in_x(n);
  for (std::size_t e = 0; e < edges_.size(); ++e) {  // rule 3
    const LpEdge& edge = edges_[e];
    const int row = add_row(-kInf, -p_us[edge.parent]);
    add(row, s_of(edge.parent), 1.0);
    add(row, s_of(edge.child), -1.0);
    if (x_of[e] >= 0) {
      add(row, x_of[e], transfer_time_us(edge));
      out_x[edge.parent].push_back(x_of[e]);
      in_x[edge.child].push_back(x_of[e]);
    }
  }
  for (const auto* x_sets : {&out_x, &in_x})  // rules 4 and 5
    for (const std::vector<int>& xs : *x_sets) {
      if (xs.size() < 2) continue;
      const int row = add_row(static_cast<double>(xs.size()) - 1.0, kInf);
      for (int x : xs) add(row, x, 1.0);
    }
  for (OpId op = 0; op < n; ++op)  // rule 6
    if (graph_.out_degree(op) == 0) {
      const int row = add_row(-kInf, -p_us[op]);
      add(row, s_of(op), 1.0);
      add(row, w, -1.0);
    }

  std::vector<double> column_lower(static_cast<std::size_t>(num_columns), 0.0);
  std::vector<double> column_upper(static_cast<std::size_t>(num_columns), kInf);
  std::fill(column_upper.begin(), column_upper.begin() + num_x, 1.0);
  std::vector<double> objective(static_cast<std::size_t>(num_columns), 0.0);
  objective.back() = 1.0;

  const CoinPackedMatrix matrix(false, rows.data(), columns.data(), elements.data(),
                                static_cast<CoinBigIndex>(elements.size()));
  ClpSimplex model;
  model.setLogLevel(0);
  model.loadProblem(matrix, column_lower.data(), column_upper.data(), objective.data(), row_lower.data(),
                    row_upper.data());
  // Presolve, then the dual simplex: on op-level GNMT (122,159 rows, 118,326 columns) 41 s of CPU,
  // where the dual simplex alone took 107 s and the barrier 103.5 s (docs/learners.md). The LP is
  // degenerate, so the two simplex paths end at different optimal vertices and favorites.
  ClpSolve how;
  how.setSolveType(ClpSolve::useDual);
  how.setPresolveType(ClpSolve::presolveOn);
  // CLP would install its own SIGINT handler for the solve and end it "stopped" (status 3) on
  // Ctrl-C, which the caller cannot tell from a failure, and the process's own handler (a run's
  // stop-and-resume) would never see the signal: leave interrupts to the process.
  how.setSpecialOption(2, 1);
  model.initialSolve(how);
  if (!model.isProvenOptimal())
    throw Error("m_sct: CLP did not solve the favorite-child LP (" + std::to_string(row_lower.size()) + " rows, " +
                std::to_string(num_columns) + " columns): status " + std::to_string(model.status()));
  const double* solution = model.primalColumnSolution();
  return {solution, solution + num_x};
}

}  // namespace

std::vector<std::optional<OpId>> sct_favorite_children(const OpGraph& graph, const CostModel& cost,
                                                       const MSctOptions& options) {
  options.validate();
  FavoriteChildLp lp(graph, cost);
  const std::vector<double> x = lp.solve();
  // Rounding (m_sct.py, refine_favorite_child_edges: round(x - threshold + 0.5) == 0). Rules 4 and 5
  // leave at most two candidates per op, both exactly at the threshold; Baechi's
  // _assign_favorite_child keeps the last edge it visits and can then clear a parent's newer
  // favorite by mistake, so we keep the smaller x, then the earlier edge, per parent and per child.
  constexpr double kTolerance = 1e-7;  // CLP's primal tolerance
  const std::size_t n = graph.num_ops();
  constexpr double kNone = std::numeric_limits<double>::infinity();
  std::vector<double> parent_x(n, kNone), child_x(n, kNone);
  std::vector<std::optional<OpId>> child_of(n), parent_of(n);
  std::size_t k = 0;
  for (const LpEdge& e : lp.edges()) {
    if (!e.data) continue;
    const double value = x[k++];
    if (value <= options.favorite_threshold + kTolerance && value < parent_x[e.parent]) {
      parent_x[e.parent] = value;
      child_of[e.parent] = e.child;
    }
  }
  for (OpId parent = 0; parent < n; ++parent) {
    if (!child_of[parent]) continue;
    const OpId child = *child_of[parent];
    if (parent_x[parent] < child_x[child]) {
      child_x[child] = parent_x[parent];
      parent_of[child] = parent;
    }
  }
  std::vector<std::optional<OpId>> favorite(n);
  for (OpId child = 0; child < n; ++child)
    if (parent_of[child]) favorite[*parent_of[child]] = child;
  return favorite;
}

ListSchedule m_sct_schedule(const OpGraph& graph, const CostModel& cost, const MSctOptions& options) {
  return EtfSchedule(graph, cost, options.respect_memory, sct_favorite_children(graph, cost, options), "m_sct").run();
}

Placement m_sct_placement(const OpGraph& graph, const CostModel& cost, const MSctOptions& options) {
  return m_sct_schedule(graph, cost, options).placement;
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

namespace {
// `m_sct:<threshold>`'s options, validated.
MSctOptions m_sct_argument(const std::string& argument) {
  return detail::options_from_argument(argument, &MSctOptions::favorite_threshold, "m_sct.favorite_threshold",
                                       "must be a number");
}
}  // namespace

BaselineEntry detail::m_sct_baseline_entry() {
  return {.name = "m_sct",
          .aliases = {},
          .summary = "Baechi's m-SCT: m-ETF keeping a GPU for the favorite child an LP picks for each op; "
                     "`m_sct:<threshold>` rounds the LP there (default 0.5)",
          .paper = "Jeon et al., Baechi, SoCC 2020 §3 (m-SCT); Hanen & Munier 1995 (SCT)",
          .argument = "<threshold>",
          .canonical_argument =
              [](const std::string& argument) { return format_exact(m_sct_argument(argument).favorite_threshold); },
          .place = [](const BaselineContext& c, const std::optional<std::string>& argument) {
            return m_sct_placement(c.graph, c.cost, argument ? m_sct_argument(*argument) : MSctOptions{});
          }};
}

}  // namespace placelab
