#include "placelab/profiler/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include <Eigen/Dense>

#include "placelab/core/error.h"

namespace placelab::cpu {
namespace {

using MatrixMap = Eigen::Map<Eigen::MatrixXf>;
using ConstMatrixMap = Eigen::Map<const Eigen::MatrixXf>;
using Index = Eigen::Index;

int64_t at_least_1(int64_t v) { return std::max<int64_t>(1, v); }

std::string human_bytes(double b) {
  const char* unit[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (b >= 1000 && u < 5) b /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", b, unit[u]);
  return buf;
}

}  // namespace

ConvShape ConvShape::from(const KernelSignature& sig) {
  ConvShape s;
  auto d = [&](std::size_t i) { return sig.dims[i]; };
  s.n = at_least_1(d(0)), s.c = at_least_1(d(1)), s.h = at_least_1(d(2)), s.w = at_least_1(d(3));
  s.k = at_least_1(d(4)), s.r = at_least_1(d(5)), s.s = at_least_1(d(6));
  s.stride = at_least_1(d(7)), s.pad = std::max<int64_t>(0, d(8));
  s.ho = at_least_1((s.h + 2 * s.pad - s.r) / s.stride + 1);
  s.wo = at_least_1((s.w + 2 * s.pad - s.s) / s.stride + 1);
  return s;
}

void im2col(const ConvShape& sh, const float* x, float* cols) {
  const int64_t crs = sh.c * sh.r * sh.s;
  for (int64_t oy = 0; oy < sh.ho; ++oy)
    for (int64_t ox = 0; ox < sh.wo; ++ox) {
      float* col = cols + (oy * sh.wo + ox) * crs;
      for (int64_t ch = 0; ch < sh.c; ++ch) {
        const float* plane = x + ch * sh.h * sh.w;
        for (int64_t ky = 0; ky < sh.r; ++ky) {
          const int64_t iy = oy * sh.stride - sh.pad + ky;
          for (int64_t kx = 0; kx < sh.s; ++kx) {
            const int64_t ix = ox * sh.stride - sh.pad + kx;
            *col++ = (iy >= 0 && iy < sh.h && ix >= 0 && ix < sh.w) ? plane[iy * sh.w + ix] : 0.0f;
          }
        }
      }
    }
}

void col2im_add(const ConvShape& sh, const float* cols, float* dx) {
  const int64_t crs = sh.c * sh.r * sh.s;
  for (int64_t oy = 0; oy < sh.ho; ++oy)
    for (int64_t ox = 0; ox < sh.wo; ++ox) {
      const float* col = cols + (oy * sh.wo + ox) * crs;
      for (int64_t ch = 0; ch < sh.c; ++ch) {
        float* plane = dx + ch * sh.h * sh.w;
        for (int64_t ky = 0; ky < sh.r; ++ky) {
          const int64_t iy = oy * sh.stride - sh.pad + ky;
          for (int64_t kx = 0; kx < sh.s; ++kx, ++col) {
            const int64_t ix = ox * sh.stride - sh.pad + kx;
            if (iy >= 0 && iy < sh.h && ix >= 0 && ix < sh.w) plane[iy * sh.w + ix] += *col;
          }
        }
      }
    }
}

// With cols as a (crs × P) column-major matrix, the filter as (crs × k) and one image's output as
// (P × k) — [k][ho][wo] read column-major — the convolution is Y = colsᵀ · F.
void conv2d_forward(const ConvShape& sh, const float* x, const float* f, float* y, float* cols) {
  const Index crs = sh.c * sh.r * sh.s, p = sh.ho * sh.wo;
  ConstMatrixMap fm(f, crs, sh.k);
  MatrixMap cm(cols, crs, p);
  for (int64_t i = 0; i < sh.n; ++i) {
    im2col(sh, x + i * sh.c * sh.h * sh.w, cols);
    MatrixMap ym(y + i * sh.k * p, p, sh.k);
    ym.noalias() = cm.transpose() * fm;
  }
}

void conv2d_backprop_input(const ConvShape& sh, const float* dy, const float* f, float* dx, float* cols) {
  const Index crs = sh.c * sh.r * sh.s, p = sh.ho * sh.wo;
  ConstMatrixMap fm(f, crs, sh.k);
  MatrixMap cm(cols, crs, p);
  std::fill(dx, dx + sh.input_size(), 0.0f);
  for (int64_t i = 0; i < sh.n; ++i) {
    ConstMatrixMap dym(dy + i * sh.k * p, p, sh.k);
    cm.noalias() = fm * dym.transpose();
    col2im_add(sh, cols, dx + i * sh.c * sh.h * sh.w);
  }
}

void conv2d_backprop_filter(const ConvShape& sh, const float* x, const float* dy, float* df, float* cols) {
  const Index crs = sh.c * sh.r * sh.s, p = sh.ho * sh.wo;
  MatrixMap dfm(df, crs, sh.k);
  MatrixMap cm(cols, crs, p);
  dfm.setZero();
  for (int64_t i = 0; i < sh.n; ++i) {
    im2col(sh, x + i * sh.c * sh.h * sh.w, cols);
    ConstMatrixMap dym(dy + i * sh.k * p, p, sh.k);
    dfm.noalias() += cm * dym;
  }
}

void conv2d_direct(const ConvShape& sh, const float* x, const float* f, float* y) {
  for (int64_t i = 0; i < sh.n; ++i)
    for (int64_t o = 0; o < sh.k; ++o)
      for (int64_t oy = 0; oy < sh.ho; ++oy)
        for (int64_t ox = 0; ox < sh.wo; ++ox) {
          double acc = 0;
          for (int64_t ch = 0; ch < sh.c; ++ch)
            for (int64_t ky = 0; ky < sh.r; ++ky)
              for (int64_t kx = 0; kx < sh.s; ++kx) {
                const int64_t iy = oy * sh.stride - sh.pad + ky, ix = ox * sh.stride - sh.pad + kx;
                if (iy < 0 || iy >= sh.h || ix < 0 || ix >= sh.w) continue;
                acc += static_cast<double>(x[((i * sh.c + ch) * sh.h + iy) * sh.w + ix]) *
                       f[((o * sh.c + ch) * sh.r + ky) * sh.s + kx];
              }
          y[((i * sh.k + o) * sh.ho + oy) * sh.wo + ox] = static_cast<float>(acc);
        }
}

void gemm(int64_t m, int64_t n, int64_t k, int64_t batch, const float* a, const float* b, float* c) {
  for (int64_t i = 0; i < batch; ++i) {
    ConstMatrixMap am(a + i * m * k, m, k), bm(b + i * k * n, k, n);
    MatrixMap cm(c + i * m * n, m, n);
    cm.noalias() = am * bm;
  }
}

void elementwise(int64_t elements, int64_t inputs, const float* in, int64_t distinct, float* out) {
  PLACELAB_CHECK(distinct >= 1 && distinct <= inputs) << distinct << " of " << inputs;
  Eigen::Map<Eigen::ArrayXf> o(out, elements);
  o = 0.5f * Eigen::Map<const Eigen::ArrayXf>(in, elements);
  for (int64_t i = 1; i < inputs; ++i) o += Eigen::Map<const Eigen::ArrayXf>(in + (i % distinct) * elements, elements);
}

int64_t elementwise_distinct_inputs(int64_t elements, int64_t inputs) {
  elements = std::max<int64_t>(1, elements), inputs = std::max<int64_t>(1, inputs);
  const int64_t fit = kMaxElementwiseInputBytes / (4 * elements);
  return std::clamp<int64_t>(fit, 1, inputs);
}

void reduction(int64_t elements, int64_t out_count, const float* in, float* out) {
  const int64_t inner = (elements + out_count - 1) / out_count;
  Eigen::Map<Eigen::RowVectorXf>(out, out_count) = ConstMatrixMap(in, inner, out_count).colwise().sum();
}

void embedding(int64_t dim, int64_t lookups, const float* table, const int32_t* index, float* out) {
  for (int64_t i = 0; i < lookups; ++i)
    std::memcpy(out + i * dim, table + static_cast<int64_t>(index[i]) * dim, static_cast<std::size_t>(dim) * sizeof(float));
}

void softmax(int64_t rows, int64_t cols, const float* in, float* out) {
  // C-order rows×cols is a column-major cols×rows matrix: one column per softmax row.
  ConstMatrixMap x(in, cols, rows);
  MatrixMap y(out, cols, rows);
  for (Index j = 0; j < rows; ++j) {
    const float mx = x.col(j).maxCoeff();
    y.col(j) = (x.col(j).array() - mx).exp().matrix();
    y.col(j) /= y.col(j).sum();
  }
}

// ---------------------------------------------------------------------------------------------

struct CpuKernel::Buffers {
  std::vector<float> a, b, c, scratch;  // meaning by class; see run()
  std::vector<int32_t> index;           // embedding lookups
  std::vector<char> src, dst;           // copy
  ConvShape conv;
  int64_t d0 = 0, d1 = 0, d2 = 0, d3 = 0;  // the class's dimensions, clamped
};

namespace {

// Per class: sizes (in elements) of the buffers a, b, c, scratch, index and copy bytes.
struct Sizes {
  int64_t a = 0, b = 0, c = 0, scratch = 0, index = 0, copy = 0;
};

void check_dims(const KernelSignature& sig) {
  auto fields = kernel_fields(sig.cls);
  for (std::size_t i = 0; i < fields.size(); ++i)
    if (sig.dims[i] < 0)
      throw InputError(to_string(sig) + ": " + std::string(fields[i]) + " = " + std::to_string(sig.dims[i]) +
                       ": must be >= 0");
}

// Sizes in double first, so that absurd signatures are caught before any int64 overflow.
Sizes sizes_of(const KernelSignature& sig, double* total_bytes) {
  check_dims(sig);
  auto d = [&](std::size_t i) { return static_cast<double>(std::max<int64_t>(1, sig.dims[i])); };
  double a = 0, b = 0, c = 0, scratch = 0, index = 0, copy = 0;
  switch (sig.cls) {
    case KernelClass::kNoop: break;
    case KernelClass::kGemm: a = d(0) * d(2) * d(3), b = d(2) * d(1) * d(3), c = d(0) * d(1) * d(3); break;
    case KernelClass::kConv2D:
    case KernelClass::kConv2DBackpropInput:
    case KernelClass::kConv2DBackpropFilter: {
      ConvShape s = ConvShape::from(sig);
      double ho = static_cast<double>(s.ho), wo = static_cast<double>(s.wo);
      double in = d(0) * d(1) * d(2) * d(3), filt = d(4) * d(1) * d(5) * d(6), out = d(0) * d(4) * ho * wo;
      scratch = d(1) * d(5) * d(6) * ho * wo;
      // forward: a = x, b = f, c = y; backprop input: a = dy, b = f, c = dx; filter: a = x, b = dy, c = df.
      if (sig.cls == KernelClass::kConv2D) a = in, b = filt, c = out;
      else if (sig.cls == KernelClass::kConv2DBackpropInput) a = out, b = filt, c = in;
      else a = in, b = out, c = filt;
      break;
    }
    case KernelClass::kElementwise: {
      // Clamped so that 4 · elements cannot overflow; such a size is rejected anyway.
      const int64_t elements = std::min<int64_t>(sig.dims[0], int64_t{1} << 60);
      a = d(0) * static_cast<double>(elementwise_distinct_inputs(elements, sig.dims[1]));
      c = d(0);
      break;
    }
    case KernelClass::kReduction: {
      double out = d(1), inner = std::ceil(d(0) / out);
      a = inner * out, c = out;
      break;
    }
    case KernelClass::kEmbedding: a = d(0) * d(1), index = d(2), c = d(2) * d(1); break;
    case KernelClass::kSoftmax: a = d(0) * d(1), c = d(0) * d(1); break;
    case KernelClass::kCopy: copy = static_cast<double>(sig.dims[0]); break;
  }
  *total_bytes = 4.0 * (a + b + c + scratch + index) + 2.0 * copy;
  Sizes s;
  if (*total_bytes > 1e18) return s;  // the caller rejects it; avoid overflow in the conversion
  s.a = static_cast<int64_t>(a), s.b = static_cast<int64_t>(b), s.c = static_cast<int64_t>(c);
  s.scratch = static_cast<int64_t>(scratch), s.index = static_cast<int64_t>(index), s.copy = static_cast<int64_t>(copy);
  return s;
}

void fill(std::vector<float>& v, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : v) x = dist(rng);
}

}  // namespace

int64_t CpuKernel::required_bytes(const KernelSignature& sig) {
  double total = 0;
  sizes_of(sig, &total);
  return total > 9e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(total);
}

CpuKernel::CpuKernel(const KernelSignature& sig, int64_t max_bytes) : sig_(sig), buffers_(std::make_unique<Buffers>()) {
  double total = 0;
  Sizes s = sizes_of(sig, &total);
  if (total > static_cast<double>(max_bytes))
    throw InputError(to_string(sig) + " needs " + human_bytes(total) + " of buffers, above the limit of " +
                     human_bytes(static_cast<double>(max_bytes)) + " per kernel");
  Buffers& b = *buffers_;
  std::mt19937 rng(static_cast<uint32_t>(KernelSignatureHash{}(sig)));
  b.a.resize(static_cast<std::size_t>(s.a));
  b.b.resize(static_cast<std::size_t>(s.b));
  b.c.assign(static_cast<std::size_t>(s.c), 0.0f);
  b.scratch.assign(static_cast<std::size_t>(s.scratch), 0.0f);
  fill(b.a, rng);
  fill(b.b, rng);
  auto d = [&](std::size_t i) { return std::max<int64_t>(1, sig.dims[i]); };
  switch (sig.cls) {
    case KernelClass::kGemm: b.d0 = d(0), b.d1 = d(1), b.d2 = d(2), b.d3 = d(3); break;
    case KernelClass::kConv2D:
    case KernelClass::kConv2DBackpropInput:
    case KernelClass::kConv2DBackpropFilter: b.conv = ConvShape::from(sig); break;
    case KernelClass::kElementwise: b.d0 = d(0), b.d1 = d(1), b.d2 = elementwise_distinct_inputs(b.d0, b.d1); break;
    case KernelClass::kReduction: {
      b.d0 = d(0), b.d1 = d(1);
      // Zero the padding past `elements` so the sums are those of the real inputs.
      const int64_t inner = (b.d0 + b.d1 - 1) / b.d1;
      for (int64_t j = 0; j < b.d1; ++j)
        for (int64_t i = 0; i < inner; ++i)
          if (j * inner + i >= b.d0) b.a[static_cast<std::size_t>(j * inner + i)] = 0.0f;
      break;
    }
    case KernelClass::kEmbedding: {
      b.d0 = d(0), b.d1 = d(1), b.d2 = d(2);
      b.index.resize(static_cast<std::size_t>(s.index));
      std::uniform_int_distribution<int64_t> row(0, b.d0 - 1);
      for (int32_t& i : b.index) i = static_cast<int32_t>(row(rng));
      break;
    }
    case KernelClass::kSoftmax: b.d0 = d(0), b.d1 = d(1); break;
    case KernelClass::kCopy:
      b.src.assign(static_cast<std::size_t>(s.copy), 1);
      b.dst.assign(static_cast<std::size_t>(s.copy), 0);
      break;
    case KernelClass::kNoop: break;
  }
  if (sig.cls == KernelClass::kEmbedding && b.d0 > std::numeric_limits<int32_t>::max())
    throw InputError(to_string(sig) + ": rows = " + std::to_string(b.d0) + ": must be < 2^31");
}

CpuKernel::~CpuKernel() = default;
CpuKernel::CpuKernel(CpuKernel&&) noexcept = default;
CpuKernel& CpuKernel::operator=(CpuKernel&&) noexcept = default;

void CpuKernel::run() {
  Buffers& b = *buffers_;
  switch (sig_.cls) {
    case KernelClass::kNoop: break;
    case KernelClass::kGemm: gemm(b.d0, b.d1, b.d2, b.d3, b.a.data(), b.b.data(), b.c.data()); break;
    case KernelClass::kConv2D: conv2d_forward(b.conv, b.a.data(), b.b.data(), b.c.data(), b.scratch.data()); break;
    case KernelClass::kConv2DBackpropInput:
      conv2d_backprop_input(b.conv, b.a.data(), b.b.data(), b.c.data(), b.scratch.data());
      break;
    case KernelClass::kConv2DBackpropFilter:
      conv2d_backprop_filter(b.conv, b.a.data(), b.b.data(), b.c.data(), b.scratch.data());
      break;
    case KernelClass::kElementwise: elementwise(b.d0, b.d1, b.a.data(), b.d2, b.c.data()); break;
    case KernelClass::kReduction: reduction(b.d0, b.d1, b.a.data(), b.c.data()); break;
    case KernelClass::kEmbedding: embedding(b.d1, b.d2, b.a.data(), b.index.data(), b.c.data()); break;
    case KernelClass::kSoftmax: softmax(b.d0, b.d1, b.a.data(), b.c.data()); break;
    case KernelClass::kCopy:
      if (!b.src.empty()) std::memcpy(b.dst.data(), b.src.data(), b.src.size());
      break;
  }
}

int64_t CpuKernel::buffer_bytes() const {
  const Buffers& b = *buffers_;
  return static_cast<int64_t>(4 * (b.a.size() + b.b.size() + b.c.size() + b.scratch.size() + b.index.size()) +
                              b.src.size() + b.dst.size());
}

const float* CpuKernel::output() const { return buffers_->c.data(); }
int64_t CpuKernel::output_size() const { return static_cast<int64_t>(buffers_->c.size()); }

}  // namespace placelab::cpu
