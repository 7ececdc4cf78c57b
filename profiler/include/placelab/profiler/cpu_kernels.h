// Real FP32 CPU kernels for every kernel class, sized from a KernelSignature. The CPU calibration
// backend times them and the CPU executor runs them, so a measured time and an executed op are the
// same code. The routines below are single-threaded (Eigen without OpenMP): a device's
// parallelism comes from its worker threads, one per core.
//
//   CpuKernel k(KernelSignature::gemm(256, 256, 256));  // allocates and fills its buffers
//   k.run();                                            // one execution: C = A·B
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "placelab/graph/kernel.h"

namespace placelab::cpu {

// Layout contract shared by the conv routines. Tensors are dense FP32, C-order:
//   input  x  [n][c][h][w]        filter  f  [k][c][r][s]        output  y  [n][k][ho][wo]
//   cols      [ho·wo][c·r·s]  (one output pixel's receptive field contiguous, i.e. a column-major
//                              (c·r·s) × (ho·wo) matrix) — the im2col scratch of one image.
struct ConvShape {
  int64_t n = 1, c = 1, h = 1, w = 1, k = 1, r = 1, s = 1, stride = 1, pad = 0;
  int64_t ho = 1, wo = 1;  // output size: max(1, (in + 2·pad − filter) / stride + 1), as kernel_flops
  // From a conv2d / conv2d_backprop_* signature; dimensions < 1 become 1 (stride ≥ 1, pad ≥ 0).
  static ConvShape from(const KernelSignature& sig);
  int64_t input_size() const { return n * c * h * w; }
  int64_t filter_size() const { return k * c * r * s; }
  int64_t output_size() const { return n * k * ho * wo; }
  int64_t cols_size() const { return c * r * s * ho * wo; }  // per image
};

// Unfolds image `x` ([c][h][w]) into `cols` (see ConvShape); padding reads as 0.
void im2col(const ConvShape& shape, const float* x, float* cols);
// Adds each entry of `cols` back into `dx` ([c][h][w]) — the adjoint of im2col. dx must be zeroed
// by the caller when a fresh gradient is wanted.
void col2im_add(const ConvShape& shape, const float* cols, float* dx);

// y = conv(x, f) via im2col + one GEMM per image. `cols` is scratch of cols_size() floats.
void conv2d_forward(const ConvShape& shape, const float* x, const float* f, float* y, float* cols);
// dx = ∂(Σ dy·y)/∂x: GEMM fᵀ·dy per image into cols, then col2im. dx is overwritten.
void conv2d_backprop_input(const ConvShape& shape, const float* dy, const float* f, float* dx, float* cols);
// df = ∂(Σ dy·y)/∂f: Σ over images of dy · colsᵀ. df is overwritten.
void conv2d_backprop_filter(const ConvShape& shape, const float* x, const float* dy, float* df, float* cols);
// Direct (seven nested loops) forward convolution; the reference the tests check im2col against.
void conv2d_direct(const ConvShape& shape, const float* x, const float* f, float* y);

// c[b] = a[b] · b[b] for each batch b; a: m×k, b: k×n, c: m×n, all column-major, batches back to back.
void gemm(int64_t m, int64_t n, int64_t k, int64_t batch, const float* a, const float* b, float* c);
// out[j] = 0.5·in[0][j] + Σ_{i≥1} in[i mod distinct][j]; `in` holds `distinct` (1..inputs) arrays
// of `elements` floats back to back. CpuKernel passes distinct < inputs only when the inputs
// would exceed kMaxElementwiseInputBytes (an AddN of 40 embedding-sized gradients): the arrays it
// cycles through then still total more than any L3 cache, so the memory traffic is unchanged.
void elementwise(int64_t elements, int64_t inputs, const float* in, int64_t distinct, float* out);
inline constexpr int64_t kMaxElementwiseInputBytes = int64_t{256} << 20;
// The number of distinct input arrays CpuKernel allocates for elementwise{elements, inputs}.
int64_t elementwise_distinct_inputs(int64_t elements, int64_t inputs);
// out[j] = Σ_i in[j·inner + i] for j < out_count, inner = ceil(elements / out_count); `in` has
// inner·out_count floats (the tail past `elements` is the caller's padding, normally zeros).
void reduction(int64_t elements, int64_t out_count, const float* in, float* out);
// out[i][:] = table[index[i]][:], table rows×dim, out lookups×dim (C-order).
void embedding(int64_t dim, int64_t lookups, const float* table, const int32_t* index, float* out);
// Row-wise softmax of a rows×cols C-order matrix (max-subtracted, so large inputs do not overflow).
void softmax(int64_t rows, int64_t cols, const float* in, float* out);

// Default cap on the buffers of one kernel: 2 GiB.
inline constexpr int64_t kDefaultMaxKernelBytes = int64_t{2} << 30;

// One kernel of a given signature with its own input, output and scratch buffers, allocated and
// filled with deterministic pseudo-random values in the constructor (on the calling thread, so
// construct it on the thread that will run it: first touch places the pages). run() executes the
// kernel once. Not thread-safe; one instance per running thread.
class CpuKernel {
 public:
  // Throws InputError when the buffers would exceed `max_bytes` ("gemm{…} needs 120 GB of buffers,
  // above the limit of 2 GB") or a dimension is negative; noop allocates nothing.
  explicit CpuKernel(const KernelSignature& sig, int64_t max_bytes = kDefaultMaxKernelBytes);
  ~CpuKernel();
  CpuKernel(CpuKernel&&) noexcept;
  CpuKernel& operator=(CpuKernel&&) noexcept;

  void run();
  const KernelSignature& signature() const { return sig_; }
  // Bytes of buffers this kernel holds.
  int64_t buffer_bytes() const;
  // Bytes of buffers a kernel of `sig` needs, without allocating. Throws InputError for a
  // negative dimension.
  static int64_t required_bytes(const KernelSignature& sig);
  // The output buffer (for tests): its first element and size in floats.
  const float* output() const;
  int64_t output_size() const;

 private:
  struct Buffers;
  KernelSignature sig_;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace placelab::cpu
