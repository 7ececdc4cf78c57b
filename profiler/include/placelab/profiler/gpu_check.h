// Error checking for the GPU backends (profiler/cuda): every CUDA runtime, cuBLAS, cuDNN and CUPTI
// call goes through PLACELAB_CUDA_CHECK / PLACELAB_CUPTI_CHECK, which evaluate the call once and
// throw placelab::Error naming the call, the status name and the library's error string. Also the
// device probe that decides whether a GPU backend can run at all. Only GPU code includes this
// header (it pulls in the CUDA headers).
//
//   PLACELAB_CUDA_CHECK(cudaMalloc(&p, bytes));          // throws "cudaMalloc(&p, bytes) failed: …"
//   std::string why;
//   if (visible_device_count(&why) == 0) throw InputError(why);   // "no GPU found: …"
#pragma once

#include <string>
#include <string_view>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cupti.h>

#include "placelab/core/error.h"

namespace placelab::gpu {

// "<call> failed: <name> (<code>): <description> [<file>:<line>]" — the one message format of the
// checks below, factored out so that it is testable without a GPU.
std::string format_api_error(std::string_view call, long code, std::string_view name, std::string_view description,
                             std::string_view file, int line);

// Status names and descriptions per library (cuBLAS has no name function before CUDA 11.4, so
// this file carries its own table).
std::string_view cublas_status_name(cublasStatus_t status);

// Throw placelab::Error with format_api_error when `status` is not the library's success value.
void check_status(cudaError_t status, const char* call, const char* file, int line);
void check_status(cublasStatus_t status, const char* call, const char* file, int line);
void check_status(cudnnStatus_t status, const char* call, const char* file, int line);
void check_status(CUptiResult status, const char* call, const char* file, int line);

// The number of CUDA devices this process sees. When there is none, `reason` (may be null) is
// no_gpu_message's (gpu_backend.h): "no GPU found: looked for CUDA devices with
// cudaGetDeviceCount: no NVIDIA driver is loaded, … (cudaErrorInsufficientDriver, 35: …)" on a
// machine without a driver. Never throws; never calls CUPTI.
int visible_device_count(std::string* reason);

}  // namespace placelab::gpu

// Evaluates `call` (a CUDA runtime, cuBLAS or cuDNN call) once; throws placelab::Error on failure.
#define PLACELAB_CUDA_CHECK(call)                                                \
  do {                                                                           \
    const auto placelab_cuda_status_ = (call);                                   \
    ::placelab::gpu::check_status(placelab_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)

// Evaluates the CUPTI call `call` once; throws placelab::Error on failure.
#define PLACELAB_CUPTI_CHECK(call)                                               \
  do {                                                                           \
    const CUptiResult placelab_cupti_status_ = (call);                           \
    ::placelab::gpu::check_status(placelab_cupti_status_, #call, __FILE__, __LINE__); \
  } while (0)
