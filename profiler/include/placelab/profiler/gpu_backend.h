// The GPU backends (CUPTI calibration, the CUDA executor) live in a loadable module,
// libplacelab_gpu.so, which alone links the CUDA libraries: a command that uses no GPU — every
// command but `calibrate --backend cupti` and `verify --backend cuda` — then starts without
// mapping ~230 MB of cuDNN, cuBLAS and CUPTI. These functions load the module on first use and
// forward to calibrate_cupti and CudaExecutor (cupti_calibrator.h, cuda_executor.h).
//
//   CalibrationResult r = calibrate_gpu(options);   // InputError when no module or no GPU
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "placelab/profiler/cuda_executor.h"
#include "placelab/profiler/cupti_calibrator.h"

namespace placelab {

// Where the module is looked for: $PLACELAB_GPU_BACKEND when set, else next to the running
// executable, else ../lib/placelab/ beside it (the install layout). Empty when none exists.
std::string gpu_backend_path();

// The one message of a GPU command on a machine where no GPU can be used: "no GPU found: " with
// what was looked for (CUDA devices through cudaGetDeviceCount, CUDA_VISIBLE_DEVICES when set) and
// what answered, in words first. `status` and its name and description are cudaGetDeviceCount's;
// `count` the devices it reported when it succeeded. Plain C++, so the CPU tests check it.
std::string no_gpu_message(int status, std::string_view status_name, std::string_view description, int count);

// calibrate_cupti(options) in the module. Throws InputError when the module cannot be found or
// loaded (the message says where it looked and why), or what calibrate_cupti throws.
CalibrationResult calibrate_gpu(const GpuCalibrationOptions& options);

// CudaExecutor(graph, machine, options).run(placement) in the module; the same errors.
ExecutionResult run_on_gpu(const OpGraph& graph, const Machine& machine, std::span<const DeviceId> placement,
                           const CudaExecutorOptions& options);

namespace detail {

// The module's C entry point (`placelab_gpu_backend_v1`) returns this table. Its functions never
// throw: an exception is caught in the module and handed back as (kind, message), and rethrown on
// this side, so no C++ exception crosses the library boundary.
struct GpuBackendError {
  enum Kind : int { kNone = 0, kInput = 1, kOther = 2 } kind = kNone;
  std::string message;
};
struct GpuBackendTable {
  int version;  // kGpuBackendVersion: the layout of this table and of the structs it passes
  void (*calibrate)(const GpuCalibrationOptions& options, CalibrationResult& out, GpuBackendError& error);
  void (*run)(const OpGraph& graph, const Machine& machine, std::span<const DeviceId> placement,
              const CudaExecutorOptions& options, ExecutionResult& out, GpuBackendError& error);
};
inline constexpr int kGpuBackendVersion = 1;

}  // namespace detail
}  // namespace placelab
