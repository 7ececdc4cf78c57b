// TensorFlow's GPU allocator replayed over a simulated step. The simulator's memory rule
// (docs/simulator.md) counts the bytes that are live; TensorFlow's BFC allocator ("best-fit with
// coalescing", tensorflow/core/common_runtime/bfc_allocator.cc) hands out chunks of one region the
// size of its memory limit, and a request fails when no single free chunk fits it, even with
// enough bytes free in pieces. Replaying the step's allocations shows how much that fragmentation
// adds to the peak, and whether a step that fits by liveness fails in TensorFlow.
//
//   SimOptions opts;  opts.record_timeline = true;
//   SimResult r = sim.simulate(placement, opts);
//   BfcOutcome o = replay_bfc(graph, r, gpu, machine.devices[gpu].memory_bytes);
#pragma once

#include <cstdint>

#include "placelab/graph/op_graph.h"
#include "placelab/sim/simulator.h"

namespace placelab {

// What the BFC allocator did on one device over one step.
struct BfcOutcome {
  int64_t peak_bytes = 0;            // peak of the chunk bytes in use, persistent chunks included
  bool fits = true;                  // every request found a free chunk
  double failed_at_s = 0;            // !fits: the time of the first request that failed
  uint32_t failed_buffer = 0;        // !fits: its buffer (MemorySample::buffer; kPersistent: a variable)
  int64_t failed_request_bytes = 0;  // !fits: its size in bytes, as requested
  int64_t free_bytes = 0;            // !fits: bytes free in all chunks at that moment
  int64_t largest_free_chunk = 0;    // !fits: the largest free chunk at that moment
};

// Replays `result`'s allocations and frees on `device` (a simulation with
// SimOptions::record_timeline; Error otherwise) through BFC's rules with a region of
// `capacity_bytes`. The persistent bytes come first, one chunk per op placed there in op id order
// (TensorFlow allocates variables and slots at initialisation, before any step). Rules, as in
// TensorFlow: a request is rounded up to a multiple of 256 bytes and takes the smallest free chunk
// that fits (the lowest address among equals); the chunk is split when the rest would be at least
// as large as the request or at least 128 MiB, and is otherwise handed out whole; a freed chunk
// merges with free neighbours. The replay stops at the first request that fails.
BfcOutcome replay_bfc(const OpGraph& graph, const SimResult& result, DeviceId device, int64_t capacity_bytes);

}  // namespace placelab
