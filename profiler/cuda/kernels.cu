#include "kernels.h"

#include <algorithm>

#include "placelab/profiler/gpu_check.h"

namespace placelab::gpu {
namespace {

constexpr int kThreads = 256;

// Grid size for a grid-stride loop over n elements; capped so that huge n stays within limits.
unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65535)));
}

__device__ uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

__global__ void fill_kernel(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<float>(hash32(seed ^ hash32(static_cast<uint32_t>(i))) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_indices_kernel(int32_t* p, int64_t n, int64_t rows, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<int32_t>(hash32(seed ^ hash32(static_cast<uint32_t>(i))) % static_cast<uint32_t>(rows));
}

__global__ void elementwise_kernel(int64_t elements, int64_t inputs, const float* in, int64_t distinct, float* out) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < elements; j += int64_t{gridDim.x} * blockDim.x) {
    float acc = 0.5f * in[j];
    for (int64_t i = 1; i < inputs; ++i) acc += in[(i % distinct) * elements + j];
    out[j] = acc;
  }
}

// Block-wide sum (or max) of one value per thread; every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float o = shared[threadIdx.x + s];
      shared[threadIdx.x] = kMax ? fmaxf(shared[threadIdx.x], o) : shared[threadIdx.x] + o;
    }
    __syncthreads();
  }
  const float r = shared[0];
  __syncthreads();
  return r;
}

__global__ void reduction_kernel(int64_t inner, const float* in, float* out) {
  __shared__ float shared[kThreads];
  const float* row = in + blockIdx.x * inner;
  float acc = 0;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) acc += row[i];
  acc = block_reduce<false>(acc, shared);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

__global__ void embedding_kernel(int64_t dim, int64_t lookups, const float* table, const int32_t* index, float* out) {
  const int64_t n = dim * lookups;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < n; t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = t / dim, d = t % dim;
    out[t] = table[int64_t{index[i]} * dim + d];
  }
}

__global__ void softmax_kernel(int64_t cols, const float* in, float* out) {
  __shared__ float shared[kThreads];
  const float* x = in + blockIdx.x * cols;
  float* y = out + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
  m = block_reduce<true>(m, shared);
  float s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(x[c] - m);
  s = block_reduce<false>(s, shared);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[c] = expf(x[c] - m) / s;
}

}  // namespace

void launch_fill(float* p, int64_t n, uint32_t seed, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, n, seed);
  PLACELAB_CUDA_CHECK(cudaGetLastError());
}

void launch_fill_indices(int32_t* p, int64_t n, int64_t rows, uint32_t seed, cudaStream_t stream) {
  if (n <= 0) return;
  fill_indices_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, n, std::max<int64_t>(rows, 1), seed);
  PLACELAB_CUDA_CHECK(cudaGetLastError());
}

void launch_elementwise(int64_t elements, int64_t inputs, const float* in, int64_t distinct, float* out,
                        cudaStream_t stream) {
  elementwise_kernel<<<grid_for(elements), kThreads, 0, stream>>>(elements, std::max<int64_t>(inputs, 1), in,
                                                                  std::max<int64_t>(distinct, 1), out);
  PLACELAB_CUDA_CHECK(cudaGetLastError());
}

void launch_reduction(int64_t elements, int64_t out_count, const float* in, float* out, cudaStream_t stream) {
  const int64_t outs = std::max<int64_t>(out_count, 1);
  const int64_t inner = (std::max<int64_t>(elements, 1) + outs - 1) / outs;
  // gridDim.x allows 2^31 − 1 blocks, far above any output count a signature reaches.
  reduction_kernel<<<static_cast<unsigned>(outs), kThreads, 0, stream>>>(inner, in, out);
  PLACELAB_CUDA_CHECK(cudaGetLastError());
}

void launch_embedding(int64_t dim, int64_t lookups, const float* table, const int32_t* index, float* out,
                      cudaStream_t stream) {
  embedding_kernel<<<grid_for(dim * lookups), kThreads, 0, stream>>>(dim, lookups, table, index, out);
  PLACELAB_CUDA_CHECK(cudaGetLastError());
}

void launch_softmax(int64_t rows, int64_t cols, const float* in, float* out, cudaStream_t stream) {
  softmax_kernel<<<static_cast<unsigned>(std::max<int64_t>(rows, 1)), kThreads, 0, stream>>>(cols, in, out);
  PLACELAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace placelab::gpu
