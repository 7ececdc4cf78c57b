// cuDNN 9 marks the legacy convolution API (descriptors, Get*_v7, cudnnConvolution*) deprecated in
// favour of its graph API, but that API is the one cuDNN 7 and 8 — the versions CUDA 11 builds for
// K80 and P100 use — provide, so this file keeps it and silences only that warning.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "gpu_kernel.h"

#include <algorithm>
#include <string>

#include "kernels.h"
#include "placelab/core/error.h"
#include "placelab/profiler/cpu_kernels.h"
#include "placelab/profiler/gpu_check.h"

namespace placelab::gpu {

DeviceContext::DeviceContext(int device) : device_(device) {
  PLACELAB_CUDA_CHECK(cudaSetDevice(device));
  PLACELAB_CUDA_CHECK(cublasCreate(&cublas_));
  try {
    PLACELAB_CUDA_CHECK(cudnnCreate(&cudnn_));
  } catch (...) {
    cublasDestroy(cublas_);
    throw;
  }
}

DeviceContext::~DeviceContext() {
  cudaSetDevice(device_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
}

DeviceBuffer::DeviceBuffer(int64_t n_bytes) : bytes(n_bytes) {
  if (n_bytes > 0) PLACELAB_CUDA_CHECK(cudaMalloc(&ptr, static_cast<size_t>(n_bytes)));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr) cudaFree(ptr);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr) cudaFree(ptr);
    ptr = o.ptr, bytes = o.bytes;
    o.ptr = nullptr, o.bytes = 0;
  }
  return *this;
}

namespace {

constexpr int64_t kFloat = sizeof(float);

// Descriptors of one convolution, destroyed with it.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~ConvDescriptors() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

int to_int(int64_t v, const char* what) {
  if (v < 1 || v > (int64_t{1} << 31) - 1)
    throw InputError(std::string("conv2d ") + what + " = " + std::to_string(v) + ": must be in [1, 2^31)");
  return static_cast<int>(v);
}

DeviceBuffer floats(int64_t n) { return DeviceBuffer(std::max<int64_t>(n, 1) * kFloat); }

// The first algorithm cuDNN's ranking (fastest first) says it can run.
template <typename Perf>
auto first_working_algo(const Perf* perf, int got, const KernelSignature& sig, const char* what) {
  int i = 0;
  while (i < got && perf[i].status != CUDNN_STATUS_SUCCESS) ++i;
  if (i == got) throw Error(to_string(sig) + ": cuDNN proposes no " + what + " algorithm");
  return perf[i].algo;
}

}  // namespace

struct GpuKernel::State {
  DeviceContext* ctx = nullptr;
  std::vector<DeviceBuffer> in;  // inputs in reading order
  DeviceBuffer out;
  DeviceBuffer workspace;
  // Class-specific launch data.
  cpu::ConvShape conv;
  std::unique_ptr<ConvDescriptors> desc;
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo{};

  // A convolution's descriptors, buffers, algorithm and workspace, for any of its three forms.
  void prepare_conv(const KernelSignature& sig);
};

void GpuKernel::State::prepare_conv(const KernelSignature& sig) {
  const cpu::ConvShape c = cpu::ConvShape::from(sig);
  conv = c;
  desc = std::make_unique<ConvDescriptors>();
  ConvDescriptors& ds = *desc;
  PLACELAB_CUDA_CHECK(cudnnCreateTensorDescriptor(&ds.x));
  PLACELAB_CUDA_CHECK(cudnnCreateTensorDescriptor(&ds.y));
  PLACELAB_CUDA_CHECK(cudnnCreateFilterDescriptor(&ds.w));
  PLACELAB_CUDA_CHECK(cudnnCreateConvolutionDescriptor(&ds.conv));
  PLACELAB_CUDA_CHECK(cudnnSetTensor4dDescriptor(ds.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, to_int(c.n, "n"),
                                                 to_int(c.c, "c"), to_int(c.h, "h"), to_int(c.w, "w")));
  PLACELAB_CUDA_CHECK(cudnnSetFilter4dDescriptor(ds.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, to_int(c.k, "k"),
                                                 to_int(c.c, "c"), to_int(c.r, "r"), to_int(c.s, "s")));
  // Cross-correlation, as the CPU kernels and every framework compute it.
  PLACELAB_CUDA_CHECK(cudnnSetConvolution2dDescriptor(ds.conv, static_cast<int>(c.pad), static_cast<int>(c.pad),
                                                      to_int(c.stride, "stride"), to_int(c.stride, "stride"), 1, 1,
                                                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  int on = 0, oc = 0, oh = 0, ow = 0;
  PLACELAB_CUDA_CHECK(cudnnGetConvolution2dForwardOutputDim(ds.conv, ds.x, ds.w, &on, &oc, &oh, &ow));
  if (oh != c.ho || ow != c.wo)
    throw InputError(to_string(sig) + ": the filter does not fit the padded input (cuDNN output " +
                     std::to_string(oh) + "x" + std::to_string(ow) + ")");
  PLACELAB_CUDA_CHECK(cudnnSetTensor4dDescriptor(ds.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow));
  cudnnHandle_t h = ctx->cudnn();
  size_t ws = 0;
  if (sig.cls == KernelClass::kConv2D) {
    in.push_back(floats(c.input_size()));
    in.push_back(floats(c.filter_size()));
    out = floats(c.output_size());
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    PLACELAB_CUDA_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, ds.x, ds.w, ds.conv, ds.y,
                                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
    fwd_algo = first_working_algo(perf, got, sig, "forward");
    PLACELAB_CUDA_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, ds.x, ds.w, ds.conv, ds.y, fwd_algo, &ws));
  } else if (sig.cls == KernelClass::kConv2DBackpropInput) {
    in.push_back(floats(c.output_size()));  // dy
    in.push_back(floats(c.filter_size()));  // w
    out = floats(c.input_size());           // dx
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int got = 0;
    PLACELAB_CUDA_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, ds.w, ds.y, ds.conv, ds.x,
                                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
    bwd_data_algo = first_working_algo(perf, got, sig, "backward-data");
    PLACELAB_CUDA_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, ds.w, ds.y, ds.conv, ds.x, bwd_data_algo, &ws));
  } else {
    in.push_back(floats(c.input_size()));   // x
    in.push_back(floats(c.output_size()));  // dy
    out = floats(c.filter_size());          // dw
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int got = 0;
    PLACELAB_CUDA_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, ds.x, ds.y, ds.conv, ds.w,
                                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
    bwd_filter_algo = first_working_algo(perf, got, sig, "backward-filter");
    PLACELAB_CUDA_CHECK(
        cudnnGetConvolutionBackwardFilterWorkspaceSize(h, ds.x, ds.y, ds.conv, ds.w, bwd_filter_algo, &ws));
  }
  workspace = DeviceBuffer(static_cast<int64_t>(ws));
}

GpuKernel::GpuKernel(const KernelSignature& sig, DeviceContext& ctx, int64_t max_bytes, cudaStream_t stream)
    : sig_(sig), s_(std::make_unique<State>()) {
  const int64_t need = cpu::CpuKernel::required_bytes(sig);  // InputError for a negative dimension
  if (need > max_bytes)
    throw InputError(to_string(sig) + " needs " + std::to_string(need) + " bytes of buffers, above the limit of " +
                     std::to_string(max_bytes));
  s_->ctx = &ctx;
  uint32_t seed = 0x9e3779b9u;
  auto fill = [&](const DeviceBuffer& b) { launch_fill(b.f(), b.bytes / kFloat, seed++, stream); };
  const auto& d = sig.dims;
  switch (sig.cls) {
    case KernelClass::kNoop: return;
    case KernelClass::kGemm: {
      const int64_t m = d[0], n = d[1], k = d[2], batch = std::max<int64_t>(d[3], 1);
      s_->in.push_back(floats(m * k * batch));
      s_->in.push_back(floats(k * n * batch));
      s_->out = floats(m * n * batch);
      break;
    }
    case KernelClass::kConv2D:
    case KernelClass::kConv2DBackpropInput:
    case KernelClass::kConv2DBackpropFilter:
      s_->prepare_conv(sig);
      break;
    case KernelClass::kElementwise: {
      const int64_t e = d[0];
      s_->in.push_back(floats(e * cpu::elementwise_distinct_inputs(e, std::max<int64_t>(d[1], 1))));
      s_->out = floats(e);
      break;
    }
    case KernelClass::kReduction: {
      const int64_t e = std::max<int64_t>(d[0], 1), outs = std::max<int64_t>(d[1], 1);
      const int64_t inner = (e + outs - 1) / outs;
      s_->in.push_back(floats(inner * outs));
      s_->out = floats(outs);
      break;
    }
    case KernelClass::kEmbedding: {
      const int64_t rows = std::max<int64_t>(d[0], 1), dim = d[1], lookups = d[2];
      s_->in.push_back(floats(rows * dim));
      s_->in.emplace_back(std::max<int64_t>(lookups, 1) * int64_t{sizeof(int32_t)});
      s_->out = floats(dim * lookups);
      fill(s_->in[0]);
      launch_fill_indices(static_cast<int32_t*>(s_->in[1].ptr), lookups, rows, seed++, stream);
      PLACELAB_CUDA_CHECK(cudaMemsetAsync(s_->out.ptr, 0, static_cast<size_t>(s_->out.bytes), stream));
      return;
    }
    case KernelClass::kSoftmax: {
      s_->in.push_back(floats(d[0] * d[1]));
      s_->out = floats(d[0] * d[1]);
      break;
    }
    case KernelClass::kCopy: {
      s_->in.emplace_back(std::max<int64_t>(d[0], 1));
      s_->out = DeviceBuffer(std::max<int64_t>(d[0], 1));
      PLACELAB_CUDA_CHECK(cudaMemsetAsync(s_->in[0].ptr, 0x3c, static_cast<size_t>(s_->in[0].bytes), stream));
      PLACELAB_CUDA_CHECK(cudaMemsetAsync(s_->out.ptr, 0, static_cast<size_t>(s_->out.bytes), stream));
      return;
    }
  }
  for (const DeviceBuffer& b : s_->in) fill(b);
  PLACELAB_CUDA_CHECK(cudaMemsetAsync(s_->out.ptr, 0, static_cast<size_t>(s_->out.bytes), stream));
}

GpuKernel::~GpuKernel() = default;
GpuKernel::GpuKernel(GpuKernel&&) noexcept = default;
GpuKernel& GpuKernel::operator=(GpuKernel&&) noexcept = default;

void GpuKernel::launch(cudaStream_t stream) {
  const auto& d = sig_.dims;
  State& s = *s_;
  const float one = 1.0f, zero = 0.0f;
  switch (sig_.cls) {
    case KernelClass::kNoop: return;
    case KernelClass::kGemm: {
      // Column-major C (m×n) = A (m×k) · B (k×n), as cpu::gemm.
      const int m = static_cast<int>(d[0]), n = static_cast<int>(d[1]), k = static_cast<int>(d[2]);
      const int64_t batch = std::max<int64_t>(d[3], 1);
      PLACELAB_CUDA_CHECK(cublasSetStream(s.ctx->cublas(), stream));
      if (batch == 1) {
        PLACELAB_CUDA_CHECK(cublasSgemm(s.ctx->cublas(), CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, s.in[0].f(), m,
                                        s.in[1].f(), k, &zero, s.out.f(), m));
      } else {
        PLACELAB_CUDA_CHECK(cublasSgemmStridedBatched(s.ctx->cublas(), CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one,
                                                      s.in[0].f(), m, int64_t{m} * k, s.in[1].f(), k, int64_t{k} * n,
                                                      &zero, s.out.f(), m, int64_t{m} * n, static_cast<int>(batch)));
      }
      return;
    }
    case KernelClass::kConv2D:
    case KernelClass::kConv2DBackpropInput:
    case KernelClass::kConv2DBackpropFilter: {
      cudnnHandle_t h = s.ctx->cudnn();
      PLACELAB_CUDA_CHECK(cudnnSetStream(h, stream));
      const ConvDescriptors& ds = *s.desc;
      const size_t ws = static_cast<size_t>(s.workspace.bytes);
      if (sig_.cls == KernelClass::kConv2D)
        PLACELAB_CUDA_CHECK(cudnnConvolutionForward(h, &one, ds.x, s.in[0].ptr, ds.w, s.in[1].ptr, ds.conv, s.fwd_algo,
                                                    s.workspace.ptr, ws, &zero, ds.y, s.out.ptr));
      else if (sig_.cls == KernelClass::kConv2DBackpropInput)
        PLACELAB_CUDA_CHECK(cudnnConvolutionBackwardData(h, &one, ds.w, s.in[1].ptr, ds.y, s.in[0].ptr, ds.conv,
                                                         s.bwd_data_algo, s.workspace.ptr, ws, &zero, ds.x, s.out.ptr));
      else
        PLACELAB_CUDA_CHECK(cudnnConvolutionBackwardFilter(h, &one, ds.x, s.in[0].ptr, ds.y, s.in[1].ptr, ds.conv,
                                                           s.bwd_filter_algo, s.workspace.ptr, ws, &zero, ds.w,
                                                           s.out.ptr));
      return;
    }
    case KernelClass::kElementwise:
      launch_elementwise(d[0], d[1], s.in[0].f(), cpu::elementwise_distinct_inputs(d[0], std::max<int64_t>(d[1], 1)),
                         s.out.f(), stream);
      return;
    case KernelClass::kReduction: launch_reduction(d[0], d[1], s.in[0].f(), s.out.f(), stream); return;
    case KernelClass::kEmbedding:
      launch_embedding(d[1], d[2], s.in[0].f(), static_cast<const int32_t*>(s.in[1].ptr), s.out.f(), stream);
      return;
    case KernelClass::kSoftmax: launch_softmax(d[0], d[1], s.in[0].f(), s.out.f(), stream); return;
    case KernelClass::kCopy:
      PLACELAB_CUDA_CHECK(cudaMemcpyAsync(s.out.ptr, s.in[0].ptr, static_cast<size_t>(s.out.bytes),
                                          cudaMemcpyDeviceToDevice, stream));
      return;
  }
}

int64_t GpuKernel::buffer_bytes() const {
  int64_t b = s_->out.bytes + s_->workspace.bytes;
  for (const DeviceBuffer& x : s_->in) b += x.bytes;
  return b;
}

std::vector<const DeviceBuffer*> GpuKernel::inputs() const {
  std::vector<const DeviceBuffer*> v;
  for (const DeviceBuffer& b : s_->in) v.push_back(&b);
  return v;
}

const DeviceBuffer& GpuKernel::output() const { return s_->out; }

}  // namespace placelab::gpu
