// placelab's own CUDA kernels (kernels.cu) for the classes cuBLAS and cuDNN do not cover, with the
// same arithmetic as the CPU kernels (cpu_kernels.h) so that results can be compared: FP32,
// C-order. Each function enqueues one kernel on `stream` and checks the launch; none synchronises.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace placelab::gpu {

// p[i] = deterministic pseudo-random value in [-1, 1) from (seed, i).
void launch_fill(float* p, int64_t n, uint32_t seed, cudaStream_t stream);
// p[i] = deterministic pseudo-random row index in [0, rows).
void launch_fill_indices(int32_t* p, int64_t n, int64_t rows, uint32_t seed, cudaStream_t stream);
// out[j] = 0.5·in[0][j] + Σ_{i≥1} in[i mod distinct][j]; `in` holds `distinct` (1..inputs) arrays
// of `elements` floats — cpu::elementwise's contract, so both backends allocate alike.
void launch_elementwise(int64_t elements, int64_t inputs, const float* in, int64_t distinct, float* out,
                        cudaStream_t stream);
// out[j] = Σ_i in[j·inner + i], inner = ceil(elements / out_count); one block per output.
void launch_reduction(int64_t elements, int64_t out_count, const float* in, float* out, cudaStream_t stream);
// out[i][:] = table[index[i]][:]; table rows×dim, out lookups×dim.
void launch_embedding(int64_t dim, int64_t lookups, const float* table, const int32_t* index, float* out,
                      cudaStream_t stream);
// Row-wise softmax of a rows×cols matrix, max-subtracted; one block per row.
void launch_softmax(int64_t rows, int64_t cols, const float* in, float* out, cudaStream_t stream);

}  // namespace placelab::gpu
