// The simulator's kernel: the flat graph built once per (graph, cost model), the per-thread
// workspace, and the event loop. The rules it implements are docs/simulator.md; the comments
// here explain how, and why the data is laid out the way it is (no allocation per evaluation,
// few cache lines and few unpredictable branches per op and per transfer).
#include "placelab/sim/simulator.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <exception>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>

#include "placelab/core/error.h"
#include "placelab/core/workers.h"
#include "placelab/graph/transfers.h"
#include "placelab/sim/dataflow_schedule.h"
#include "deciding_state.h"
#include "event_state.h"
#include "flat_graph.h"

namespace placelab {

using sim_detail::DeviceState;
using sim_detail::Event;
using sim_detail::FlatGraph;
using sim_detail::grow;
using sim_detail::LinkState;
using sim_detail::OpState;
using sim_detail::QueueState;
using sim_detail::ReadyOp;
using sim_detail::Transfer;


// Per-evaluation state. Arrays are sized for the largest graph and machine seen so far.
struct SimWorkspace::Impl {
  std::vector<OpState> ops;
  // Per op: its effective device, also in OpState, but here 2 bytes per op: small enough to
  // stay in the L1 cache, so classifying a successor or an input as local or remote (random
  // op ids, several per op) does not wait for the op's record to come from L2.
  std::vector<DeviceId> op_device;
  // Per in-edge: the transfer whose received copy feeds this edge (remote data edges only).
  std::vector<uint32_t> in_transfer;
  // The consumer ops of each transfer, one entry per edge, in segments (Transfer::consumers_begin)
  // filled when it is issued: its finish readies exactly them, without rescanning the
  // producer's out-edges for ones on its destination.
  std::vector<uint32_t> consumers;
  // Per device, segments of one array: ready queues. Ops become ready at non-decreasing times
  // and each op enters its device's queue once, so a queue is a FIFO over its segment (sized by
  // the ops placed there) whose tail is kept sorted by id among ops ready at the same time.
  std::vector<ReadyOp> ready;
  // The event queue: a tournament tree (see Evaluation::set_leaf) over one leaf per compute slot
  // (the finish of the op running there) and one per transfer queue (the finish of the transfer
  // at its head); 2 × leaves entries.
  std::vector<Event> events;
  std::vector<Transfer> transfers;
  std::vector<LinkState> links;
  std::vector<QueueState> queues;
  std::vector<DeviceState> devices;
  // Per compute slot. Not uint8_t: a store through a char type may alias anything, which would
  // make the compiler reload every array pointer of the event loop after it.
  std::vector<uint32_t> slot_busy;
  // Per compute slot of a shared device: the seconds of work at full speed its op (or copy) has
  // left as of DeviceState::since_s, and with a timeline the index of its record, whose end is
  // known only when it finishes.
  std::vector<double> remaining_s;
  std::vector<uint32_t> slot_record;
  // Bit sets over device ids (64 per word): devices touched since the last dispatch, and the
  // remote destinations of the finishing producer. Walking set bits yields ids in increasing
  // order, which both rules need, without sorting.
  std::vector<uint64_t> dirty_bits;
  std::vector<uint64_t> dest_bits;
  // The finishing producer's remote data edges (out-edge indices); sized by the largest out-degree.
  std::vector<uint32_t> remote_edges;
  // The eager execution model's state (eager.cpp); untouched by dataflow graphs.
  sim_detail::EagerScratch eager;

  void reserve_for(const FlatGraph& g) {
    const std::size_t n = g.num_ops, nd = g.num_devices;
    grow(ops, n);
    grow(op_device, n);
    grow(in_transfer, g.in.size());
    grow(consumers, g.num_data_edges);
    grow(ready, n);
    grow(events, 2 * std::size_t{g.num_leaves});
    grow(transfers, g.num_data_edges);
    grow(links, g.num_links);
    grow(queues, g.num_queues);
    grow(devices, nd);
    grow(slot_busy, g.slot_off[nd]);
    grow(remaining_s, g.slot_off[nd]);
    grow(slot_record, g.slot_off[nd]);
    grow(dirty_bits, (nd + 63) / 64);
    grow(dest_bits, (nd + 63) / 64);
    grow(remote_edges, g.max_out_degree);
  }
};

SimWorkspace::SimWorkspace() : impl_(std::make_unique<Impl>()) {}
SimWorkspace::~SimWorkspace() = default;
SimWorkspace::SimWorkspace(SimWorkspace&&) noexcept = default;
SimWorkspace& SimWorkspace::operator=(SimWorkspace&&) noexcept = default;

namespace {

using sim_detail::kCopyFinish;
using sim_detail::kNoEvent;
using sim_detail::kOpFinish;
using sim_detail::kTransfer;

using sim_detail::kNoTransfer;
using sim_detail::Deciding;
constexpr DeviceId kUndecided = std::numeric_limits<DeviceId>::max();

// One evaluation: binds the flat graph, the workspace and the result for the event loop.
// kRecord (SimOptions::record_timeline) is a template parameter so that the hot path carries no
// timeline branches at all; so is kDecide (simulate_deciding: devices chosen during the run).
template <bool kRecord, bool kDecide = false>
class Evaluation {
 public:
  Evaluation(const FlatGraph& g, SimWorkspace::Impl& w, SimResult& r, Deciding* deciding = nullptr)
      : deciding_(deciding), g_(g), w_(w), r_(r), nd_(g.num_devices), nwords_((g.num_devices + 63) / 64),
        ops_(w.ops.data()), op_dev_(w.op_device.data()), devs_(w.devices.data()), remote_(w.remote_edges.data()), links_(w.links.data()), xfers_(w.transfers.data()),
        tree_(w.events.data()), num_slots_(g.slot_off[g.num_devices]), num_leaves_(g.num_leaves),
        tree_depth_(g.tree_depth) {}

  void run(std::span<const DeviceId> placement) {
    const uint32_t n = g_.num_ops;
    sim_detail::reset_result(g_, r_);

    for (uint32_t d = 0; d < nd_; ++d)
      devs_[d] = DeviceState{0, 0, g_.slot_off[d + 1] - g_.slot_off[d], 0, 0, 0, kNoTransfer, kNoTransfer, 0, 0, 0.0};
    for (uint32_t l = 0; l < g_.num_links; ++l) links_[l] = LinkState{0.0, 0.0, 0};
    std::fill_n(w_.queues.begin(), g_.num_queues, QueueState{kNoTransfer, 0});
    std::fill_n(w_.slot_busy.begin(), g_.slot_off[nd_], uint32_t{0});
    std::fill_n(w_.dirty_bits.begin(), nwords_, uint64_t{0});
    std::fill_n(w_.dest_bits.begin(), nwords_, uint64_t{0});

    if constexpr (kDecide) {
      start_deciding();
    } else {
      place(placement);
    }

    for (uint32_t i = 0; i < 2 * num_leaves_; ++i) tree_[i].order = kNoEvent;
    num_transfers_ = 0;
    num_consumers_ = 0;
    finished_ = 0;
    any_dirty_ = false;
    if constexpr (kDecide) ask(g_.sources, 0.0);
    for (uint32_t op : g_.sources) make_ready(op, 0.0);

    // Everything that happens at one instant first, then the dispatch (when the next event is
    // later, or there is none): so that ops made ready at one instant compete by id, and frees
    // at an instant precede the allocations of new starts. A dispatch may schedule zero-length
    // ops at the same instant; they are handled in a new round at that instant.
    // The dispatch test follows each handler separately (not once at the top of the loop) so
    // that the branch predictor sees which kind of event came before: after an op finish the
    // device is always dirty, after a transfer finish only when it readied a consumer.
    double now = 0;
    dispatch_if_instant_over(now);
    for (;;) {
      const Event e = tree_[1];
      if (e.order == kNoEvent) break;
      // The handler replaces or clears the event's leaf, which removes it from the queue.
      now = e.time();
      const auto id = static_cast<uint32_t>(e.key());
      const uint64_t kind = e.key() >> 32;
      if (kind == kOpFinish) {
        finish_op(id, now);
        dispatch_if_instant_over(now);
      } else if (kind == kTransfer) {
        finish_transfer(id, now);
        dispatch_if_instant_over(now);
      } else {
        finish_copy(id, now);
        dispatch_if_instant_over(now);
      }
    }
    PLACELAB_CHECK(finished_ == n) << "only " << finished_ << " of " << n << " ops ran";
    r_.step_time_s = now;
    r_.transfers = num_transfers_;

    for (uint32_t l = 0; l < g_.num_links; ++l) r_.links[l] = LinkStats{links_[l].bytes, links_[l].busy_s};
    sim_detail::settle_memory(g_, r_, [&](uint32_t d) { return devs_[d].peak_transient_bytes; });
    if constexpr (kRecord)
      std::stable_sort(r_.timeline.begin(), r_.timeline.end(),
                       [](const TimelineEvent& a, const TimelineEvent& b) { return a.start_s < b.start_s; });
  }

 private:
  // Effective devices, ready-queue segment sizes and persistent memory of a given placement.
  void place(std::span<const DeviceId> placement) {
    for (uint32_t op = 0; op < g_.num_ops; ++op) {
      const DeviceId d = g_.effective_device(op, placement[op]);
      const sim_detail::OpInfo& info = g_.ops[op];
      const double duration = g_.op_time(op, d);
      ops_[op] = OpState{info.in_end - info.in_begin, 0, d, 0, duration, info.output_bytes};
      op_dev_[op] = d;
      ++devs_[d].ready_tail;  // counted here, turned into segment offsets below
      r_.devices[d].persistent_bytes += g_.persistent_bytes[op];
    }
    uint32_t off = 0;
    for (uint32_t d = 0; d < nd_; ++d) {
      const uint32_t count = devs_[d].ready_tail;
      devs_[d].ready_head = devs_[d].ready_tail = off;
      off += count;
    }
    if constexpr (kRecord) sim_detail::record_persistent_samples(g_, r_);
  }

  // ---- Choosing devices while the step runs (simulate_deciding; kDecide only) ----

  // Every op undecided, empty ready lists and an empty plan.
  void start_deciding() {
    Deciding& x = *deciding_;
    for (uint32_t op = 0; op < g_.num_ops; ++op) {
      const sim_detail::OpInfo& info = g_.ops[op];
      ops_[op] = OpState{info.in_end - info.in_begin, 0, kUndecided, 0, 0.0, info.output_bytes};
      op_dev_[op] = kUndecided;
    }
    x.ready.resize(nd_);
    for (std::vector<ReadyOp>& queue : x.ready) queue.clear();
    x.ready_head.assign(nd_, 0);
    x.planned_end_s.assign(g_.num_ops, 0.0);
    x.plan.resize(g_.slot_off[nd_]);
    for (auto& intervals : x.plan) intervals.clear();
    x.hinted_slot.assign(g_.num_ops, kNoTransfer);
    if (x.hint != nullptr) book_hint();
    x.done.assign(g_.num_ops, 0);
    x.asked.assign(g_.num_ops, 0);
    x.finishing = kNoTransfer;
  }

  // The end of `d`'s slots in the plan: a shared device is planned as the ops it runs at full
  // speed, the fluid equivalent of its sharing.
  uint32_t plan_end(DeviceId d) const { return g_.slot_off[d] + g_.full_speed[d]; }

  // The hint's bookings: per device in start order, each op on the first slot free by its start
  // (else the one free first), as the hint ran them.
  void book_hint() {
    Deciding& x = *deciding_;
    std::vector<std::pair<double, uint32_t>> by_start;
    by_start.reserve(g_.num_ops);
    for (uint32_t op = 0; op < g_.num_ops; ++op) {
      const DeviceId d = x.hint->placement[op];
      by_start.emplace_back(x.hint->end_s[op] - g_.op_time(op, d), op);
    }
    std::sort(by_start.begin(), by_start.end());
    for (const auto& [start, op] : by_start) {
      const DeviceId d = x.hint->placement[op];
      uint32_t slot = g_.slot_off[d];
      for (uint32_t s = slot; s < plan_end(d); ++s) {
        const double free_s = x.plan[s].empty() ? 0.0 : x.plan[s].back().second;
        const double best_s = x.plan[slot].empty() ? 0.0 : x.plan[slot].back().second;
        if (free_s <= start) {
          slot = s;
          break;
        }
        if (free_s < best_s) slot = s;
      }
      const double begin = std::max(start, x.plan[slot].empty() ? 0.0 : x.plan[slot].back().second);
      x.plan[slot].emplace_back(begin, begin + (x.hint->end_s[op] - start));
      x.hinted_slot[op] = slot;
    }
  }

  // Takes `op`'s hint booking out of the plan (it is being decided).
  void unbook_hint(uint32_t op) {
    Deciding& x = *deciding_;
    const uint32_t slot = x.hinted_slot[op];
    if (slot == kNoTransfer) return;
    x.hinted_slot[op] = kNoTransfer;
    auto& booked = x.plan[slot];
    const double duration = g_.op_time(op, x.hint->placement[op]);
    // Bookings on a slot are disjoint, so at most one zero-length one shares a start; find ours
    // by its length among those with the hinted op's start.
    auto it = std::lower_bound(booked.begin(), booked.end(), std::pair<double, double>{x.hint->end_s[op] - duration, -1.0});
    for (; it != booked.end(); ++it)
      if (it->second - it->first == duration || std::abs((it->second - it->first) - duration) <= 1e-12 * duration) break;
    if (it != booked.end()) booked.erase(it);
  }

  // Asks the decider for `ops` (the sources, at time 0).
  void ask(std::span<const uint32_t> ops, double now) {
    deciding_->batch.assign(ops.begin(), ops.end());
    consult(now);
  }

  // `op` finished: its successors without a device need one now, before its output is sent.
  void ask_successors(uint32_t op, double now) {
    Deciding& x = *deciding_;
    x.done[op] = 1;
    x.batch.clear();
    const sim_detail::OpInfo& info = g_.ops[op];
    for (uint32_t k = info.out_begin; k < info.out_end; ++k) {
      const uint32_t dst = g_.out[k].dst;
      if (op_dev_[dst] != kUndecided || x.asked[dst]) continue;
      x.asked[dst] = 1;
      x.batch.push_back(dst);
    }
    if (x.batch.empty()) return;
    for (OpId dst : x.batch) x.asked[dst] = 0;
    std::sort(x.batch.begin(), x.batch.end());
    x.finishing = op;
    consult(now);
    x.finishing = kNoTransfer;
  }

  void consult(double now) {
    Deciding& x = *deciding_;
    if (x.batch.empty()) return;
    x.now = now;
    for (OpId op : x.batch) unbook_hint(op);
    View view(*this);
    x.decider->decide(x.batch, view);
    for (OpId op : x.batch)
      PLACELAB_CHECK(op_dev_[op] != kUndecided) << "the decider left op " << op << " without a device";
  }

  // DataflowStep::estimate (see there for the rule).
  DataflowEstimate estimate(uint32_t op, DeviceId d) const {
    const Deciding& x = *deciding_;
    DataflowEstimate est;
    est.ready_s = x.now;
    const sim_detail::OpInfo& info = g_.ops[op];
    for (uint32_t k = info.in_begin; k < info.in_end; ++k) {
      const sim_detail::InEdge& e = g_.in[k];
      DeviceId from = op_dev_[e.src];
      double at = x.done[e.src] ? x.now : x.planned_end_s[e.src];
      if (from == kUndecided) {
        if (x.hint == nullptr) continue;
        from = x.hint->placement[e.src];
        at = std::max(x.now, x.hint->end_s[e.src]);
      }
      const bool remote = e.data && from != d;
      if (remote) {
        const std::size_t pair_index = std::size_t{from} * nd_ + d;
        const sim_detail::PairInfo& pair = g_.pairs[pair_index];
        const int64_t bytes = g_.ops[e.src].send_bytes;
        // Only the finishing producer is done here (an op is asked for when its first producer
        // finishes): its copy would be issued now, behind what the links hold.
        if (x.done[e.src] && !pair.by_device)
          for (LinkDirection h : g_.route(pair_index)) at = std::max(at, links_[h].free_s);
        at += transfer_duration(pair, bytes, from, d);
        est.copy_bytes += bytes;
      }
      est.ready_s = std::max(est.ready_s, at);
    }
    const double duration = g_.op_time(op, d);
    est.start_s = std::numeric_limits<double>::infinity();
    for (uint32_t s = g_.slot_off[d]; s < plan_end(d); ++s)
      est.start_s = std::min(est.start_s, sim_detail::earliest_gap(x.plan[s], est.ready_s, duration));
    est.end_s = est.start_s + duration;
    return est;
  }

  // DataflowStep::decide.
  void decide(uint32_t op, DeviceId placed) {
    PLACELAB_CHECK(op < g_.num_ops && placed < nd_) << "op " << op << ", device " << placed;
    PLACELAB_CHECK(op_dev_[op] == kUndecided) << "op " << op << " is decided already";
    const DeviceId d = g_.effective_device(op, placed);
    unbook_hint(op);
    const DataflowEstimate est = estimate(op, d);
    Deciding& x = *deciding_;
    const double duration = est.end_s - est.start_s;
    for (uint32_t s = g_.slot_off[d]; s < plan_end(d); ++s) {
      if (sim_detail::earliest_gap(x.plan[s], est.ready_s, duration) != est.start_s) continue;
      auto& booked = x.plan[s];
      const std::pair<double, double> interval{est.start_s, est.end_s};
      booked.insert(std::upper_bound(booked.begin(), booked.end(), interval), interval);
      break;
    }
    x.planned_end_s[op] = est.end_s;
    op_dev_[op] = d;
    ops_[op].device = d;
    ops_[op].duration_s = g_.op_time(op, d);
    r_.devices[d].persistent_bytes += g_.persistent_bytes[op];
  }

  // The running step as a decider sees it.
  class View final : public DataflowStep {
   public:
    explicit View(Evaluation& e) : e_(e) {}
    double now_s() const override { return e_.deciding_->now; }
    std::optional<OpId> finishing() const override {
      const uint32_t op = e_.deciding_->finishing;
      return op == kNoTransfer ? std::nullopt : std::optional<OpId>(op);
    }
    bool decided(OpId op) const override {
      PLACELAB_CHECK(op < e_.g_.num_ops) << "op " << op;
      return e_.op_dev_[op] != kUndecided;
    }
    DeviceId device(OpId op) const override {
      PLACELAB_CHECK(decided(op)) << "op " << op << " has no device yet";
      return e_.op_dev_[op];
    }
    int64_t memory_in_use(DeviceId d) const override {
      PLACELAB_CHECK(d < e_.nd_) << "device " << d;
      return e_.r_.devices[d].persistent_bytes + e_.devs_[d].transient_bytes;
    }
    DataflowEstimate estimate(OpId op, DeviceId d) const override {
      PLACELAB_CHECK(op < e_.g_.num_ops && d < e_.nd_) << "op " << op << ", device " << d;
      return e_.estimate(op, e_.g_.effective_device(op, d));
    }
    void decide(OpId op, DeviceId d) override { e_.decide(op, d); }

   private:
    Evaluation& e_;
  };

  // The event queue. Every pending event belongs to one resource that has at most one at a time:
  // a compute slot (the finish of its op) or a transfer queue (the finish of its head). So
  // the queue is a tournament tree over a fixed set of leaves, slots first, then queues, padded
  // with empty leaves to L = FlatGraph::num_leaves (a power of two): leaves at [L, 2L) of tree_,
  // node i < L holds the smaller of nodes 2i and 2i + 1, and tree_[1] is the next event
  // (kNoEvent when none). Setting a leaf replays its path to the root: log2(L)
  // compare-and-select steps without data-dependent branches, and popping an event plus
  // scheduling the same resource's next one is one such replay.
  void set_leaf(uint32_t leaf, Event e) {
    uint32_t i = leaf + num_leaves_;
    tree_[i] = e;
    for (uint32_t level = tree_depth_; level != 0; --level) {
      const Event sibling = tree_[i ^ 1];
      if (sim_detail::before(sibling, e)) e = sibling;
      i >>= 1;
      tree_[i] = e;
    }
  }
  void clear_leaf(uint32_t leaf) { set_leaf(leaf, kNoEventValue()); }
  static Event kNoEventValue() {
    Event e;
    e.order = kNoEvent;
    return e;
  }
  uint32_t queue_leaf(uint32_t queue) const { return num_slots_ + queue; }

  // `pick ? a : b` computed with masks: for conditions that depend on the placement, where a
  // branch would be mispredicted about half the time (gcc turns the plain ternary into one).
  template <typename T>
  static T select(bool pick, T a, T b) {
    if constexpr (std::is_pointer_v<T>) {
      return reinterpret_cast<T>(select(pick, reinterpret_cast<uintptr_t>(a), reinterpret_cast<uintptr_t>(b)));
    } else {
      using U = std::make_unsigned_t<T>;
      const U mask = static_cast<U>(0) - static_cast<U>(pick);
      return static_cast<T>((static_cast<U>(a) & mask) | (static_cast<U>(b) & ~mask));
    }
  }

  // Memory accounting. Without a timeline, a zero-byte buffer needs no test: adding 0 changes
  // neither the total nor the peak. With one, empty buffers are not sampled (docs/simulator.md).
  // `buffer` names the buffer in the timeline (MemorySample::buffer); unused without one.
  void allocate(DeviceId d, int64_t bytes, double now, uint32_t buffer) {
    if constexpr (kRecord)
      if (bytes == 0) return;
    DeviceState& ds = devs_[d];
    const int64_t in_use = (ds.transient_bytes += bytes);
    ds.peak_transient_bytes = std::max(ds.peak_transient_bytes, in_use);
    if constexpr (kRecord)
      r_.memory_timeline.push_back({now, d, r_.devices[d].persistent_bytes + in_use, bytes, buffer});
    (void)buffer;
  }

  void release(DeviceId d, int64_t bytes, double now, uint32_t buffer) {
    if constexpr (kRecord)
      if (bytes == 0) return;
    const int64_t in_use = (devs_[d].transient_bytes -= bytes);
    if constexpr (kRecord)
      r_.memory_timeline.push_back({now, d, r_.devices[d].persistent_bytes + in_use, -bytes, buffer});
    (void)in_use;
    (void)now;
    (void)buffer;
  }

  // Releases `bytes` on `d` when `last` (a reference count just reached zero). Without a
  // timeline this is a subtraction of 0 or `bytes`, not a branch: whether a count reaches zero
  // is data-dependent and would often be mispredicted.
  void release_if(bool last, DeviceId d, int64_t bytes, double now, uint32_t buffer) {
    if constexpr (kRecord) {
      if (last) release(d, bytes, now, buffer);
    } else {
      devs_[d].transient_bytes -= bytes & -static_cast<int64_t>(last);
      (void)now;
    }
  }

  void mark_dirty(DeviceId d) {
    w_.dirty_bits[d >> 6] |= uint64_t{1} << (d & 63);
    any_dirty_ = true;
  }

  // Appends `op` to its device's FIFO; among ops ready at the same time, smaller ids go first.
  void make_ready(uint32_t op, double now) {
    const DeviceId d = op_dev_[op];
    if constexpr (kDecide) {
      std::vector<ReadyOp>& queue = deciding_->ready[d];
      queue.push_back({});
      std::size_t i = queue.size() - 1;
      for (; i > deciding_->ready_head[d] && queue[i - 1].time == now && queue[i - 1].op > op; --i)
        queue[i] = queue[i - 1];
      queue[i] = ReadyOp{now, op};
    } else {
      ReadyOp* queue = w_.ready.data();
      DeviceState& ds = devs_[d];
      const uint32_t head = ds.ready_head;
      uint32_t i = ds.ready_tail++;
      for (; i > head && queue[i - 1].time == now && queue[i - 1].op > op; --i) queue[i] = queue[i - 1];
      queue[i] = ReadyOp{now, op};
    }
    mark_dirty(d);
  }

  // The ready queue of device d: whether it is empty, and its first entry (popped by pop_ready).
  bool no_ready(DeviceId d, const DeviceState& ds) const {
    if constexpr (kDecide) return deciding_->ready_head[d] == deciding_->ready[d].size();
    return ds.ready_head == ds.ready_tail;
  }
  const ReadyOp& first_ready(DeviceId d, const DeviceState& ds) const {
    if constexpr (kDecide) return deciding_->ready[d][deciding_->ready_head[d]];
    return w_.ready[ds.ready_head];
  }
  uint32_t pop_ready(DeviceId d, DeviceState& ds) {
    if constexpr (kDecide) return deciding_->ready[d][deciding_->ready_head[d]++].op;
    return w_.ready[ds.ready_head++].op;
  }

  // Dispatches when something is ready or freed and no more events happen at `now` (the next
  // event is later, or there is none: kNoEvent's time is NaN, unequal to any time). Inlined
  // at each call site on purpose (see run()).
  [[gnu::always_inline]] void dispatch_if_instant_over(double now) {
    if (any_dirty_ && tree_[1].time() != now) dispatch_dirty(now);
  }

  // Starts ready ops on the free slots of every device touched since the last dispatch, in
  // device-id order (set bits from the lowest).
  void dispatch_dirty(double now) {
    any_dirty_ = false;
    for (uint32_t k = 0; k < nwords_; ++k) {
      uint64_t bits = w_.dirty_bits[k];
      w_.dirty_bits[k] = 0;
      for (; bits != 0; bits &= bits - 1)
        dispatch(static_cast<DeviceId>(k * 64 + static_cast<uint32_t>(std::countr_zero(bits))), now);
    }
  }

  // Starts ready work on the free slots of `d`: ops in ready order and, on a device without a
  // copy engine, its waiting copies too, the earlier ready first (an op before a copy ready at
  // the same time, as the CPU executor orders its tasks).
  void dispatch(DeviceId d, double now) {
    DeviceState& ds = devs_[d];
    const bool shared = g_.shared[d] != 0;
    if (shared) [[unlikely]] settle(d, now);
    while (ds.free_slots > 0) {
      if (ds.copy_head != kNoTransfer) [[unlikely]] {
        if (no_ready(d, ds) || xfers_[ds.copy_head].end_s < first_ready(d, ds).time) {
          start_copy(d, now);
          continue;
        }
      } else if (no_ready(d, ds)) {
        break;
      }
      const uint32_t op = pop_ready(d, ds);
      const uint32_t first = g_.slot_off[d];
      uint32_t s = first;
      while (w_.slot_busy[s]) ++s;  // lowest free slot; a free one exists (free_slots > 0)
      w_.slot_busy[s] = 1;
      --ds.free_slots;
      OpState& started = ops_[op];
      started.slot = static_cast<uint16_t>(s - first);
      const double duration = started.duration_s;
      allocate(d, started.output_bytes, now, op);
      DeviceStats& stats = r_.devices[d];
      stats.busy_s += duration;
      ++stats.num_ops;
      set_leaf(s, Event{now + duration, kOpFinish << 32 | op});
      if constexpr (kDecide) deciding_->planned_end_s[op] = now + duration;
      if constexpr (kRecord) {
        if (shared) w_.slot_record[s] = static_cast<uint32_t>(r_.timeline.size());
        r_.timeline.push_back({TimelineEvent::Kind::kOp, op, d, d, static_cast<uint16_t>(s - first), now,
                               now + duration, started.output_bytes});
      }
      if (shared) [[unlikely]] w_.remaining_s[s] = duration;
    }
    if (shared) [[unlikely]] reschedule(d, now);
  }

  // ---- Shared devices (FlatGraph::shared; docs/simulator.md, "Compute") ----
  // While more ops (and copies) are in flight on a shared device than it runs at full speed,
  // each advances at full_speed / in-flight of its speed: processor sharing, as an OS or a
  // thread pool time-slices one socket between TensorFlow's inter-op threads. Each slot keeps
  // the work its op has left; a start or a finish brings them up to date (settle) and moves
  // every finish on the device to the new rate (reschedule). The device's work is conserved:
  // it never does more than full_speed seconds of work per second.

  // Work done on `d` since DeviceState::since_s, at the rate of the ops then in flight.
  void settle(DeviceId d, double now) {
    DeviceState& ds = devs_[d];
    const double elapsed = now - ds.since_s;
    ds.since_s = now;
    const uint32_t first = g_.slot_off[d], end = g_.slot_off[d + 1];
    const uint32_t in_flight = end - first - ds.free_slots;
    if (elapsed == 0 || in_flight == 0) return;
    const uint32_t full = g_.full_speed[d];
    const double done = in_flight <= full ? elapsed : elapsed * full / in_flight;
    for (uint32_t s = first; s < end; ++s)
      if (w_.slot_busy[s]) w_.remaining_s[s] = std::max(0.0, w_.remaining_s[s] - done);
  }

  // Every finish on `d` at the rate its ops in flight have now (settled to `now`).
  void reschedule(DeviceId d, double now) {
    const uint32_t first = g_.slot_off[d], end = g_.slot_off[d + 1];
    const uint32_t in_flight = end - first - devs_[d].free_slots;
    const uint32_t full = g_.full_speed[d];
    for (uint32_t s = first; s < end; ++s) {
      if (!w_.slot_busy[s]) continue;
      const double left = w_.remaining_s[s];
      const double finish = now + (in_flight <= full ? left : left * in_flight / full);
      set_leaf(s, Event{finish, tree_[num_leaves_ + s].key()});
    }
  }

  // The end of the timeline record of what ran on shared slot `slot`, now that it finished.
  void record_shared_end(uint32_t slot, double now) {
    if constexpr (kRecord) r_.timeline[w_.slot_record[slot]].end_s = now;
    (void)slot;
    (void)now;
  }

  void finish_op(uint32_t op, double now) {
    OpState& self = ops_[op];
    const DeviceId d = self.device;
    const sim_detail::OpInfo& info = g_.ops[op];
    const uint32_t slot = g_.slot_off[d] + self.slot;
    if (g_.shared[d]) [[unlikely]] {
      settle(d, now);
      record_shared_end(slot, now);
    }
    w_.slot_busy[slot] = 0;
    clear_leaf(slot);
    ++devs_[d].free_slots;
    mark_dirty(d);
    ++finished_;
    if constexpr (kDecide) ask_successors(op, now);

    // Successors: local data edges and every control edge are satisfied now; remote data edges
    // are grouped by destination device (a bit set and a count per device), one transfer each.
    // Whether an edge is remote depends on the placement and is as good as random, so it is
    // arithmetic here, not a branch: a remote edge is listed (the slot past the list is
    // overwritten otherwise), counted and marked, and leaves its consumer's count unchanged,
    // which is then still positive (that edge is unsatisfied), so one test decides readiness.
    const sim_detail::OutEdge* out = g_.out.data();
    int32_t refs = 0;
    uint32_t num_dest = 0;
    uint32_t num_remote = 0;  // remote data edges, listed in remote_ for the second pass
    for (uint32_t k = info.out_begin; k < info.out_end; ++k) {
      const sim_detail::OutEdge& e = out[k];
      OpState& c = ops_[e.dst];
      const DeviceId dc = op_dev_[e.dst];
      const uint32_t data = e.data ? 1 : 0;
      const uint32_t remote = data & (dc != d ? 1u : 0u);
      refs += static_cast<int32_t>(data - remote);
      remote_[num_remote] = k;
      num_remote += remote;
      DeviceState& ds = devs_[dc];
      num_dest += remote & (ds.dest_edges == 0 ? 1u : 0u);
      ds.dest_edges += remote;
      w_.dest_bits[dc >> 6] |= uint64_t{remote} << (dc & 63);
      c.pending -= 1 - remote;
      if (c.pending == 0) make_ready(e.dst, now);
    }
    if (num_dest > 0) {
      // Transfers in increasing destination id.
      for (uint32_t k = 0; k < nwords_; ++k) {
        uint64_t bits = w_.dest_bits[k];
        w_.dest_bits[k] = 0;
        for (; bits != 0; bits &= bits - 1)
          send(op, info.send_bytes, d, static_cast<DeviceId>(k * 64 + static_cast<uint32_t>(std::countr_zero(bits))),
               now);
      }
      for (uint32_t i = 0; i < num_remote; ++i) {
        const sim_detail::OutEdge& e = out[remote_[i]];
        DeviceState& ds = devs_[op_dev_[e.dst]];
        w_.in_transfer[e.in_pos] = ds.dest_transfer;
        w_.consumers[ds.dest_fill++] = e.dst;
      }
    }
    refs += static_cast<int32_t>(num_dest);
    self.output_refs = refs;
    release_if(refs == 0, d, info.output_bytes, now, op);

    // Inputs: this consumer no longer needs them: a local input holds the producer's output, a
    // remote one the received copy. Which one is placement-dependent, so the reference count
    // and the size are selected, not branched on (in_transfer of a local edge is stale but
    // within the transfer array, and only its address is formed).
    const sim_detail::InEdge* in = g_.in.data();
    for (uint32_t k = info.in_begin; k < info.in_end; ++k) {
      const sim_detail::InEdge& e = in[k];
      if (!e.data) continue;
      OpState& p = ops_[e.src];
      Transfer* copy = xfers_ + w_.in_transfer[k];
      const bool local = op_dev_[e.src] == d;
      int32_t* refs_left = select(local, &p.output_refs, &copy->copy_refs);
      const int64_t* bytes = select(local, &p.output_bytes, &copy->bytes);
      const uint32_t buffer = kRecord ? (local ? e.src : g_.num_ops + w_.in_transfer[k]) : 0;
      release_if(--*refs_left == 0, d, *bytes, now, buffer);
    }
  }

  // Issues the transfer of `producer`'s output to `dst`. Links are FIFO resources reserved at
  // issue time: the transfer starts once every hop of its route is free and holds all of them.
  // The received copy is allocated on `dst` now, as TensorFlow's Recv allocates its output when
  // the rendezvous with the Send completes and then enqueues the copy (docs/simulator.md). This
  // is on dst, never on the producer's device, so it does not matter that the producer's finish
  // releases its inputs after this.
  void send(uint32_t producer, int64_t bytes, DeviceId src, DeviceId dst, double now) {
    const uint32_t x = num_transfers_++;
    DeviceState& ds = devs_[dst];
    Transfer& t = xfers_[x];
    t.producer = producer;
    t.bytes = bytes;
    t.copy_refs = static_cast<int32_t>(ds.dest_edges);
    t.next = kNoTransfer;
    t.consumers_begin = num_consumers_;
    ds.dest_transfer = x;
    ds.dest_fill = num_consumers_;
    num_consumers_ += ds.dest_edges;
    ds.dest_edges = 0;  // reset the per-producer scratch for the next producer

    const std::size_t pair_index = std::size_t{src} * nd_ + dst;
    const sim_detail::PairInfo& pair = g_.pairs[pair_index];
    const double duration = transfer_duration(pair, bytes, src, dst);
    const std::span<const LinkDirection> route = g_.route(pair_index);
    const LinkDirection* hop = route.data();
    const LinkDirection* hop_end = hop + route.size();
    if (pair.by_device) [[unlikely]] {
      // The destination's own cores copy: the copy queues for one of its compute slots (ready
      // now) instead of reserving the route; the links only count its traffic.
      for (const LinkDirection* h = hop; h != hop_end; ++h) {
        links_[*h].bytes += bytes;
        links_[*h].busy_s += duration;
      }
      t.end_s = now;
      allocate(dst, bytes, now, g_.num_ops + x);
      if (ds.copy_head == kNoTransfer) {
        ds.copy_head = x;
      } else {
        xfers_[ds.copy_tail].next = x;
      }
      ds.copy_tail = x;
      mark_dirty(dst);
      return;
    }
    double start = now;
    for (const LinkDirection* h = hop; h != hop_end; ++h) start = std::max(start, links_[*h].free_s);
    const double end = start + duration;
    for (const LinkDirection* h = hop; h != hop_end; ++h) {
      LinkState& link = links_[*h];
      link.free_s = end;
      link.bytes += bytes;
      link.busy_s += duration;
    }
    t.end_s = end;
    t.queue = pair.queue;
    allocate(dst, bytes, now, g_.num_ops + x);
    QueueState& q = w_.queues[pair.queue];
    if (q.head == kNoTransfer) {
      q.head = x;
      set_leaf(queue_leaf(pair.queue), Event{end, kTransfer << 32 | x});
    } else {
      xfers_[q.tail].next = x;
    }
    q.tail = x;
    if constexpr (kRecord) r_.timeline.push_back({TimelineEvent::Kind::kTransfer, producer, dst, src, 0, start, end, bytes});
  }

  double transfer_duration(const sim_detail::PairInfo& pair, int64_t bytes, DeviceId src, DeviceId dst) const {
    return sim_detail::transfer_duration(g_, pair, bytes, src, dst);
  }

  // Starts the copy at the head of `d`'s copy queue on its lowest free slot (free_slots > 0).
  void start_copy(DeviceId d, double now) {
    DeviceState& ds = devs_[d];
    const uint32_t x = ds.copy_head;
    Transfer& t = xfers_[x];
    ds.copy_head = t.next;
    const uint32_t first = g_.slot_off[d];
    uint32_t s = first;
    while (w_.slot_busy[s]) ++s;
    w_.slot_busy[s] = 1;
    --ds.free_slots;
    const DeviceId src = ops_[t.producer].device;
    const double duration = transfer_duration(g_.pairs[std::size_t{src} * nd_ + d], t.bytes, src, d);
    t.queue = s;
    t.next = d;
    t.end_s = now + duration;
    set_leaf(s, Event{t.end_s, kCopyFinish << 32 | x});
    if (g_.shared[d]) [[unlikely]] {
      w_.remaining_s[s] = duration;
      if constexpr (kRecord) w_.slot_record[s] = static_cast<uint32_t>(r_.timeline.size());
    }
    if constexpr (kRecord)
      r_.timeline.push_back({TimelineEvent::Kind::kTransfer, t.producer, d, src, static_cast<uint16_t>(s - first), now,
                             t.end_s, t.bytes});
  }

  // The received copy of transfer `x` is on its destination: its consumers there may start, and
  // the producer's output has one reference less.
  void deliver(const Transfer& t, double now) {
    const uint32_t* consumer = w_.consumers.data() + t.consumers_begin;
    for (const uint32_t* end = consumer + t.copy_refs; consumer != end; ++consumer)
      if (--ops_[*consumer].pending == 0) make_ready(*consumer, now);
    OpState& p = ops_[t.producer];
    release_if(--p.output_refs == 0, p.device, p.output_bytes, now, t.producer);
  }

  void finish_copy(uint32_t x, double now) {
    const Transfer& t = xfers_[x];
    const DeviceId d = static_cast<DeviceId>(t.next);
    if (g_.shared[d]) [[unlikely]] {
      settle(d, now);
      record_shared_end(t.queue, now);
    }
    w_.slot_busy[t.queue] = 0;
    clear_leaf(t.queue);
    ++devs_[d].free_slots;
    mark_dirty(d);
    deliver(t, now);
  }

  void finish_transfer(uint32_t x, double now) {
    const Transfer& t = xfers_[x];
    const uint32_t next = t.next;
    const uint32_t leaf = queue_leaf(t.queue);
    deliver(t, now);

    // x heads its first hop's queue; hand the queue's leaf to the next transfer.
    w_.queues[t.queue].head = next;
    if (next == kNoTransfer) {
      clear_leaf(leaf);
      return;
    }
    // Its successor in the queue finishes next of the queue (FIFO: it ends no earlier than x).
    set_leaf(leaf, Event{xfers_[next].end_s, kTransfer << 32 | next});
  }

  Deciding* const deciding_;
  const FlatGraph& g_;
  SimWorkspace::Impl& w_;
  SimResult& r_;
  const uint32_t nd_;
  const uint32_t nwords_;
  OpState* const ops_;
  DeviceId* const op_dev_;
  DeviceState* const devs_;
  uint32_t* const remote_;
  LinkState* const links_;
  Transfer* const xfers_;
  Event* const tree_;
  const uint32_t num_slots_;
  const uint32_t num_leaves_;
  const uint32_t tree_depth_;
  uint32_t num_transfers_ = 0;
  uint32_t num_consumers_ = 0;  // entries of Impl::consumers in use
  uint32_t finished_ = 0;
  bool any_dirty_ = false;
};

}  // namespace

Simulator::Simulator(const OpGraph& graph, const CostModel& cost) : prepared_(std::make_unique<Prepared>()) {
  sim_detail::prepare(*prepared_, graph, cost);
}

Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

std::size_t Simulator::num_ops() const { return prepared_->num_ops; }
const Machine& Simulator::machine() const { return *prepared_->machine; }

DeviceId Simulator::effective_device(OpId op, DeviceId device) const {
  PLACELAB_CHECK(op < prepared_->num_ops && device < prepared_->num_devices) << "op " << op << ", device " << device;
  return prepared_->effective_device(op, device);
}

double Simulator::op_time_s(OpId op, DeviceId device) const {
  PLACELAB_CHECK(op < prepared_->num_ops && device < prepared_->num_devices) << "op " << op << ", device " << device;
  return prepared_->op_time(op, device);
}

DeviceId Simulator::op_time_representative(DeviceId device) const {
  PLACELAB_CHECK(device < prepared_->num_devices) << "device " << device;
  return prepared_->class_representative[prepared_->cost_class[device]];
}

void Simulator::simulate(std::span<const DeviceId> placement, SimWorkspace& workspace, SimResult& result,
                         const SimOptions& options) const {
  const Prepared& g = *prepared_;
  check_placement(placement, g.num_ops, g.num_devices, "placement");
  SimWorkspace::Impl& w = workspace.impl();
  if (g.eager) {
    sim_detail::simulate_eager(g, placement, w.eager, result, options.record_timeline);
    return;
  }
  w.reserve_for(g);
  if (options.record_timeline)
    Evaluation<true>(g, w, result).run(placement);
  else
    Evaluation<false>(g, w, result).run(placement);
}

SimResult Simulator::simulate(std::span<const DeviceId> placement, const SimOptions& options) const {
  SimWorkspace workspace;
  SimResult result;
  simulate(placement, workspace, result, options);
  return result;
}

void Simulator::simulate_batch(std::span<const Placement> batch, std::span<SimResult> results, int threads) const {
  PLACELAB_CHECK(results.size() == batch.size()) << results.size() << " results for " << batch.size() << " placements";
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::string what = "batch[" + std::to_string(i) + "]";
    check_placement(batch[i], prepared_->num_ops, prepared_->num_devices, what.c_str());
  }
  if (threads < 0 || threads > kMaxBatchThreads)
    throw InputError("threads = " + std::to_string(threads) + ": must be in [0, " + std::to_string(kMaxBatchThreads) +
                     "] (0: one per hardware thread)");
  std::size_t workers = threads > 0 ? static_cast<std::size_t>(threads)
                                    : std::max<std::size_t>(1, std::thread::hardware_concurrency());
  workers = std::min(workers, batch.size());
  if (workers <= 1) {
    SimWorkspace workspace;
    for (std::size_t i = 0; i < batch.size(); ++i) simulate(batch[i], workspace, results[i]);
    return;
  }
  // Dynamic hand-out of indices: each result depends only on its own placement, so which thread
  // computes it cannot change it.
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(workers);
  auto work = [&](std::size_t worker) {
    try {
      SimWorkspace workspace;
      for (std::size_t i = next.fetch_add(1); i < batch.size(); i = next.fetch_add(1))
        simulate(batch[i], workspace, results[i]);
    } catch (...) {
      errors[worker] = std::current_exception();
    }
  };
  run_on_workers(workers, work);
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

DataflowRun simulate_deciding(const Simulator& simulator, DataflowDecider& decider, const DataflowRun* hint) {
  const Simulator::Prepared& g = *simulator.prepared_;
  if (g.eager)
    throw InputError("simulate_deciding: the graph runs eagerly (PyTorch); its schedulers use EagerSchedule");
  PLACELAB_CHECK(hint == nullptr || (hint->placement.size() == g.num_ops && hint->end_s.size() == g.num_ops))
      << "a hint of another graph";
  SimWorkspace workspace;
  SimWorkspace::Impl& w = workspace.impl();
  w.reserve_for(g);
  DataflowRun run;
  Deciding deciding;
  deciding.decider = &decider;
  deciding.hint = hint;
  Evaluation<false, true>(g, w, run.result, &deciding).run({});
  run.placement.assign(w.op_device.begin(), w.op_device.begin() + g.num_ops);
  run.end_s = std::move(deciding.planned_end_s);  // every op has started, so these are real ends
  return run;
}

std::string oom_message(const SimResult& result, const Machine& machine) {
  if (!result.oom) return {};
  PLACELAB_CHECK(result.oom_device < machine.num_devices() && result.oom_device < result.devices.size())
      << "oom_device " << result.oom_device;
  const Device& d = machine.devices[result.oom_device];
  return "out of memory on " + d.name + ": peak " + std::to_string(result.devices[result.oom_device].peak_memory_bytes) +
         " bytes exceeds capacity " + std::to_string(d.memory_bytes) + " bytes by " +
         std::to_string(result.oom_excess_bytes) + " bytes";
}

}  // namespace placelab
