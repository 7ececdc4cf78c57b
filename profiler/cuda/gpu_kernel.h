// One kernel of a given signature on one GPU, with its own device buffers: cuBLAS SGEMM (strided
// batched for batch > 1), cuDNN convolution forward / backward data / backward filter (algorithms
// from the Get*_v7 heuristics), placelab's own kernels (kernels.h) for elementwise, reduction,
// softmax and embedding, and a device-to-device memcpy for the copy class. The CUPTI calibrator
// times these and the CUDA executor runs them, so a measured time and an executed op are the same
// code. Private to profiler/cuda.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "placelab/graph/kernel.h"

namespace placelab::gpu {

// Library handles of one device. Create and use it with that device current (cudaSetDevice).
class DeviceContext {
 public:
  explicit DeviceContext(int device);  // sets `device` current, creates cuBLAS and cuDNN handles
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;
  int device() const { return device_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }

 private:
  int device_;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
};

// Owning device pointer (cudaFree on destruction, errors there ignored: destructors never throw).
struct DeviceBuffer {
  void* ptr = nullptr;
  int64_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t n_bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr, o.bytes = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  float* f() const { return static_cast<float*>(ptr); }
};

class GpuKernel {
 public:
  // Allocates and fills (deterministic pseudo-random values, on `stream`) the buffers of `sig` on
  // ctx's device, which must be current. Throws InputError when the buffers exceed `max_bytes`
  // (the same accounting as cpu::CpuKernel::required_bytes) and Error from a failing CUDA call.
  GpuKernel(const KernelSignature& sig, DeviceContext& ctx, int64_t max_bytes, cudaStream_t stream);
  ~GpuKernel();
  GpuKernel(GpuKernel&&) noexcept;
  GpuKernel& operator=(GpuKernel&&) noexcept;

  // Enqueues one execution on `stream` (ctx's device current). Does not synchronise.
  void launch(cudaStream_t stream);

  const KernelSignature& signature() const { return sig_; }
  int64_t buffer_bytes() const;
  // Device buffers in the order the kernel reads them, and the output; for tests.
  std::vector<const DeviceBuffer*> inputs() const;
  const DeviceBuffer& output() const;

 private:
  struct State;
  KernelSignature sig_;
  std::unique_ptr<State> s_;
};

}  // namespace placelab::gpu
