// The dataflow event loop's state records (private to sim/): the event order, and the per-op,
// per-transfer, per-device, per-link and per-queue records an evaluation works on. Their layout is
// the event loop's speed (simulator.cpp explains the loop; the comments here, the records).
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "placelab/graph/placement.h"

namespace placelab {
namespace sim_detail {

// An entry of the event queue, ordered by (time, key) with key = kind << 32 | id: the fixed
// processing order at one instant that determinism and the memory rules rely on. For an op
// finish the id is the op; for a transfer finish (or the finish of a copy run by its destination
// device, kCopyFinish) it is the transfer, so transfer finishes at one instant go in issue order. (A transfer's start needs no event: its received copy is allocated
// when it is issued, and its links were reserved then.)
// Times are never negative, and the bit patterns of non-negative doubles order like the values,
// so (time, key) packs into one 128-bit integer compared without branches. Keys are unique, so
// the order is total and any correct priority queue pops the same sequence.
struct Event {
  unsigned __int128 order = 0;

  Event() = default;
  Event(double time, uint64_t key)
      : order(static_cast<unsigned __int128>(std::bit_cast<uint64_t>(time + 0.0)) << 64 | key) {}
  double time() const { return std::bit_cast<double>(static_cast<uint64_t>(order >> 64)); }
  uint64_t key() const { return static_cast<uint64_t>(order); }
};

// "No event": all ones, above every real event (real times are finite, so their top bits are
// below the NaN pattern). Empty leaves of the event tree hold it.
inline constexpr unsigned __int128 kNoEvent = ~static_cast<unsigned __int128>(0);

// "None" for transfer indices, queue heads and slots held in uint32_t.
inline constexpr uint32_t kNoTransfer = ~uint32_t{0};

// Event kinds in processing order at one instant.
constexpr uint64_t kOpFinish = 0;
constexpr uint64_t kTransfer = 1;
constexpr uint64_t kCopyFinish = 2;  // a copy run by its destination device (PairInfo::by_device)

// An entry of a device's ready queue.
struct ReadyOp {
  double time;
  uint32_t op;
};

inline bool before(const Event& a, const Event& b) { return a.order < b.order; }

// Grows `v` to at least `size` elements; never shrinks, so a reused workspace stops allocating.
template <typename T>
void grow(std::vector<T>& v, std::size_t size) {
  if (v.size() < size) v.resize(size);
}

// State of one op during an evaluation, in one 32-byte record (aligned, so one cache line):
// everything read when the op is readied, started or finished, or its output released. Ops are
// touched in an order unrelated to their ids, so each separate per-op array would cost a cache
// miss per access; the duration and output size on its device are copied in for that reason
// (in one sequential pass when the evaluation starts).
struct alignas(32) OpState {
  uint32_t pending;      // in-edges not yet satisfied
  int32_t output_refs;   // local data consumers + outgoing transfers still to finish
  DeviceId device;       // effective device (after soft placement)
  uint16_t slot;         // compute slot the op runs on
  double duration_s;     // op time on `device`
  int64_t output_bytes;  // OpInfo::output_bytes
};

// One transfer (at most one per data edge), in one record. A copy run by its destination device
// (PairInfo::by_device) uses the fields differently until it starts: end_s holds its ready time
// (its issue), `next` links the device's copy queue; once started, `queue` is the compute slot it
// runs on and `next` its device.
struct Transfer {
  double end_s;
  int64_t bytes;           // on the wire (the producer's send_bytes), allocated when issued
  uint32_t producer;
  uint32_t next;           // next transfer in the same first-hop queue
  int32_t copy_refs;       // consumer edges on the destination still to finish
  uint32_t queue;          // the queue of its route's first hop, where it waits
  // Its consumer edges' ops: [consumers_begin, consumers_begin + copy_refs) of Impl::consumers.
  // (When the transfer finishes, copy_refs still counts them all: none can have started.)
  uint32_t consumers_begin;
};

// Per device.
struct DeviceState {
  // Ready queue: a segment [ready_head, ready_tail) of Impl::ready (see there).
  uint32_t ready_head;
  uint32_t ready_tail;
  uint32_t free_slots;
  // Per-producer scratch for grouping its remote consumers by device: edge count (zero between
  // producers), the transfer to this device, and the next free place in its consumer list.
  uint32_t dest_edges;
  uint32_t dest_transfer;
  uint32_t dest_fill;
  // Copies waiting to run on this device (by_device pairs): a FIFO of transfers in issue order,
  // linked through Transfer::next; kNoTransfer when empty.
  uint32_t copy_head;
  uint32_t copy_tail;
  int64_t transient_bytes;
  int64_t peak_transient_bytes;
  // A shared device (FlatGraph::shared): when the work left of its ops in flight
  // (Impl::remaining_s) was last brought up to date.
  double since_s;
};

// Per link direction: its FIFO free time and its traffic so far (copied to SimResult::links at
// the end).
struct LinkState {
  double free_s;
  double busy_s;
  int64_t bytes;
};

// The queue of transfers whose route starts with one link direction. Transfers sharing a first
// hop start and finish in issue order (each starts no earlier than the previous one ends), so
// only a queue's head needs a leaf in the event tree.
struct QueueState {
  uint32_t head;
  uint32_t tail;
};

}  // namespace sim_detail

}  // namespace placelab
