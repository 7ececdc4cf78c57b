// The eager execution model: a PyTorch program as its host threads issue it (docs/simulator.md,
// "Eager execution"). Every resource — a host thread, a GPU's stream, a link direction — serves
// its work in program order, so one pass over the ops in id order settles every time; no event
// queue is needed. Memory follows the host: PyTorch's caching allocator hands a buffer out when the
// op is issued and takes it back when the last reference to the tensor goes, both on the host.
#include <algorithm>
#include <cmath>
#include <utility>

#include "flat_graph.h"
#include "placelab/sim/eager_schedule.h"

namespace placelab::sim_detail {

// The host's program position: the step so far and where the backward pass stands. Kept by the
// caller of EagerPass::issue (a local of the simulator's loop, so that it stays in registers; a
// member of a schedule, which saves and restores it around a probe).
struct EagerClock {
  double step = 0, backward_issued = 0, main_at_backward = 0;
  bool in_backward = false, after_backward = false;
};

// The pass's state and its step: `issue` settles one op given its inputs' devices and times. The
// simulator issues every op in id order with the whole placement known (kFull: memory,
// statistics, timeline too); an EagerSchedule issues ops as a scheduler commits them (timing
// only), so both follow one rule.
template <bool kFull>
class EagerPass {
 public:
  EagerPass(const FlatGraph& g, EagerScratch& w, SimResult& r, bool record) : g_(g), w_(w), r_(r), record_(record) {}

  // Clears the clocks: nothing issued, every resource free at 0.
  void reset() {
    const uint32_t nd = g_.num_devices;
    std::fill_n(w_.stream_free.begin(), nd, 0.0);
    std::fill_n(w_.thread_free.begin(), nd + 1, 0.0);
    std::fill_n(w_.link_free.begin(), g_.num_links, 0.0);
    std::fill_n(w_.link_busy.begin(), g_.num_links, 0.0);
    std::fill_n(w_.link_bytes.begin(), g_.num_links, int64_t{0});
    std::fill_n(w_.launched.begin(), nd, uint32_t{0});
    std::fill_n(w_.thread_head.begin(), nd + 1, kNone);
    std::fill_n(w_.thread_tail.begin(), nd + 1, kNone);
    std::fill_n(w_.transient.begin(), nd, int64_t{0});
    std::fill_n(w_.peak.begin(), nd, int64_t{0});
    num_changes_ = 0;
    num_transfers_ = 0;
  }

  void run(std::span<const DeviceId> placement) {
    const uint32_t n = g_.num_ops;
    reset();
    for (uint32_t op = 0; op < n; ++op) {
      const DeviceId d = g_.effective_device(op, placement[op]);
      w_.device[op] = d;
      w_.first_transfer[op] = kNone;
      w_.refs[op] = g_.data_consumers[op];
      r_.devices[d].persistent_bytes += g_.persistent_bytes[op];
      ++r_.devices[d].num_ops;
    }
    EagerClock clock;
    for (uint32_t op = 0; op < n; ++op) issue(op, clock);
    double step = clock.step;
    for (uint32_t x = 0; x < num_transfers_; ++x) step = std::max(step, w_.transfers[x].end_s);
    r_.step_time_s = step;
    r_.transfers = num_transfers_;
    for (uint32_t l = 0; l < g_.num_links; ++l) r_.links[l] = LinkStats{w_.link_bytes[l], w_.link_busy[l]};
    settle_changes();
    settle_memory(g_, r_, [&](uint32_t dev) { return w_.peak[dev]; });
    if (record_)
      std::stable_sort(r_.timeline.begin(), r_.timeline.end(),
                       [](const TimelineEvent& a, const TimelineEvent& b) { return a.start_s < b.start_s; });
  }

  uint32_t& num_transfers() { return num_transfers_; }
  uint32_t num_transfers() const { return num_transfers_; }

  // The copy of `producer`'s output to `dst` issued so far, or kNone.
  uint32_t find_transfer(uint32_t producer, DeviceId dst) const {
    for (uint32_t x = w_.first_transfer[producer]; x != kNone; x = w_.transfers[x].next)
      if (w_.transfers[x].dst == dst) return x;
    return kNone;
  }

  // Issues `op` on w_.device[op], its inputs issued before: the host thread's dispatch, its input
  // copies, its kernel (or its CPU work). Returns when its work starts on its device; w_.end_s[op]
  // holds when it ends.
  [[gnu::always_inline]] double issue(uint32_t op, EagerClock& c) {
    const DeviceId d = w_.device[op];
    if (g_.state[op]) {
      // A parameter or buffer: there before the step, issued by nobody, no work on its device.
      w_.issued_s[op] = 0;
      w_.end_s[op] = 0;
      if (record_) r_.timeline.push_back({TimelineEvent::Kind::kOp, op, d, d, 0, 0, 0, g_.ops[op].output_bytes});
      if (kFull && w_.refs[op] != 0) change(0, w_.thread_free[0], d, g_.ops[op].output_bytes, op);
      return 0;
    }
    const bool gpu = g_.device_is_gpu[d];
    const bool backward = g_.backward[op];
    // Autograd's engine runs a GPU's backward nodes on a thread of that GPU; everything else is
    // the program's main thread. backward() returns when every node has been issued.
    const uint32_t thread = backward && gpu ? 1 + d : 0;
    if (backward && !c.in_backward) {
      c.in_backward = true;
      c.main_at_backward = w_.thread_free[0];
    }
    if (!backward && c.in_backward) {
      c.after_backward = true;
      c.in_backward = false;
    }
    double t = w_.thread_free[thread];
    if (backward) t = std::max(t, c.main_at_backward);
    if (c.after_backward && !backward) t = std::max(t, c.backward_issued);

    // A tensor is used after the host made it; a control edge orders the device work as well.
    double ready = 0;
    const uint32_t in_begin = g_.ops[op].in_begin, in_end = g_.ops[op].in_end;
    for (uint32_t k = in_begin; k < in_end; ++k) {
      const uint32_t p = g_.in[k].src;
      t = std::max(t, w_.issued_s[p]);
      if (!g_.in[k].data || w_.device[p] == d) ready = std::max(ready, w_.end_s[p]);
    }
    // Remote inputs: the copy to d, issued at the first consumer on d (a `.to(device)` there).
    for (uint32_t k = in_begin; k < in_end; ++k) {
      if (!g_.in[k].data) continue;
      const uint32_t p = g_.in[k].src;
      if (w_.device[p] == d) continue;
      const uint32_t x = transfer_to(p, d, t, thread, op);
      w_.in_transfer[k] = x;
      ready = std::max(ready, w_.transfers[x].end_s);
    }

    // Issue the op: the host's dispatch cost, then the kernel on the stream (a GPU) or the op
    // itself on the host thread (a CPU).
    const double dispatch = g_.dispatch_s[op];
    const double work = g_.op_time(op, d);
    const double host_start = t;
    t += dispatch;
    double start = 0, end = 0;
    if (gpu) {
      // The launch queue is full while the kernel launched kLaunchQueueDepth before has not run.
      double* ring = w_.launch_ring.data() + std::size_t{d} * kLaunchQueueDepth;
      const uint32_t slot = w_.launched[d] % kLaunchQueueDepth;
      if (w_.launched[d] >= kLaunchQueueDepth) t = std::max(t, ring[slot]);
      start = std::max({t, w_.stream_free[d], ready});
      end = start + work;
      w_.stream_free[d] = end;
      ring[slot] = end;
      ++w_.launched[d];
      w_.thread_free[thread] = t;
    } else {
      start = std::max(t, ready);
      end = start + work;
      w_.thread_free[thread] = end;
      r_.host_busy_s += work;
    }
    r_.host_busy_s += dispatch;
    w_.issued_s[op] = t;
    w_.end_s[op] = end;
    if (backward) c.backward_issued = std::max(c.backward_issued, w_.thread_free[thread]);
    c.step = std::max(c.step, end);
    r_.devices[d].busy_s += work;
    if (record_) {
      r_.host_timeline.push_back({op, thread, host_start, t});
      r_.timeline.push_back({TimelineEvent::Kind::kOp, op, d, d, 0, start, end, g_.ops[op].output_bytes});
    }
    if constexpr (!kFull) return start;

    // Memory at the issue: the output first, then what this op was the last user of.
    change(thread, t, d, g_.ops[op].output_bytes, op);
    for (uint32_t k = in_begin; k < in_end; ++k) {
      if (!g_.in[k].data) continue;
      const uint32_t p = g_.in[k].src;
      if (w_.device[p] != d) {
        const uint32_t x = w_.in_transfer[k];
        if (--w_.transfers[x].refs == 0) change(thread, t, d, -g_.ops[p].send_bytes, g_.num_ops + x);
      }
      if (--w_.refs[p] == 0) change(thread, t, w_.device[p], -g_.ops[p].output_bytes, p);
    }
    if (w_.refs[op] == 0) change(thread, t, d, -g_.ops[op].output_bytes, op);
    return start;
  }

 private:
  // The copy of `producer`'s output to `dst`, issued now by `thread` (whose clock `t` it may
  // advance) unless an earlier consumer on dst issued it. PyTorch copies between GPUs on the
  // source's stream, after the destination's stream has run what it was given and before it
  // runs anything more (both streams are held); a copy to or from host memory blocks the host.
  uint32_t transfer_to(uint32_t producer, DeviceId dst, double& t, uint32_t thread, uint32_t consumer) {
    if (const uint32_t x = find_transfer(producer, dst); x != kNone) return x;
    const DeviceId src = w_.device[producer];
    const std::size_t pair_index = std::size_t{src} * g_.num_devices + dst;
    const PairInfo& pair = g_.pairs[pair_index];
    const std::span<const LinkDirection> route = g_.route(pair_index);
    const int64_t bytes = g_.ops[producer].send_bytes;
    const double host_start = t;
    t += g_.copy_dispatch_s;
    double start = std::max(t, w_.end_s[producer]);
    const bool src_gpu = g_.device_is_gpu[src], dst_gpu = g_.device_is_gpu[dst];
    if (src_gpu) start = std::max(start, w_.stream_free[src]);
    if (dst_gpu) start = std::max(start, w_.stream_free[dst]);
    for (const LinkDirection l : route) start = std::max(start, w_.link_free[l]);
    const double duration = transfer_duration(g_, pair, bytes, src, dst);
    const double end = start + duration;
    for (const LinkDirection l : route) {
      w_.link_free[l] = end;
      w_.link_busy[l] += duration;
      w_.link_bytes[l] += bytes;
    }
    if (src_gpu) w_.stream_free[src] = end;
    if (dst_gpu) w_.stream_free[dst] = end;
    if (!src_gpu || !dst_gpu) t = end;  // to or from host memory: synchronous for the host
    r_.host_busy_s += t - host_start;
    // Readers on dst, for the free at the last of them: the whole placement is known only to the
    // simulator (a schedule decides later readers later, and times nothing by memory).
    int32_t refs = 0;
    if constexpr (kFull)
      for (uint32_t k = g_.ops[producer].out_begin; k < g_.ops[producer].out_end; ++k)
        refs += g_.out[k].data && w_.device[g_.out[k].dst] == dst;
    const uint32_t x = num_transfers_++;
    w_.transfers[x] = EagerTransfer{dst, refs, w_.first_transfer[producer], end};
    w_.first_transfer[producer] = x;
    change(thread, t, dst, bytes, g_.num_ops + x);
    if (record_) {
      r_.timeline.push_back({TimelineEvent::Kind::kTransfer, producer, dst, src, 0, start, end, bytes});
      r_.host_timeline.push_back({consumer, thread, host_start, t});
    }
    return x;
  }

  // A change of `device`'s memory by `bytes` at host time `time_s` on `thread` (each thread's
  // changes come in time order; settle_changes merges the threads).
  void change(uint32_t thread, double time_s, DeviceId device, int64_t bytes, uint32_t buffer) {
    if (bytes == 0 || !kFull) return;
    const uint32_t c = num_changes_++;
    w_.changes[c] = MemoryChange{time_s, bytes, buffer, device, kNone};
    if (w_.thread_tail[thread] == kNone)
      w_.thread_head[thread] = c;
    else
      w_.changes[w_.thread_tail[thread]].next = c;
    w_.thread_tail[thread] = c;
  }

  // Applies the memory changes in time order (program order among equal times): a merge of the
  // threads' lists, each already in order. Usually one or two threads hold changes.
  void settle_changes() {
    const uint32_t nt = g_.num_devices + 1;
    if (record_) record_persistent_samples(g_, r_);
    uint32_t* active = w_.active_threads.data();
    uint32_t num_active = 0;
    for (uint32_t th = 0; th < nt; ++th)
      if (w_.thread_head[th] != kNone) active[num_active++] = th;
    while (num_active > 0) {
      uint32_t pick = 0;
      for (uint32_t i = 1; i < num_active; ++i) {
        const MemoryChange& a = w_.changes[w_.thread_head[active[i]]];
        const MemoryChange& b = w_.changes[w_.thread_head[active[pick]]];
        if (a.time_s < b.time_s || (a.time_s == b.time_s && w_.thread_head[active[i]] < w_.thread_head[active[pick]]))
          pick = i;
      }
      uint32_t& head = w_.thread_head[active[pick]];
      const MemoryChange& m = w_.changes[head];
      head = m.next;
      if (head == kNone) active[pick] = active[--num_active];
      const int64_t in_use = (w_.transient[m.device] += m.change);
      w_.peak[m.device] = std::max(w_.peak[m.device], in_use);
      if (record_)
        r_.memory_timeline.push_back(
            {m.time_s, m.device, r_.devices[m.device].persistent_bytes + in_use, m.change, m.buffer});
    }
  }

  const FlatGraph& g_;
  EagerScratch& w_;
  SimResult& r_;
  const bool record_;
  uint32_t num_changes_ = 0;
  uint32_t num_transfers_ = 0;
};

void simulate_eager(const FlatGraph& g, std::span<const DeviceId> placement, EagerScratch& scratch, SimResult& r,
                    bool record) {
  scratch.reserve_for(g);
  reset_result(g, r);
  EagerPass<true>(g, scratch, r, record).run(placement);
}

}  // namespace placelab::sim_detail

namespace placelab {

using sim_detail::EagerPass;
using sim_detail::kNone;
using sim_detail::kLaunchQueueDepth;

struct EagerSchedule::Impl {
  const sim_detail::FlatGraph& g;
  sim_detail::EagerScratch w;
  SimResult r;  // the pass's statistics land here; a schedule reports only times
  EagerPass<false> pass;
  sim_detail::EagerClock clock;
  Placement placement;
  std::vector<uint8_t> done;
  uint32_t next = 0;  // the lowest-id uncommitted op that is not a parameter (num_ops: none)
  // A probe's undo: the clocks its issue may move (where, and what was there), and per in-edge of
  // the probed op its producer's transfer list. Only what one issue touches, so that a probe costs
  // the op's inputs and routes, not the machine's size.
  std::vector<std::pair<double*, double>> saved_clocks;
  std::vector<uint32_t> saved_first;

  explicit Impl(const sim_detail::FlatGraph& graph)
      : g(graph), pass(g, w, r, /*record=*/false), placement(graph.num_ops, 0), done(graph.num_ops, 0) {
    w.reserve_for(g);
    sim_detail::reset_result(g, r);
    pass.reset();
    std::fill_n(w.first_transfer.begin(), g.num_ops, kNone);
    advance();
  }

  void advance() {
    while (next < g.num_ops && (done[next] || g.state[next])) ++next;
  }

  void check_order(OpId op, const char* what) const {
    PLACELAB_CHECK(op < g.num_ops) << what << " of op " << op << " of " << g.num_ops;
    PLACELAB_CHECK(!done[op]) << what << " of op " << op << ", committed already";
    PLACELAB_CHECK(g.state[op] || op == next)
        << what << " of op " << op << " out of program order: op " << next << " comes first";
  }

  // Issues `op` on `device`, parameters it reads that nobody placed brought along to its device.
  Times issue(uint32_t op, DeviceId device) {
    const DeviceId d = g.effective_device(op, device);
    w.device[op] = d;
    placement[op] = d;
    Times t;
    const uint32_t in_begin = g.ops[op].in_begin, in_end = g.ops[op].in_end;
    for (uint32_t k = in_begin; k < in_end; ++k) {
      const uint32_t p = g.in[k].src;
      if (done[p]) continue;
      PLACELAB_CHECK(g.state[p]) << "op " << op << " reads op " << p << ", which is not committed";
      w.device[p] = g.effective_device(p, d);
      placement[p] = w.device[p];
      pass.issue(p, clock);
    }
    // The copies this issue sends: one per remote producer not yet on d (it may read one twice).
    for (uint32_t k = in_begin; k < in_end; ++k) {
      const uint32_t p = g.in[k].src;
      if (!g.in[k].data || w.device[p] == d || pass.find_transfer(p, d) != kNone) continue;
      bool seen = false;
      for (uint32_t j = in_begin; j < k && !seen; ++j) seen = g.in[j].data && g.in[j].src == p;
      if (!seen) t.copy_bytes += g.ops[p].send_bytes;
    }
    t.start_s = pass.issue(op, clock);
    t.end_s = w.end_s[op];
    return t;
  }

  Times probe(uint32_t op, DeviceId device) {
    check_order(op, "probe");
    const DeviceId d = g.effective_device(op, device);
    const sim_detail::EagerClock saved_clock = clock;
    const uint32_t transfers = pass.num_transfers();
    const uint32_t launched = w.launched[d];
    // The issue moves: the thread that issues op (main, or autograd's thread of d), d's stream and
    // the launch-queue slot op's kernel takes, and per copy it sends the source's stream and the
    // route's link directions.
    saved_clocks.clear();
    auto save = [&](double& clock_s) { saved_clocks.emplace_back(&clock_s, clock_s); };
    save(w.thread_free[0]);
    save(w.thread_free[1 + d]);
    save(w.stream_free[d]);
    save(w.launch_ring[std::size_t{d} * kLaunchQueueDepth + launched % kLaunchQueueDepth]);
    const uint32_t in_begin = g.ops[op].in_begin, in_end = g.ops[op].in_end;
    saved_first.resize(in_end - in_begin);
    for (uint32_t k = in_begin; k < in_end; ++k) {
      const uint32_t p = g.in[k].src;
      saved_first[k - in_begin] = w.first_transfer[p];
      // Where p is (a parameter nobody placed comes along to d, as issue() places it).
      const DeviceId src = done[p] ? w.device[p] : g.effective_device(p, d);
      if (!g.in[k].data || src == d) continue;
      save(w.stream_free[src]);
      for (const LinkDirection l : g.route(std::size_t{src} * g.num_devices + d)) save(w.link_free[l]);
    }

    const Times t = issue(op, device);

    for (auto it = saved_clocks.rbegin(); it != saved_clocks.rend(); ++it) *it->first = it->second;
    for (uint32_t k = in_begin; k < in_end; ++k) {
      const uint32_t p = g.in[k].src;
      w.first_transfer[p] = saved_first[k - in_begin];
      if (!done[p]) placement[p] = 0;  // a parameter brought along only for the probe
    }
    w.launched[d] = launched;
    pass.num_transfers() = transfers;
    clock = saved_clock;
    placement[op] = 0;
    return t;
  }

  Times commit(uint32_t op, DeviceId device) {
    check_order(op, "commit");
    const Times t = issue(op, device);
    for (uint32_t k = g.ops[op].in_begin; k < g.ops[op].in_end; ++k) done[g.in[k].src] = 1;
    done[op] = 1;
    advance();
    return t;
  }
};

EagerSchedule::EagerSchedule(const Simulator& simulator) {
  const sim_detail::FlatGraph& g = *simulator.prepared_;
  if (!g.eager) throw InputError("an eager schedule needs an eager graph (PyTorch's execution); this one is dataflow");
  impl_ = std::make_unique<Impl>(g);
}

EagerSchedule::~EagerSchedule() = default;
EagerSchedule::EagerSchedule(EagerSchedule&&) noexcept = default;
EagerSchedule& EagerSchedule::operator=(EagerSchedule&&) noexcept = default;

EagerSchedule::Times EagerSchedule::probe(OpId op, DeviceId device) {
  PLACELAB_CHECK(device < impl_->g.num_devices) << "device " << device;
  return impl_->probe(op, device);
}

EagerSchedule::Times EagerSchedule::commit(OpId op, DeviceId device) {
  PLACELAB_CHECK(device < impl_->g.num_devices) << "device " << device;
  return impl_->commit(op, device);
}

bool EagerSchedule::committed(OpId op) const { return op < impl_->g.num_ops && impl_->done[op]; }

bool EagerSchedule::is_parameter(OpId op) const { return op < impl_->g.num_ops && impl_->g.state[op]; }

DeviceId EagerSchedule::device(OpId op) const {
  PLACELAB_CHECK(committed(op)) << "op " << op << " is not committed";
  return impl_->w.device[op];
}

double EagerSchedule::makespan_s() const {
  double step = impl_->clock.step;
  for (uint32_t x = 0; x < impl_->pass.num_transfers(); ++x) step = std::max(step, impl_->w.transfers[x].end_s);
  return step;
}

const Placement& EagerSchedule::placement() const { return impl_->placement; }

}  // namespace placelab
