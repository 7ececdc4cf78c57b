// The discrete-event simulator: predicts one training step of an op graph under a placement on
// a machine — step time, per-device busy time and peak memory, per-link traffic, OOM — following
// the semantics in docs/simulator.md. It is the inner loop of every learner, so a Simulator
// prepares flat arrays once per (graph, cost model) and then evaluates placements without heap
// allocation, reusing a SimWorkspace and a SimResult.
//
//   AnalyticCostModel cost(machine);
//   Simulator sim(graph, cost);
//   SimResult r = sim.simulate(placement);            // convenience; allocates
//   SimWorkspace ws;  SimResult out;
//   sim.simulate(placement, ws, out);                  // hot path; no allocation after first use
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/cost_model.h"

namespace placelab {

// Per-call switches of Simulator::simulate.
struct SimOptions {
  // Fill SimResult::timeline and SimResult::memory_timeline (allocates; for traces and plots).
  bool record_timeline = false;
};

// One interval on a resource, for the timeline. Times are seconds from the start of the step.
struct TimelineEvent {
  enum class Kind : uint8_t { kOp, kTransfer };
  Kind kind = Kind::kOp;
  OpId op = 0;              // the op that ran, or the producer whose tensor was sent
  DeviceId device = 0;      // kOp: where it ran (after soft placement); kTransfer: destination
  DeviceId src_device = 0;  // kTransfer: source device; kOp: same as device
  uint16_t stream = 0;      // kOp: compute slot index on the device; kTransfer: 0, or the slot of a device without a copy engine that ran the copy
  double start_s = 0;
  double end_s = 0;
  int64_t bytes = 0;        // kTransfer: bytes sent; kOp: the op's output_bytes
};

// The memory in use on one device right after an allocation or a free, for the timeline. The
// change and the buffer it concerns let an allocator be replayed over the step (sim/allocator.h).
struct MemorySample {
  // `buffer` of the first sample of each device (time 0): its persistent bytes, all at once.
  static constexpr uint32_t kPersistent = UINT32_MAX;
  double time_s = 0;
  DeviceId device = 0;
  int64_t bytes = 0;   // persistent + transient bytes in use on `device` from time_s on
  int64_t change = 0;  // bytes allocated (> 0) or freed (< 0) by this sample
  // An op's output buffer: the op's id; a received copy: num_ops + the transfer's issue index.
  uint32_t buffer = kPersistent;
};

// One span of an eager program's host thread (docs/simulator.md, "Eager execution"): the thread
// issuing `op` (its dispatch cost), or blocked in a synchronous copy for it. Thread 0 is the
// program's main thread; thread 1 + d is autograd's thread for GPU d during the backward.
struct HostEvent {
  OpId op = 0;
  uint32_t thread = 0;
  double start_s = 0;
  double end_s = 0;
};

// What one device did during the step.
struct DeviceStats {
  double busy_s = 0;              // sum of op durations run on the device
  int64_t peak_memory_bytes = 0;  // persistent + peak transient
  int64_t persistent_bytes = 0;   // persistent bytes of the ops run here (after soft placement)
  int32_t num_ops = 0;            // ops run here (after soft placement)
};

// What one link direction carried during the step.
struct LinkStats {
  int64_t bytes = 0;   // bytes carried in this direction
  double busy_s = 0;   // time the direction was held
};

// The outcome of simulating one step. Reused across calls: simulate() overwrites every field.
struct SimResult {
  double step_time_s = 0;             // time at which the last op or transfer finishes
  std::vector<DeviceStats> devices;   // indexed by DeviceId
  std::vector<LinkStats> links;       // indexed by LinkDirection
  int64_t transfers = 0;              // number of cross-device sends
  bool oom = false;                   // some device's peak exceeds its capacity
  DeviceId oom_device = 0;            // the device with the largest excess, when oom
  int64_t oom_excess_bytes = 0;       // by how much it exceeds its capacity, when oom
  std::vector<TimelineEvent> timeline;  // only with SimOptions::record_timeline, by start time
  // Only with SimOptions::record_timeline: every change of a device's memory in use, in the order
  // the simulator applied them (time non-decreasing).
  std::vector<MemorySample> memory_timeline;
  // Eager graphs, with SimOptions::record_timeline only: the host threads' spans, in issue order.
  std::vector<HostEvent> host_timeline;
  // Eager graphs: seconds the host threads spent issuing ops and running CPU ops (all threads).
  double host_busy_s = 0;
};

// "out of memory on gpu:1: peak 13000 bytes exceeds capacity 12000 bytes by 1000 bytes", or ""
// when `result` is not oom. `machine` is the one the result was simulated on.
std::string oom_message(const SimResult& result, const Machine& machine);

// Scratch state of one evaluation; one per thread. Grows on first use, then is reused. Not
// tied to one Simulator: it grows to the largest graph it has seen.
class SimWorkspace {
 public:
  SimWorkspace();
  ~SimWorkspace();
  SimWorkspace(SimWorkspace&&) noexcept;
  SimWorkspace& operator=(SimWorkspace&&) noexcept;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// A graph prepared for simulation on one cost model's machine. Immutable after construction, so
// one Simulator may serve many threads, each with its own SimWorkspace.
class Simulator {
 public:
  // Prepares the flat representation (CSR adjacency, op times per cost class, route table). The
  // graph must be acyclic (throws InputError naming a cycle otherwise). `cost` and its machine
  // must outlive the Simulator; the graph need not (everything needed is copied). Op times are
  // asked once here, for each op on each CostModel::op_time_representatives(graph) device (an op's
  // measured time, Op::measured_s, wins over the model). Throws InputError naming the op and key
  // for a measured time keyed by a device name the machine lacks. Transfer times are tabulated per device pair as latency + bytes × s/byte
  // when CostModel::transfer_time_s is affine in bytes for that pair (checked here at probe
  // sizes); otherwise it is asked during simulate(), from several threads in simulate_batch, so
  // it must be safe to call concurrently (it is const).
  Simulator(const OpGraph& graph, const CostModel& cost);
  ~Simulator();
  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;

  // Simulates one step. `placement` has one device per op (checked: throws InputError). Ops
  // marked cpu_only that are placed on a GPU run on the machine's first CPU (TF soft placement).
  // After the first call with a given workspace and result, allocates nothing unless
  // options.record_timeline.
  void simulate(std::span<const DeviceId> placement, SimWorkspace& workspace, SimResult& result,
                const SimOptions& options = {}) const;
  SimResult simulate(std::span<const DeviceId> placement, const SimOptions& options = {}) const;

  // Simulates every placement of `batch` into results[i] over `threads` threads (0 = hardware
  // concurrency). results.size() must equal batch.size(). Deterministic: independent of threads.
  // Every placement is checked before any is simulated (throws InputError naming its index).
  // threads in [0, kMaxBatchThreads] (0: one per hardware thread), else InputError.
  void simulate_batch(std::span<const Placement> batch, std::span<SimResult> results, int threads = 0) const;
  static constexpr int kMaxBatchThreads = 1024;

  std::size_t num_ops() const;
  const Machine& machine() const;
  // The device `op` runs on when placed on `device`: the machine's first CPU for a cpu_only op
  // placed on a GPU (when the machine has a CPU), else `device`.
  DeviceId effective_device(OpId op, DeviceId device) const;
  // Seconds `op` takes on `device`, as the cost model answered when the Simulator was built.
  double op_time_s(OpId op, DeviceId device) const;
  // The device whose op times `device` shares (CostModel::op_time_representatives of the graph, so
  // a device an op's measured time names is its own): the one the cost model was asked for.
  // Devices with one representative have one kind and equal op_time_s.
  DeviceId op_time_representative(DeviceId device) const;

 private:
  friend class EagerSchedule;  // builds a step op by op on the prepared graph (eager_schedule.h)
  // Runs a dataflow step whose devices are chosen as it runs (dataflow_schedule.h).
  friend struct DataflowRun simulate_deciding(const Simulator& simulator, class DataflowDecider& decider,
                                             const struct DataflowRun* hint);
  struct Prepared;
  std::unique_ptr<Prepared> prepared_;
};

}  // namespace placelab
