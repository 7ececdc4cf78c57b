// The eager execution model: a PyTorch program as its host threads issue it (docs/simulator.md,
// "Eager execution"). Every resource — a host thread, a GPU's stream, a link direction — serves
// its work in program order, so one pass over the ops in id order settles every time; no event
// queue is needed. Memory follows the host: PyTorch's caching allocator hands a buffer out when the
// op is issued and takes it back when the last reference to the tensor goes, both on the host.
#include <algorithm>
#include <cmath>

#include "flat_graph.h"

namespace placelab::sim_detail {

namespace {

class EagerPass {
 public:
  EagerPass(const FlatGraph& g, EagerScratch& w, SimResult& r, bool record) : g_(g), w_(w), r_(r), record_(record) {}

  void run(std::span<const DeviceId> placement) {
    const uint32_t n = g_.num_ops, nd = g_.num_devices;
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
    for (uint32_t op = 0; op < n; ++op) {
      const DeviceId d = g_.effective_device(op, placement[op]);
      w_.device[op] = d;
      w_.first_transfer[op] = kNone;
      w_.refs[op] = g_.data_consumers[op];
      r_.devices[d].persistent_bytes += g_.persistent_bytes[op];
      ++r_.devices[d].num_ops;
    }

    double step = 0, backward_issued = 0, main_at_backward = 0;
    bool in_backward = false, after_backward = false;
    for (uint32_t op = 0; op < n; ++op) {
      const DeviceId d = w_.device[op];
      if (g_.state[op]) {
        // A parameter or buffer: there before the step, issued by nobody, no work on its device.
        w_.issued_s[op] = 0;
        w_.end_s[op] = 0;
        if (record_) r_.timeline.push_back({TimelineEvent::Kind::kOp, op, d, d, 0, 0, 0, g_.ops[op].output_bytes});
        if (w_.refs[op] == 0) continue;
        change(0, w_.thread_free[0], d, g_.ops[op].output_bytes, op);
        continue;
      }
      const bool gpu = g_.device_is_gpu[d];
      const bool backward = g_.backward[op];
      // Autograd's engine runs a GPU's backward nodes on a thread of that GPU; everything else is
      // the program's main thread. backward() returns when every node has been issued.
      const uint32_t thread = backward && gpu ? 1 + d : 0;
      if (backward && !in_backward) {
        in_backward = true;
        main_at_backward = w_.thread_free[0];
      }
      if (!backward && in_backward) {
        after_backward = true;
        in_backward = false;
      }
      double t = w_.thread_free[thread];
      if (backward) t = std::max(t, main_at_backward);
      if (after_backward && !backward) t = std::max(t, backward_issued);

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
      const double work = g_.op_time_s[std::size_t{op} * g_.num_cost_classes + g_.cost_class[d]];
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
      if (backward) backward_issued = std::max(backward_issued, w_.thread_free[thread]);
      step = std::max(step, end);
      r_.devices[d].busy_s += work;
      if (record_) {
        r_.host_timeline.push_back({op, thread, host_start, t});
        r_.timeline.push_back({TimelineEvent::Kind::kOp, op, d, d, 0, start, end, g_.ops[op].output_bytes});
      }

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
    }
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

 private:
  // The copy of `producer`'s output to `dst`, issued now by `thread` (whose clock `t` it may
  // advance) unless an earlier consumer on dst issued it. PyTorch copies between GPUs on the
  // source's stream, after the destination's stream has run what it was given and before it
  // runs anything more (both streams are held); a copy to or from host memory blocks the host.
  uint32_t transfer_to(uint32_t producer, DeviceId dst, double& t, uint32_t thread, uint32_t consumer) {
    for (uint32_t x = w_.first_transfer[producer]; x != kNone; x = w_.transfers[x].next)
      if (w_.transfers[x].dst == dst) return x;
    const DeviceId src = w_.device[producer];
    const PairInfo& pair = g_.pairs[std::size_t{src} * g_.num_devices + dst];
    const int64_t bytes = g_.ops[producer].send_bytes;
    const double host_start = t;
    t += g_.copy_dispatch_s;
    double start = std::max(t, w_.end_s[producer]);
    const bool src_gpu = g_.device_is_gpu[src], dst_gpu = g_.device_is_gpu[dst];
    if (src_gpu) start = std::max(start, w_.stream_free[src]);
    if (dst_gpu) start = std::max(start, w_.stream_free[dst]);
    for (uint32_t h = pair.hop_begin; h < pair.hop_end; ++h) start = std::max(start, w_.link_free[g_.route_hops[h]]);
    const double duration = transfer_duration(g_, pair, bytes, src, dst);
    const double end = start + duration;
    for (uint32_t h = pair.hop_begin; h < pair.hop_end; ++h) {
      const LinkDirection l = g_.route_hops[h];
      w_.link_free[l] = end;
      w_.link_busy[l] += duration;
      w_.link_bytes[l] += bytes;
    }
    if (src_gpu) w_.stream_free[src] = end;
    if (dst_gpu) w_.stream_free[dst] = end;
    if (!src_gpu || !dst_gpu) t = end;  // to or from host memory: synchronous for the host
    r_.host_busy_s += t - host_start;
    int32_t refs = 0;
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
    if (bytes == 0) return;
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

}  // namespace

void simulate_eager(const FlatGraph& g, std::span<const DeviceId> placement, EagerScratch& scratch, SimResult& r,
                    bool record) {
  scratch.reserve_for(g);
  reset_result(g, r);
  EagerPass(g, scratch, r, record).run(placement);
}

}  // namespace placelab::sim_detail
