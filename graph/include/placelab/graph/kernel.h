// Kernel signatures: the computation class and shape of an op. They are the bridge between the
// parts of placelab: the cost model looks calibrated times up by signature, the profiler measures
// kernels by signature, and the executors run a real kernel of exactly that class and shape.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace placelab {

// The computation classes. The order is part of the JSON and calibration formats only through
// names (kernel_class_name), never through the numeric value.
enum class KernelClass : uint8_t {
  kNoop,
  kGemm,                  // m, n, k, batch: batch × (m×k)·(k×n)
  kConv2D,                // n, c, h, w, k, r, s, stride, pad: NCHW input, k filters r×s
  kConv2DBackpropInput,   // same fields as the forward conv it differentiates
  kConv2DBackpropFilter,  // same fields as the forward conv it differentiates
  kElementwise,           // elements, inputs: one output element from `inputs` input elements
  kReduction,             // elements, out: reduce `elements` inputs to `out` outputs
  kEmbedding,             // rows, dim, lookups: gather `lookups` rows of a rows×dim table
  kSoftmax,               // rows, cols
  kCopy,                  // bytes
};
inline constexpr int kNumKernelClasses = 10;

// One op's kernel: its class and up to nine integer dimensions whose meaning depends on the class
// (kernel_fields gives the names, in order). Unused dimensions are 0. Cheap to copy and hash.
struct KernelSignature {
  static constexpr int kMaxDims = 9;
  KernelClass cls = KernelClass::kNoop;
  std::array<int64_t, kMaxDims> dims{};

  static KernelSignature noop() { return {}; }
  static KernelSignature gemm(int64_t m, int64_t n, int64_t k, int64_t batch = 1);
  static KernelSignature conv2d(KernelClass cls, int64_t n, int64_t c, int64_t h, int64_t w, int64_t k,
                                int64_t r, int64_t s, int64_t stride, int64_t pad);
  static KernelSignature elementwise(int64_t elements, int64_t inputs = 1);
  static KernelSignature reduction(int64_t elements, int64_t out);
  static KernelSignature embedding(int64_t rows, int64_t dim, int64_t lookups);
  static KernelSignature softmax(int64_t rows, int64_t cols);
  static KernelSignature copy(int64_t bytes);

  // Named access to a dimension, e.g. sig.dim("k"); throws Error for a name the class lacks.
  int64_t dim(std::string_view field) const;

  friend bool operator==(const KernelSignature&, const KernelSignature&) = default;
};

// "gemm", "conv2d", "conv2d_backprop_input", "conv2d_backprop_filter", "elementwise",
// "reduction", "embedding", "softmax", "copy", "noop".
std::string_view kernel_class_name(KernelClass cls);
// Inverse of kernel_class_name; nullopt for an unknown name.
std::optional<KernelClass> kernel_class_from_name(std::string_view name);
// The names of the class's dimensions in order (e.g. gemm: m, n, k, batch).
std::span<const std::string_view> kernel_fields(KernelClass cls);

// Canonical text form, e.g. "gemm{m=64,n=1024,k=512,batch=1}"; stable, used as a key in files.
std::string to_string(const KernelSignature& sig);
// Parses the text form of to_string; nullopt when malformed.
std::optional<KernelSignature> parse_kernel_signature(std::string_view text);

// Floating-point operations the kernel performs (a multiply-add counts 2), FP32.
double kernel_flops(const KernelSignature& sig);
// Bytes the kernel must move to and from memory at least (FP32 inputs + outputs), a roofline bound.
double kernel_bytes(const KernelSignature& sig);

struct KernelSignatureHash {
  std::size_t operator()(const KernelSignature& sig) const noexcept;
};

}  // namespace placelab
