// The CPU executor: runs a placed op graph for real on this machine's cores. Every op runs a real
// Eigen kernel of its signature (cpu_kernels.h) on a worker thread of its device (one worker per
// device stream, pinned to the device's cores); a tensor that crosses devices is really copied
// (memcpy from a buffer first touched by the source device into one first touched by the
// destination), once per (producer, destination device) as the simulator models it; an op starts
// when all its inputs are on its device. Steps repeat; the first is dropped as warm-up.
//
//   CpuExecutor exec(graph, machine, {.steps = 11});
//   ExecutionResult r = exec.run(placement);    // r.step_time_s, r.device_busy_s …
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/machine.h"
#include "placelab/profiler/cpu_kernels.h"
#include "placelab/sim/environment.h"

namespace placelab {

// The steps of one measured run, the rule every executor and measurement shares (CPU and CUDA
// executors, in-situ calibration, `verify --steps`, a scenario's `verify.steps`, the torch
// backend): the first step is warm-up and dropped, so at least 2; at most kMaxMeasuredSteps, a
// bound on how long one run may take. Throws InputError "<what> = N: must be in [2, 10000] …".
inline constexpr int64_t kMaxMeasuredSteps = 10'000;
void check_measured_steps(int64_t steps, const std::string& what);

struct CpuExecutorOptions {
  int steps = 11;  // steps to run (≥ 2); the first is warm-up and excluded from the mean
  // Cores of each machine device, indexed by DeviceId (a calibration's DeviceCalibration::cores).
  // Empty: cpu::default_device_cores(machine.num_devices()).
  std::vector<std::vector<int>> device_cores;
  int64_t max_kernel_bytes = cpu::kDefaultMaxKernelBytes;  // per op's kernel buffers
  // All buffers of one run together (kernels + copies); 0 = half of the physical memory.
  int64_t max_total_bytes = 0;
  // Also time every kernel with the thread's CPU clock (ExecutionResult::device_busy_cpu_s): on a
  // busy machine it tells model error from time lost to other processes. Costs two system calls
  // per op, so off by default.
  bool measure_cpu_time = false;
  // An idle worker polls its device's ready queue this long before it sleeps on a condition
  // variable, as a GPU stream polls its work queue: an input that arrives from another device
  // then starts its consumer in ~0.1 µs instead of a thread wake-up (tens of µs on a VM), which
  // no accelerator pays and the simulator does not model. 20 ms outlasts the gaps inside a step
  // of the graphs verified here; with 100 µs, placements with ~1,000 cross-device tensors ran
  // 10-25 % slower than predicted on the development VM (docs/reproductions.md). 0 = sleep at once.
  double spin_s = 20e-3;
  // Throws InputError naming the field: steps < 2, byte limits ≤ 0 (other than the 0 default),
  // spin_s outside [0, 1], an empty core set or a negative core number.
  void validate() const;
};

struct ExecutionResult {
  bool oom = false;                 // some device's buffers exceed its Device::memory_bytes; nothing ran
  std::string oom_message;          // which device and by how much, when oom
  double step_time_s = 0;           // mean over the steps after the first
  std::vector<double> step_times_s; // every step, the warm-up first
  std::vector<double> device_busy_s;   // per device: mean per step of its kernel time (copies excluded)
  std::vector<double> device_copy_s;   // per device: mean per step of the copies it received
  // Per device: mean per step of its kernels' thread CPU time; only with measure_cpu_time.
  std::vector<double> device_busy_cpu_s;
  int64_t copies_per_step = 0;         // cross-device sends in one step
  int64_t copy_bytes_per_step = 0;
  // The last step's timeline, seconds from the step's start, indexed by OpId.
  std::vector<double> op_start_s, op_end_s;
  // Per op (OpId): its kernel's mean time per step over the steps after the first, in the cache
  // and thread conditions of a real step (what in-situ calibration reads).
  std::vector<double> op_time_s;
  bool pinned = false;              // every worker thread got its core affinity
};

class CpuExecutor {
 public:
  // `graph` and `machine` must outlive the executor. Throws InputError when a machine device is
  // not a CPU, when options.device_cores does not match the machine, or when options are invalid.
  CpuExecutor(const OpGraph& graph, const Machine& machine, CpuExecutorOptions options = {});

  // Runs options.steps steps of `placement` (one device per op, checked: InputError). Throws
  // InputError when one op's kernel or all buffers together exceed the executor's byte limits
  // (an absurd signature, not an expected outcome); a placement that exceeds a device's memory
  // is a result (ExecutionResult::oom).
  ExecutionResult run(std::span<const DeviceId> placement) const;

  const std::vector<std::vector<int>>& device_cores() const { return options_.device_cores; }
  const CpuExecutorOptions& options() const { return options_; }

 private:
  const OpGraph* graph_;
  const Machine* machine_;
  CpuExecutorOptions options_;
};

// The executor as a placelab::Environment (source "cpu"), so learners and `placelab verify` can
// measure placements on this machine through the same contract as the simulator.
class CpuExecutorEnvironment : public Environment {
 public:
  CpuExecutorEnvironment(const OpGraph& graph, const Machine& machine, CpuExecutorOptions options = {});
  // Runs each placement in turn; an oom result gives Measurement{.oom = true}.
  std::vector<Measurement> evaluate(std::span<const Placement> placements) override;
  std::string name() const override { return "cpu executor"; }
  // The full result of the last placement evaluated (for reports).
  const ExecutionResult& last_result() const { return last_; }

 private:
  CpuExecutor executor_;
  ExecutionResult last_;
};

}  // namespace placelab
