#include "placelab/profiler/gpu_check.h"

#include "placelab/profiler/gpu_backend.h"

#include <sstream>

namespace placelab::gpu {

std::string format_api_error(std::string_view call, long code, std::string_view name, std::string_view description,
                             std::string_view file, int line) {
  // A stream rather than string += chains: GCC 12 reports a false -Wrestrict on the latter.
  std::ostringstream o;
  o << call << " failed: " << name << " (" << code << ")";
  if (!description.empty()) o << ": " << description;
  o << " [" << file << ":" << line << "]";
  return o.str();
}

std::string_view cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

void check_status(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw Error(format_api_error(call, static_cast<long>(status), cudaGetErrorName(status), cudaGetErrorString(status),
                               file, line));
}

void check_status(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(format_api_error(call, static_cast<long>(status), cublas_status_name(status), "", file, line));
}

void check_status(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw Error(format_api_error(call, static_cast<long>(status), "cudnnStatus_t", cudnnGetErrorString(status), file,
                               line));
}

void check_status(CUptiResult status, const char* call, const char* file, int line) {
  if (status == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || !text) text = "";
  throw Error(format_api_error(call, static_cast<long>(status), "CUptiResult", text, file, line));
}

int visible_device_count(std::string* reason) {
  // cudaGetDeviceCount leaves `count` untouched when it fails (no driver: error 35).
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    // Clear the sticky "last error" so later runtime calls do not report it again.
    (void)cudaGetLastError();
    if (reason)
      *reason = no_gpu_message(static_cast<int>(status), cudaGetErrorName(status), cudaGetErrorString(status), 0);
    return 0;
  }
  if (count == 0 && reason) *reason = no_gpu_message(0, "cudaSuccess", "", 0);
  return count;
}

}  // namespace placelab::gpu
