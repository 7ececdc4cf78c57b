// The simulator's kernel: the flat graph built once per (graph, cost model), the per-thread
// workspace, and the event loop. The rules it implements are docs/simulator.md; the comments
// here explain how, and why the data is laid out the way it is (no allocation per evaluation).
#include "placelab/sim/simulator.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <exception>
#include <limits>
#include <string>
#include <thread>

#include "placelab/graph/error.h"

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

// Everything an evaluation reads, flattened once so the hot loop touches only contiguous arrays.
struct FlatGraph {
  const CostModel* cost = nullptr;
  const Machine* machine = nullptr;
  uint32_t num_ops = 0;
  uint32_t num_devices = 0;
  uint32_t num_links = 0;         // link directions
  uint32_t num_data_edges = 0;    // bounds the number of transfers of one evaluation
  std::vector<uint32_t> out_off;  // num_ops + 1
  std::vector<OutEdge> out;
  std::vector<uint32_t> in_off;   // num_ops + 1
  std::vector<InEdge> in;
  std::vector<double> op_time_s;  // op * num_devices + device
  std::vector<int64_t> output_bytes;
  std::vector<int64_t> persistent_bytes;
  std::vector<int64_t> send_bytes;  // wire size of the op's output: max bytes of its data edges
  std::vector<uint8_t> cpu_only;
  std::vector<uint8_t> device_is_gpu;
  bool has_cpu = false;
  DeviceId default_cpu = 0;
  std::vector<uint32_t> route_off;  // (src * num_devices + dst) → range in route_hops
  std::vector<LinkDirection> route_hops;
  // Per device pair: transfer time = latency + bytes × seconds_per_byte when the cost model is
  // affine for that pair (checked at probe sizes), which saves a virtual call per transfer;
  // otherwise the cost model is asked for every transfer.
  std::vector<uint8_t> copy_affine;
  std::vector<double> copy_latency_s, copy_s_per_byte;
  std::vector<uint32_t> slot_off;   // device → first compute slot; num_devices + 1 entries
  std::vector<int64_t> capacity_bytes;

  DeviceId effective_device(uint32_t op, DeviceId device) const {
    return (cpu_only[op] && device_is_gpu[device] && has_cpu) ? default_cpu : device;
  }
};

// An entry of the event queue, ordered by (time, key) with key = kind << 32 | id: the fixed
// processing order at one instant that determinism and the memory rules rely on. For an op
// finish the id is the op; for a transfer it is 2 × transfer + (0 start, 1 finish), so transfer
// events at one instant go in issue order, a transfer's start before its finish.
// Times are never negative, and the bit patterns of non-negative doubles order like the values,
// so (time, key) packs into one 128-bit integer compared without branches.
struct Event {
  unsigned __int128 order = 0;

  Event() = default;
  Event(double time, uint64_t key)
      : order(static_cast<unsigned __int128>(std::bit_cast<uint64_t>(time + 0.0)) << 64 | key) {}
  double time() const { return std::bit_cast<double>(static_cast<uint64_t>(order >> 64)); }
  uint64_t key() const { return static_cast<uint64_t>(order); }
};

// Event kinds in processing order at one instant.
constexpr uint64_t kOpFinish = 0;
constexpr uint64_t kTransfer = 1;

// An entry of a device's ready queue.
struct ReadyOp {
  double time;
  uint32_t op;
};

inline bool before(const Event& a, const Event& b) { return a.order < b.order; }

// Binary min-heap on storage the caller sized in advance: no allocation, no bounds growth. It
// holds at most slots + link directions entries, so operations are a few levels deep.
template <typename T>
inline void heap_push(T* heap, uint32_t& size, T value) {
  uint32_t i = size++;
  while (i > 0) {
    uint32_t parent = (i - 1) / 2;
    if (!before(value, heap[parent])) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = value;
}

template <typename T>
inline T heap_pop(T* heap, uint32_t& size) {
  T top = heap[0];
  const uint32_t n = --size;
  if (n == 0) return top;
  T last = heap[n];
  uint32_t i = 0;
  for (;;) {
    uint32_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(heap[child + 1], heap[child])) ++child;
    if (!before(heap[child], last)) break;
    heap[i] = heap[child];
    i = child;
  }
  heap[i] = last;
  return top;
}

// Grows `v` to at least `size` elements; never shrinks, so a reused workspace stops allocating.
template <typename T>
void grow(std::vector<T>& v, std::size_t size) {
  if (v.size() < size) v.resize(size);
}

}  // namespace sim_detail

using sim_detail::Event;
using sim_detail::grow;
using sim_detail::FlatGraph;
using sim_detail::ReadyOp;

struct Simulator::Prepared : FlatGraph {};

// Per-evaluation state. Arrays are sized for the largest graph and machine seen so far.
struct SimWorkspace::Impl {
  // Per op.
  std::vector<DeviceId> device;      // effective device (after soft placement)
  std::vector<uint32_t> pending;     // in-edges not yet satisfied
  std::vector<int32_t> output_refs;  // local data consumers + outgoing transfers still to finish
  std::vector<uint16_t> slot;        // compute slot the op runs on
  // Per in-edge: the transfer whose received copy feeds this edge (remote data edges only).
  std::vector<uint32_t> in_transfer;
  // Per device, segments of one array: ready queues. Ops become ready at non-decreasing times
  // and each op enters its device's queue once, so a queue is a FIFO over its segment (sized by
  // the ops placed there) whose tail is kept sorted by id among ops ready at the same time.
  std::vector<ReadyOp> ready;
  std::vector<uint32_t> ready_head, ready_tail;
  // The event heap: running ops' finishes (at most one per compute slot) and the next event of
  // each non-empty transfer queue (at most one per link direction).
  std::vector<Event> events;
  // Per transfer (at most one per data edge).
  std::vector<uint32_t> transfer_producer;
  std::vector<DeviceId> transfer_dst;
  std::vector<int32_t> copy_refs;  // consumer edges on the destination still to finish
  std::vector<double> transfer_start_s, transfer_end_s;
  std::vector<uint32_t> transfer_next;  // next transfer in the same first-hop queue
  // Per link direction: when its FIFO is free again, and the queue of transfers whose route
  // starts with it. Transfers sharing a first hop start and finish in issue order (each starts
  // no earlier than the previous one ends), so only a queue's head needs a place in the heap.
  std::vector<double> link_free_s;
  std::vector<uint32_t> queue_head, queue_tail;
  // Per compute slot / device.
  std::vector<uint8_t> slot_busy;
  std::vector<uint32_t> free_slots;
  std::vector<int64_t> transient_bytes, peak_transient_bytes;
  std::vector<uint8_t> dirty;
  std::vector<DeviceId> dirty_list;
  // Per-producer scratch for grouping its remote consumers by device; zero between producers.
  std::vector<uint32_t> dest_edges;
  std::vector<uint32_t> dest_transfer;
  std::vector<DeviceId> dest_list;

  void reserve_for(const FlatGraph& g) {
    const std::size_t n = g.num_ops, nd = g.num_devices;
    grow(device, n);
    grow(pending, n);
    grow(output_refs, n);
    grow(slot, n);
    grow(in_transfer, g.in.size());
    grow(ready, n);
    grow(ready_head, nd);
    grow(ready_tail, nd);
    grow(events, std::size_t{g.slot_off[nd]} + g.num_links + 1);
    grow(transfer_producer, g.num_data_edges);
    grow(transfer_dst, g.num_data_edges);
    grow(copy_refs, g.num_data_edges);
    grow(transfer_start_s, g.num_data_edges);
    grow(transfer_end_s, g.num_data_edges);
    grow(transfer_next, g.num_data_edges);
    grow(link_free_s, g.num_links);
    grow(queue_head, g.num_links);
    grow(queue_tail, g.num_links);
    grow(slot_busy, g.slot_off[nd]);
    grow(free_slots, nd);
    grow(transient_bytes, nd);
    grow(peak_transient_bytes, nd);
    grow(dirty, nd);
    grow(dirty_list, nd);
    grow(dest_edges, nd);
    grow(dest_transfer, nd);
    grow(dest_list, nd);
  }
};

SimWorkspace::SimWorkspace() : impl_(std::make_unique<Impl>()) {}
SimWorkspace::~SimWorkspace() = default;
SimWorkspace::SimWorkspace(SimWorkspace&&) noexcept = default;
SimWorkspace& SimWorkspace::operator=(SimWorkspace&&) noexcept = default;

namespace {

using sim_detail::heap_pop;
using sim_detail::heap_push;
using sim_detail::kOpFinish;
using sim_detail::kTransfer;

constexpr uint32_t kNoTransfer = std::numeric_limits<uint32_t>::max();

// Insertion sort for the handful of device ids a producer or an instant touches.
void sort_small(DeviceId* ids, uint32_t count) {
  if (count < 2) return;
  for (uint32_t i = 1; i < count; ++i) {
    DeviceId v = ids[i];
    uint32_t j = i;
    for (; j > 0 && ids[j - 1] > v; --j) ids[j] = ids[j - 1];
    ids[j] = v;
  }
}

// One evaluation: binds the flat graph, the workspace and the result for the event loop.
// kRecord (SimOptions::record_timeline) is a template parameter so that the hot path carries no
// timeline branches at all.
template <bool kRecord>
class Evaluation {
 public:
  Evaluation(const FlatGraph& g, SimWorkspace::Impl& w, SimResult& r) : g_(g), w_(w), r_(r), nd_(g.num_devices) {}

  void run(std::span<const DeviceId> placement) {
    const uint32_t n = g_.num_ops;
    r_.devices.resize(nd_);
    r_.links.resize(g_.num_links);
    std::fill(r_.devices.begin(), r_.devices.end(), DeviceStats{});
    std::fill(r_.links.begin(), r_.links.end(), LinkStats{});
    r_.step_time_s = 0;
    r_.transfers = 0;
    r_.oom = false;
    r_.oom_device = 0;
    r_.oom_excess_bytes = 0;
    r_.timeline.clear();
    r_.memory_timeline.clear();

    for (uint32_t d = 0; d < nd_; ++d) {
      w_.ready_tail[d] = 0;
      w_.free_slots[d] = g_.slot_off[d + 1] - g_.slot_off[d];
      w_.transient_bytes[d] = 0;
      w_.peak_transient_bytes[d] = 0;
      w_.dirty[d] = 0;
      w_.dest_edges[d] = 0;
    }
    std::fill_n(w_.slot_busy.begin(), g_.slot_off[nd_], uint8_t{0});
    std::fill_n(w_.link_free_s.begin(), g_.num_links, 0.0);
    std::fill_n(w_.queue_head.begin(), g_.num_links, kNoTransfer);

    // Effective devices, ready-queue segment sizes and persistent memory.
    for (uint32_t op = 0; op < n; ++op) {
      DeviceId d = g_.effective_device(op, placement[op]);
      w_.device[op] = d;
      w_.pending[op] = g_.in_off[op + 1] - g_.in_off[op];
      ++w_.ready_tail[d];  // counted here, turned into segment offsets below
      r_.devices[d].persistent_bytes += g_.persistent_bytes[op];
    }
    uint32_t off = 0;
    for (uint32_t d = 0; d < nd_; ++d) {
      const uint32_t count = w_.ready_tail[d];
      w_.ready_head[d] = w_.ready_tail[d] = off;
      off += count;
    }
    if constexpr (kRecord)
      for (uint32_t d = 0; d < nd_; ++d)
        r_.memory_timeline.push_back({0.0, static_cast<DeviceId>(d), r_.devices[d].persistent_bytes});

    num_events_ = 0;
    num_transfers_ = 0;
    finished_ = 0;
    for (uint32_t op = 0; op < n; ++op)
      if (w_.pending[op] == 0) make_ready(op, 0.0);
    dispatch_dirty(0.0);

    double now = 0;
    while (has_events()) {
      now = next_time();
      // Everything that happens at `now` first, then the dispatch: so that ops made ready at one
      // instant compete by id, and frees at an instant precede the allocations of new starts.
      do {
        const Event e = pop_event();
        const auto id = static_cast<uint32_t>(e.key() & 0xffffffffu);
        if ((e.key() >> 32) == kOpFinish) {
          finish_op(id, now);
        } else if ((id & 1) == 0) {
          start_transfer(id >> 1, now);
        } else {
          finish_transfer(id >> 1, now);
        }
      } while (has_events() && next_time() == now);
      dispatch_dirty(now);
    }
    PLACELAB_CHECK(finished_ == n) << "only " << finished_ << " of " << n << " ops ran";
    r_.step_time_s = now;
    r_.transfers = num_transfers_;

    int64_t worst = 0;
    for (uint32_t d = 0; d < nd_; ++d) {
      DeviceStats& s = r_.devices[d];
      s.peak_memory_bytes = s.persistent_bytes + w_.peak_transient_bytes[d];
      int64_t excess = s.peak_memory_bytes - g_.capacity_bytes[d];
      if (excess > worst) {
        worst = excess;
        r_.oom = true;
        r_.oom_device = static_cast<DeviceId>(d);
        r_.oom_excess_bytes = excess;
      }
    }
    if constexpr (kRecord)
      std::stable_sort(r_.timeline.begin(), r_.timeline.end(),
                       [](const TimelineEvent& a, const TimelineEvent& b) { return a.start_s < b.start_s; });
  }

 private:
  // The event queue is the heap plus one "hot" slot holding the smallest event pushed since the
  // last pop that came from it. Handling an event often schedules the very next one (a transfer
  // queue's next start, a finish soon after a start); that one then skips the heap entirely.
  // The minimum is always min(hot, heap top), so the processing order is exactly the heap's.
  void push_event(double time, uint64_t kind, uint32_t id) {
    const Event e{time, kind << 32 | id};
    if (!has_hot_) {
      hot_ = e;
      has_hot_ = true;
    } else if (sim_detail::before(e, hot_)) {
      heap_push(w_.events.data(), num_events_, hot_);
      hot_ = e;
    } else {
      heap_push(w_.events.data(), num_events_, e);
    }
  }
  bool has_events() const { return has_hot_ || num_events_ > 0; }
  bool hot_is_next() const { return has_hot_ && (num_events_ == 0 || sim_detail::before(hot_, w_.events[0])); }
  double next_time() const { return hot_is_next() ? hot_.time() : w_.events[0].time(); }
  Event pop_event() {
    if (hot_is_next()) {
      has_hot_ = false;
      return hot_;
    }
    return heap_pop(w_.events.data(), num_events_);
  }

  void allocate(DeviceId d, int64_t bytes, double now) {
    if (bytes == 0) return;
    int64_t in_use = (w_.transient_bytes[d] += bytes);
    if (in_use > w_.peak_transient_bytes[d]) w_.peak_transient_bytes[d] = in_use;
    if constexpr (kRecord) r_.memory_timeline.push_back({now, d, r_.devices[d].persistent_bytes + in_use});
  }

  void release(DeviceId d, int64_t bytes, double now) {
    if (bytes == 0) return;
    int64_t in_use = (w_.transient_bytes[d] -= bytes);
    if constexpr (kRecord) r_.memory_timeline.push_back({now, d, r_.devices[d].persistent_bytes + in_use});
  }

  void mark_dirty(DeviceId d) {
    if (!w_.dirty[d]) {
      w_.dirty[d] = 1;
      w_.dirty_list[num_dirty_++] = d;
    }
  }

  // Appends `op` to its device's FIFO; among ops ready at the same time, smaller ids go first.
  void make_ready(uint32_t op, double now) {
    const DeviceId d = w_.device[op];
    ReadyOp* queue = w_.ready.data();
    const uint32_t head = w_.ready_head[d];
    uint32_t i = w_.ready_tail[d]++;
    for (; i > head && queue[i - 1].time == now && queue[i - 1].op > op; --i) queue[i] = queue[i - 1];
    queue[i] = ReadyOp{now, op};
    mark_dirty(d);
  }

  // Starts ready ops on the free slots of every device touched since the last dispatch, in
  // device-id order.
  [[gnu::always_inline]] void dispatch_dirty(double now) {
    sort_small(w_.dirty_list.data(), num_dirty_);
    for (uint32_t i = 0; i < num_dirty_; ++i) {
      DeviceId d = w_.dirty_list[i];
      w_.dirty[d] = 0;
      dispatch(d, now);
    }
    num_dirty_ = 0;
  }

  void dispatch(DeviceId d, double now) {
    while (w_.free_slots[d] > 0 && w_.ready_head[d] < w_.ready_tail[d]) {
      const uint32_t op = w_.ready[w_.ready_head[d]++].op;
      const uint32_t first = g_.slot_off[d];
      uint32_t s = first;
      while (w_.slot_busy[s]) ++s;  // lowest free slot; a free one exists (free_slots > 0)
      w_.slot_busy[s] = 1;
      --w_.free_slots[d];
      w_.slot[op] = static_cast<uint16_t>(s - first);
      const double duration = g_.op_time_s[std::size_t{op} * nd_ + d];
      allocate(d, g_.output_bytes[op], now);
      DeviceStats& stats = r_.devices[d];
      stats.busy_s += duration;
      ++stats.num_ops;
      push_event(now + duration, kOpFinish, op);
      if constexpr (kRecord) {
        r_.timeline.push_back({TimelineEvent::Kind::kOp, op, d, d, static_cast<uint16_t>(s - first), now,
                               now + duration, g_.output_bytes[op]});
      }
    }
  }

  void finish_op(uint32_t op, double now) {
    const DeviceId d = w_.device[op];
    w_.slot_busy[g_.slot_off[d] + w_.slot[op]] = 0;
    ++w_.free_slots[d];
    mark_dirty(d);
    ++finished_;

    // Successors: local data edges and every control edge are satisfied now; remote data edges
    // are grouped by destination device, one transfer each.
    const uint32_t out_begin = g_.out_off[op], out_end = g_.out_off[op + 1];
    int32_t refs = 0;
    uint32_t num_dest = 0;
    for (uint32_t k = out_begin; k < out_end; ++k) {
      const sim_detail::OutEdge& e = g_.out[k];
      const DeviceId dc = w_.device[e.dst];
      if (!e.data || dc == d) {
        if (e.data) ++refs;
        if (--w_.pending[e.dst] == 0) make_ready(e.dst, now);
      } else if (w_.dest_edges[dc]++ == 0) {
        w_.dest_list[num_dest++] = dc;
      }
    }
    if (num_dest > 0) {
      sort_small(w_.dest_list.data(), num_dest);
      for (uint32_t i = 0; i < num_dest; ++i) send(op, d, w_.dest_list[i], now);
      for (uint32_t k = out_begin; k < out_end; ++k) {
        const sim_detail::OutEdge& e = g_.out[k];
        const DeviceId dc = w_.device[e.dst];
        if (e.data && dc != d) w_.in_transfer[e.in_pos] = w_.dest_transfer[dc];
      }
      for (uint32_t i = 0; i < num_dest; ++i) w_.dest_edges[w_.dest_list[i]] = 0;
    }
    refs += static_cast<int32_t>(num_dest);
    w_.output_refs[op] = refs;
    if (refs == 0) release(d, g_.output_bytes[op], now);

    // Inputs: this consumer no longer needs them.
    for (uint32_t k = g_.in_off[op], end = g_.in_off[op + 1]; k < end; ++k) {
      const sim_detail::InEdge& e = g_.in[k];
      if (!e.data) continue;
      if (w_.device[e.src] == d) {
        if (--w_.output_refs[e.src] == 0) release(d, g_.output_bytes[e.src], now);
      } else {
        const uint32_t x = w_.in_transfer[k];
        if (--w_.copy_refs[x] == 0) release(d, g_.send_bytes[e.src], now);
      }
    }
  }

  // Issues the transfer of `producer`'s output to `dst`. Links are FIFO resources reserved at
  // issue time: the transfer starts once every hop of its route is free and holds all of them.
  void send(uint32_t producer, DeviceId src, DeviceId dst, double now) {
    const uint32_t x = num_transfers_++;
    w_.transfer_producer[x] = producer;
    w_.transfer_dst[x] = dst;
    w_.copy_refs[x] = static_cast<int32_t>(w_.dest_edges[dst]);
    w_.dest_transfer[dst] = x;

    const int64_t bytes = g_.send_bytes[producer];
    const std::size_t pair = std::size_t{src} * nd_ + dst;
    const double duration = g_.copy_affine[pair]
                                ? g_.copy_latency_s[pair] + static_cast<double>(bytes) * g_.copy_s_per_byte[pair]
                                : g_.cost->transfer_time_s(bytes, src, dst);
    // The event order and the per-link FIFO reasoning need finite, non-negative durations.
    PLACELAB_CHECK(duration >= 0 && duration < std::numeric_limits<double>::infinity())
        << g_.cost->describe() << ": transfer_time_s(" << bytes << ", " << src << ", " << dst << ") = " << duration;
    const LinkDirection* hop = g_.route_hops.data() + g_.route_off[pair];
    const LinkDirection* hop_end = g_.route_hops.data() + g_.route_off[pair + 1];
    double start = now;
    for (const LinkDirection* h = hop; h != hop_end; ++h) start = std::max(start, w_.link_free_s[*h]);
    const double end = start + duration;
    for (const LinkDirection* h = hop; h != hop_end; ++h) {
      w_.link_free_s[*h] = end;
      LinkStats& link = r_.links[*h];
      link.bytes += bytes;
      link.busy_s += duration;
    }
    w_.transfer_start_s[x] = start;
    w_.transfer_end_s[x] = end;
    w_.transfer_next[x] = kNoTransfer;
    const LinkDirection queue = *hop;
    if (w_.queue_head[queue] == kNoTransfer) {
      w_.queue_head[queue] = x;
      push_event(start, kTransfer, 2 * x);
    } else {
      w_.transfer_next[w_.queue_tail[queue]] = x;
    }
    w_.queue_tail[queue] = x;
    if constexpr (kRecord) r_.timeline.push_back({TimelineEvent::Kind::kTransfer, producer, dst, src, 0, start, end, bytes});
  }

  void start_transfer(uint32_t x, double now) {
    allocate(w_.transfer_dst[x], g_.send_bytes[w_.transfer_producer[x]], now);
    push_event(w_.transfer_end_s[x], kTransfer, 2 * x + 1);
  }

  void finish_transfer(uint32_t x, double now) {
    const uint32_t producer = w_.transfer_producer[x];
    const DeviceId dst = w_.transfer_dst[x];
    // x heads its first hop's queue; hand the heap slot to the next transfer of that queue.
    if (const uint32_t next = w_.transfer_next[x]; next != kNoTransfer) {
      w_.queue_head[route_first_hop(producer, dst)] = next;
      push_event(w_.transfer_start_s[next], kTransfer, 2 * next);
    } else {
      w_.queue_head[route_first_hop(producer, dst)] = kNoTransfer;
    }
    for (uint32_t k = g_.out_off[producer], end = g_.out_off[producer + 1]; k < end; ++k) {
      const sim_detail::OutEdge& e = g_.out[k];
      if (e.data && w_.device[e.dst] == dst && --w_.pending[e.dst] == 0) make_ready(e.dst, now);
    }
    if (--w_.output_refs[producer] == 0) release(w_.device[producer], g_.output_bytes[producer], now);
  }

  LinkDirection route_first_hop(uint32_t producer, DeviceId dst) const {
    return g_.route_hops[g_.route_off[std::size_t{w_.device[producer]} * nd_ + dst]];
  }

  const FlatGraph& g_;
  SimWorkspace::Impl& w_;
  SimResult& r_;
  const uint32_t nd_;
  uint32_t num_events_ = 0;
  Event hot_;
  bool has_hot_ = false;
  uint32_t num_transfers_ = 0;
  uint32_t num_dirty_ = 0;
  uint32_t finished_ = 0;
};

}  // namespace

Simulator::Simulator(const OpGraph& graph, const CostModel& cost) : prepared_(std::make_unique<Prepared>()) {
  (void)graph.topological_order();  // throws InputError naming the ops of a cycle
  Prepared& g = *prepared_;
  const Machine& machine = cost.machine();
  PLACELAB_CHECK(machine.num_devices() > 0) << "machine '" << machine.name << "' has no devices";
  PLACELAB_CHECK(graph.num_ops() < std::numeric_limits<uint32_t>::max()) << graph.num_ops() << " ops";
  // Transfer event ids are 2 × transfer + 1 in 32 bits.
  PLACELAB_CHECK(graph.num_edges() < std::numeric_limits<uint32_t>::max() / 2) << graph.num_edges() << " edges";
  g.cost = &cost;
  g.machine = &machine;
  g.num_ops = static_cast<uint32_t>(graph.num_ops());
  g.num_devices = static_cast<uint32_t>(machine.num_devices());
  g.num_links = static_cast<uint32_t>(machine.num_link_directions());
  const uint32_t n = g.num_ops, nd = g.num_devices;

  // CSR adjacency. The in-edge array is filled while walking out-edges, so each out-edge knows
  // the position of its twin in-edge.
  g.out_off.assign(n + 1, 0);
  g.in_off.assign(n + 1, 0);
  for (OpId op = 0; op < n; ++op) {
    g.out_off[op + 1] = g.out_off[op] + static_cast<uint32_t>(graph.out_degree(op));
    g.in_off[op + 1] = g.in_off[op] + static_cast<uint32_t>(graph.in_degree(op));
  }
  g.out.resize(g.out_off[n]);
  g.in.resize(g.in_off[n]);
  g.send_bytes.assign(n, 0);
  std::vector<uint32_t> in_fill(g.in_off.begin(), g.in_off.end() - 1);
  for (OpId op = 0; op < n; ++op) {
    uint32_t k = g.out_off[op];
    graph.for_each_out_edge(op, [&](OpId dst, const Tensor& t) {
      PLACELAB_CHECK(t.bytes >= 0) << "edge " << graph.op(op).name << " -> " << graph.op(dst).name
                                   << " has bytes = " << t.bytes;
      const bool data = !t.control;
      const uint32_t pos = in_fill[dst]++;
      g.in[pos] = {op, data};
      g.out[k++] = {dst, pos, data};
      if (data) {
        ++g.num_data_edges;
        g.send_bytes[op] = std::max(g.send_bytes[op], t.bytes);
      }
    });
  }

  g.op_time_s.resize(std::size_t{n} * nd);
  g.output_bytes.resize(n);
  g.persistent_bytes.resize(n);
  g.cpu_only.resize(n);
  for (OpId op = 0; op < n; ++op) {
    const Op& o = graph.op(op);
    PLACELAB_CHECK(o.output_bytes >= 0 && o.persistent_bytes >= 0)
        << "op " << o.name << ": output_bytes = " << o.output_bytes << ", persistent_bytes = " << o.persistent_bytes;
    g.output_bytes[op] = o.output_bytes;
    g.persistent_bytes[op] = o.persistent_bytes;
    g.cpu_only[op] = o.cpu_only ? 1 : 0;
    for (DeviceId d = 0; d < nd; ++d) {
      const double t = cost.op_time_s(o, d);
      PLACELAB_CHECK(t >= 0 && std::isfinite(t)) << cost.describe() << ": op_time_s(" << o.name << ", "
                                                 << machine.devices[d].name << ") = " << t;
      g.op_time_s[std::size_t{op} * nd + d] = t;
    }
  }

  g.device_is_gpu.resize(nd);
  g.slot_off.assign(nd + 1, 0);
  g.capacity_bytes.resize(nd);
  for (DeviceId d = 0; d < nd; ++d) {
    const Device& dev = machine.devices[d];
    PLACELAB_CHECK(dev.streams >= 1 && dev.streams <= std::numeric_limits<uint16_t>::max())
        << dev.name << ".streams = " << dev.streams;
    g.device_is_gpu[d] = dev.kind == DeviceKind::kGpu ? 1 : 0;
    g.slot_off[d + 1] = g.slot_off[d] + static_cast<uint32_t>(dev.streams);
    g.capacity_bytes[d] = dev.memory_bytes;
  }
  if (auto cpu = machine.default_cpu()) {
    g.has_cpu = true;
    g.default_cpu = *cpu;
  }

  g.route_off.assign(std::size_t{nd} * nd + 1, 0);
  g.copy_affine.assign(std::size_t{nd} * nd, 0);
  g.copy_latency_s.assign(std::size_t{nd} * nd, 0.0);
  g.copy_s_per_byte.assign(std::size_t{nd} * nd, 0.0);
  for (DeviceId s = 0; s < nd; ++s) {
    for (DeviceId t = 0; t < nd; ++t) {
      const std::size_t pair = std::size_t{s} * nd + t;
      if (s != t) {
        const Route& r = machine.route(s, t);
        PLACELAB_CHECK(!r.hops.empty()) << "no hops from " << machine.devices[s].name << " to " << machine.devices[t].name;
        g.route_hops.insert(g.route_hops.end(), r.hops.begin(), r.hops.end());
        // Affine check: the line through 0 and 2^34 bytes must reproduce the model at every probe
        // size to 1e-12 relative (far below any modelling error); else ask per transfer.
        constexpr double kFar = 17179869184.0;  // 2^34 bytes: dividing by it is exact
        const double latency = cost.transfer_time_s(0, s, t);
        const double per_byte = (cost.transfer_time_s(static_cast<int64_t>(kFar), s, t) - latency) / kFar;
        bool affine = latency >= 0 && per_byte >= 0 && std::isfinite(latency) && std::isfinite(per_byte);
        for (int64_t probe : {int64_t{1}, int64_t{1000}, int64_t{4096}, int64_t{1} << 20, int64_t{123456789},
                              int64_t{1} << 30}) {
          const double exact = cost.transfer_time_s(probe, s, t);
          const double line = latency + static_cast<double>(probe) * per_byte;
          affine = affine && std::abs(exact - line) <= 1e-12 * std::abs(exact);
        }
        g.copy_affine[pair] = affine ? 1 : 0;
        g.copy_latency_s[pair] = latency;
        g.copy_s_per_byte[pair] = per_byte;
      }
      g.route_off[pair + 1] = static_cast<uint32_t>(g.route_hops.size());
    }
  }
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
  return prepared_->op_time_s[std::size_t{op} * prepared_->num_devices + device];
}

void Simulator::simulate(std::span<const DeviceId> placement, SimWorkspace& workspace, SimResult& result,
                         const SimOptions& options) const {
  const Prepared& g = *prepared_;
  check_placement(placement, g.num_ops, g.num_devices, "placement");
  SimWorkspace::Impl& w = workspace.impl();
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
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (std::size_t k = 1; k < workers; ++k) pool.emplace_back(work, k);
  work(0);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
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
