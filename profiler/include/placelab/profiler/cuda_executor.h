// The CUDA executor: runs a placed op graph for real on this node's GPUs. Each GPU device of the
// machine gets one compute stream; every op placed there launches a real kernel of its signature
// (the CUPTI backend's kernel runners: cuBLAS, cuDNN, placelab's kernels) on that stream. A tensor
// that crosses devices is really copied once per (producer, destination device), as the simulator
// models it: peer copies between GPUs (cudaMemcpyPeerAsync, peer access enabled where possible),
// staged through pinned host memory to and from a CPU device. Ops placed on a CPU device run the
// CPU backend's Eigen kernels (cpu_kernels.h) as host functions in stream order
// (cudaLaunchHostFunc), so dependencies between CPU and GPU work are cudaEvents too. Step time is
// the cudaEvent time from the step's start to its last op, averaged over the steps after the first.
// Built only with CUDA (placelab::profiler_cuda); it needs a GPU to run.
//
//   CudaExecutor exec(graph, machine, {.steps = 11});
//   ExecutionResult r = exec.run(placement);    // r.step_time_s, r.device_busy_s …
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/machine.h"
#include "placelab/profiler/cpu_executor.h"
#include "placelab/sim/environment.h"

namespace placelab {

struct CudaExecutorOptions {
  int steps = 11;  // steps to run (≥ 2); the first is warm-up and excluded from the mean
  // CUDA device ordinal of each GPU device of the machine, in the machine's device order (the
  // k-th kGpu device uses cuda_devices[k]). Empty: the k-th GPU device is CUDA device k.
  std::vector<int> cuda_devices;
  int64_t max_kernel_bytes = int64_t{2} << 30;  // per op's kernel buffers; above it: InputError
  // Throws InputError naming the field: steps < 2, a negative or repeated CUDA device,
  // max_kernel_bytes ≤ 0.
  void validate() const;
};

// Maps the machine's GPU devices to CUDA ordinals (options.cuda_devices or 0, 1, …), indexed by
// DeviceId; −1 for CPU devices. Throws InputError when the machine has no GPU device or the list
// has the wrong length. Needs no GPU.
std::vector<int> cuda_device_map(const Machine& machine, const CudaExecutorOptions& options);

class CudaExecutor {
 public:
  // `graph` and `machine` must outlive the executor. Throws InputError "no CUDA device: <reason>"
  // when no GPU is usable, or when a mapped CUDA device does not exist; InputError for invalid
  // options or a machine without a GPU device.
  CudaExecutor(const OpGraph& graph, const Machine& machine, CudaExecutorOptions options = {});

  // Runs options.steps steps of `placement` (one device per op, checked: InputError). A placement
  // whose buffers exceed a device's Device::memory_bytes is a result (ExecutionResult::oom);
  // a single op above max_kernel_bytes is an InputError; a failing CUDA call throws Error.
  // ExecutionResult fields: device_busy_s is each device's summed op time per step (cudaEvent
  // times for GPU ops, host clock for CPU ops), device_copy_s the copies it received, and
  // op_start_s/op_end_s the last step's ops relative to their device stream's start of step.
  ExecutionResult run(std::span<const DeviceId> placement) const;

  const CudaExecutorOptions& options() const { return options_; }

 private:
  const OpGraph* graph_;
  const Machine* machine_;
  CudaExecutorOptions options_;
  std::vector<int> cuda_of_device_;  // indexed by DeviceId; −1 for CPU devices
};

// The executor as a placelab::Environment (source "cuda").
class CudaExecutorEnvironment : public Environment {
 public:
  CudaExecutorEnvironment(const OpGraph& graph, const Machine& machine, CudaExecutorOptions options = {});
  // Runs each placement in turn; an oom result gives Measurement{.oom = true}.
  std::vector<Measurement> evaluate(std::span<const Placement> placements) override;
  std::string name() const override { return "cuda executor"; }
  const ExecutionResult& last_result() const { return last_; }

 private:
  CudaExecutor executor_;
  ExecutionResult last_;
};

}  // namespace placelab
