// libplacelab_gpu.so: the GPU backends behind the C entry point that gpu_backend.cpp loads.
#include <exception>

#include "placelab/core/error.h"
#include "placelab/profiler/gpu_backend.h"

namespace {

using placelab::detail::GpuBackendError;

// Runs `f`, turning what it throws into `error` (no exception may leave the module).
template <typename F>
void guarded(GpuBackendError& error, F&& f) noexcept {
  try {
    f();
  } catch (const placelab::InputError& e) {
    error = {GpuBackendError::kInput, e.what()};
  } catch (const std::exception& e) {
    error = {GpuBackendError::kOther, e.what()};
  } catch (...) {
    error = {GpuBackendError::kOther, "unknown exception in the GPU backend"};
  }
}

void calibrate(const placelab::GpuCalibrationOptions& options, placelab::CalibrationResult& out,
               GpuBackendError& error) {
  guarded(error, [&] { out = placelab::calibrate_cupti(options); });
}

void run(const placelab::OpGraph& graph, const placelab::Machine& machine, std::span<const placelab::DeviceId> placement,
         const placelab::CudaExecutorOptions& options, placelab::ExecutionResult& out, GpuBackendError& error) {
  guarded(error, [&] { out = placelab::CudaExecutor(graph, machine, options).run(placement); });
}

constexpr placelab::detail::GpuBackendTable kTable{placelab::detail::kGpuBackendVersion, calibrate, run};

}  // namespace

extern "C" __attribute__((visibility("default"))) const placelab::detail::GpuBackendTable* placelab_gpu_backend_v1() {
  return &kTable;
}
