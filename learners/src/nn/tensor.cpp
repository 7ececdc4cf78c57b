#include "placelab/learners/nn/tensor.h"

#include <cmath>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "placelab/core/error.h"

namespace placelab::nn {

#if defined(__AVX2__) && defined(__FMA__)
namespace {

// The kernels' register blocks are arrays indexed in loops of constant trip count; unrolled
// before GCC's scalar replacement they stay in registers (without this, GCC kept them on the stack
// and stored every accumulator on every step of k: half the speed).
#define PLACELAB_UNROLL _Pragma("GCC unroll 16")

// C[0:8·RV, 0:NC] (+)= A·X over k, A column-major: one 8-row vector of A per RV, one broadcast of
// X per column, RV·NC accumulators kept in registers (at most 12 of the 16).
template <int RV, int NC, bool Accumulate>
void axpy_block(const float* A, Index lda, const float* X, Index ldx, Index k, float* C, Index ldc) {
  __m256 s[RV][NC];
  PLACELAB_UNROLL for (int v = 0; v < RV; ++v)
    PLACELAB_UNROLL for (int j = 0; j < NC; ++j) s[v][j] = _mm256_setzero_ps();
  for (Index p = 0; p < k; ++p) {
    __m256 a[RV];
    PLACELAB_UNROLL for (int v = 0; v < RV; ++v) a[v] = _mm256_loadu_ps(A + 8 * v + p * lda);
    PLACELAB_UNROLL for (int j = 0; j < NC; ++j) {
      const __m256 x = _mm256_broadcast_ss(X + p + j * ldx);
      PLACELAB_UNROLL for (int v = 0; v < RV; ++v) s[v][j] = _mm256_fmadd_ps(a[v], x, s[v][j]);
    }
  }
  PLACELAB_UNROLL for (int v = 0; v < RV; ++v)
    PLACELAB_UNROLL for (int j = 0; j < NC; ++j) {
      float* c = C + 8 * v + j * ldc;
      if constexpr (Accumulate) _mm256_storeu_ps(c, _mm256_add_ps(_mm256_loadu_ps(c), s[v][j]));
      else _mm256_storeu_ps(c, s[v][j]);
    }
}

template <int RV, bool Accumulate>
void axpy_rows(const float* A, Index lda, const float* X, Index ldx, Index n, Index k, float* C, Index ldc) {
  Index j = 0;
  for (; j + 6 <= n; j += 6) axpy_block<RV, 6, Accumulate>(A, lda, X + j * ldx, ldx, k, C + j * ldc, ldc);
  const float* x = X + j * ldx;
  float* c = C + j * ldc;
  switch (n - j) {
    case 5: axpy_block<RV, 5, Accumulate>(A, lda, x, ldx, k, c, ldc); break;
    case 4: axpy_block<RV, 4, Accumulate>(A, lda, x, ldx, k, c, ldc); break;
    case 3: axpy_block<RV, 3, Accumulate>(A, lda, x, ldx, k, c, ldc); break;
    case 2: axpy_block<RV, 2, Accumulate>(A, lda, x, ldx, k, c, ldc); break;
    case 1: axpy_block<RV, 1, Accumulate>(A, lda, x, ldx, k, c, ldc); break;
    default: break;
  }
}

template <bool Accumulate>
void axpy_product(Index m, Index n, Index k, const float* A, Index lda, const float* X, Index ldx, float* C, Index ldc) {
  // Sixteen rows of C at a time: the 16 × k strip of A stays in L1 while every column chunk reads it.
  Index i = 0;
  for (; i + 16 <= m; i += 16) axpy_rows<2, Accumulate>(A + i, lda, X, ldx, n, k, C + i, ldc);
  for (; i + 8 <= m; i += 8) axpy_rows<1, Accumulate>(A + i, lda, X, ldx, n, k, C + i, ldc);
  for (; i < m; ++i)
    for (Index j = 0; j < n; ++j) {
      float sum = 0;
      for (Index p = 0; p < k; ++p) sum = std::fma(A[i + p * lda], X[p + j * ldx], sum);
      float& c = C[i + j * ldc];
      c = Accumulate ? c + sum : sum;
    }
}

float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// C[0:RI, 0:NJ] (+)= Wᵀ·X with W column-major (its columns are A's rows): dot products of
// contiguous vectors, 8 lanes at a time, the last k mod 8 terms added after the lanes are summed.
template <int RI, int NJ>
void dot_block(const float* W, Index ldw, const float* X, Index ldx, Index k, float* C, Index ldc, bool accumulate) {
  __m256 s[RI][NJ];
  PLACELAB_UNROLL for (int i = 0; i < RI; ++i)
    PLACELAB_UNROLL for (int j = 0; j < NJ; ++j) s[i][j] = _mm256_setzero_ps();
  const Index k8 = k / 8 * 8;
  for (Index p = 0; p < k8; p += 8) {
    __m256 x[NJ];
    PLACELAB_UNROLL for (int j = 0; j < NJ; ++j) x[j] = _mm256_loadu_ps(X + p + j * ldx);
    PLACELAB_UNROLL for (int i = 0; i < RI; ++i) {
      const __m256 w = _mm256_loadu_ps(W + p + i * ldw);
      PLACELAB_UNROLL for (int j = 0; j < NJ; ++j) s[i][j] = _mm256_fmadd_ps(w, x[j], s[i][j]);
    }
  }
  PLACELAB_UNROLL for (int i = 0; i < RI; ++i)
    PLACELAB_UNROLL for (int j = 0; j < NJ; ++j) {
      float sum = horizontal_sum(s[i][j]);
      for (Index p = k8; p < k; ++p) sum = std::fma(W[p + i * ldw], X[p + j * ldx], sum);
      float& c = C[i + j * ldc];
      c = accumulate ? c + sum : sum;
    }
}

template <int RI>
void dot_rows(const float* W, Index ldw, const float* X, Index ldx, Index n, Index k, float* C, Index ldc,
              bool accumulate) {
  Index j = 0;
  for (; j + 3 <= n; j += 3) dot_block<RI, 3>(W, ldw, X + j * ldx, ldx, k, C + j * ldc, ldc, accumulate);
  if (n - j == 2) dot_block<RI, 2>(W, ldw, X + j * ldx, ldx, k, C + j * ldc, ldc, accumulate);
  if (n - j == 1) dot_block<RI, 1>(W, ldw, X + j * ldx, ldx, k, C + j * ldc, ldc, accumulate);
}

}  // namespace

bool small_product(Index m, Index n, Index k, const float* A, Index lda, bool a_transposed, const float* X, Index ldx,
                   float* C, Index ldc, bool accumulate) {
  if (n < kSmallProductMinColumns || n > kSmallProductMaxColumns || m < 1 || k < 1) return false;
  if (a_transposed) {
    // Four rows of C at a time: each reads four columns of W once per three columns of X.
    Index i = 0;
    for (; i + 4 <= m; i += 4) dot_rows<4>(A + i * lda, lda, X, ldx, n, k, C + i, ldc, accumulate);
    for (; i < m; ++i) dot_rows<1>(A + i * lda, lda, X, ldx, n, k, C + i, ldc, accumulate);
    return true;
  }
  if (accumulate) axpy_product<true>(m, n, k, A, lda, X, ldx, C, ldc);
  else axpy_product<false>(m, n, k, A, lda, X, ldx, C, ldc);
  return true;
}
#undef PLACELAB_UNROLL
#else
bool small_product(Index, Index, Index, const float*, Index, bool, const float*, Index, float*, Index, bool) {
  return false;
}
#endif

template <typename T>
Index ParamSet<T>::num_values() const {
  Index n = 0;
  for (const Param<T>* p : params_) n += p->size();
  return n;
}

template <typename T>
void ParamSet<T>::zero_grad() {
  for (Param<T>* p : params_) p->grad.setZero();
}

template <typename T>
double ParamSet<T>::grad_norm() const {
  double sum = 0;
  for (const Param<T>* p : params_) sum += p->grad.template cast<double>().squaredNorm();
  return std::sqrt(sum);
}

template <typename T>
void ParamSet<T>::scale_grad(T factor) {
  for (Param<T>* p : params_) p->grad *= factor;
}

template <typename T>
std::vector<T> ParamSet<T>::values() const {
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(num_values()));
  for (const Param<T>* p : params_) out.insert(out.end(), p->value.data(), p->value.data() + p->size());
  return out;
}

template <typename T>
std::vector<T> ParamSet<T>::grads() const {
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(num_values()));
  for (const Param<T>* p : params_) out.insert(out.end(), p->grad.data(), p->grad.data() + p->size());
  return out;
}

template <typename T>
void ParamSet<T>::set_values(std::span<const T> values) {
  PLACELAB_CHECK(static_cast<Index>(values.size()) == num_values())
      << values.size() << " values for " << num_values() << " parameters";
  const T* src = values.data();
  for (Param<T>* p : params_) {
    std::copy(src, src + p->size(), p->value.data());
    src += p->size();
  }
}

template class ParamSet<float>;
template class ParamSet<double>;

}  // namespace placelab::nn
