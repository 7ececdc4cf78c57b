#include "placelab/graph/kernel.h"

#include <algorithm>
#include <functional>

#include "placelab/core/error.h"
#include "placelab/core/numbers.h"

namespace placelab {
namespace {

struct ClassInfo {
  KernelClass cls;
  std::string_view name;
  std::array<std::string_view, KernelSignature::kMaxDims> fields;
  int num_fields;
};

constexpr std::array<ClassInfo, kNumKernelClasses> kClasses{{
    {KernelClass::kNoop, "noop", {}, 0},
    {KernelClass::kGemm, "gemm", {"m", "n", "k", "batch"}, 4},
    {KernelClass::kConv2D, "conv2d", {"n", "c", "h", "w", "k", "r", "s", "stride", "pad"}, 9},
    {KernelClass::kConv2DBackpropInput,
     "conv2d_backprop_input",
     {"n", "c", "h", "w", "k", "r", "s", "stride", "pad"},
     9},
    {KernelClass::kConv2DBackpropFilter,
     "conv2d_backprop_filter",
     {"n", "c", "h", "w", "k", "r", "s", "stride", "pad"},
     9},
    {KernelClass::kElementwise, "elementwise", {"elements", "inputs"}, 2},
    {KernelClass::kReduction, "reduction", {"elements", "out"}, 2},
    {KernelClass::kEmbedding, "embedding", {"rows", "dim", "lookups"}, 3},
    {KernelClass::kSoftmax, "softmax", {"rows", "cols"}, 2},
    {KernelClass::kCopy, "copy", {"bytes"}, 1},
}};

const ClassInfo& info(KernelClass cls) {
  auto i = static_cast<std::size_t>(cls);
  PLACELAB_CHECK(i < kClasses.size() && kClasses[i].cls == cls) << "kernel class " << i;
  return kClasses[i];
}

bool is_conv(KernelClass c) {
  return c == KernelClass::kConv2D || c == KernelClass::kConv2DBackpropInput ||
         c == KernelClass::kConv2DBackpropFilter;
}

// Output spatial size of a convolution; at least 1 so degenerate shapes cost something.
int64_t conv_out(int64_t in, int64_t filter, int64_t stride, int64_t pad) {
  if (stride <= 0) stride = 1;
  return std::max<int64_t>(1, (in + 2 * pad - filter) / stride + 1);
}

}  // namespace

KernelSignature KernelSignature::gemm(int64_t m, int64_t n, int64_t k, int64_t batch) {
  return {KernelClass::kGemm, {m, n, k, batch}};
}
KernelSignature KernelSignature::conv2d(KernelClass c, int64_t n, int64_t ch, int64_t h, int64_t w, int64_t k,
                                        int64_t r, int64_t s, int64_t stride, int64_t pad) {
  PLACELAB_CHECK(is_conv(c)) << "conv2d() needs a convolution class, got " << kernel_class_name(c);
  return {c, {n, ch, h, w, k, r, s, stride, pad}};
}
KernelSignature KernelSignature::elementwise(int64_t elements, int64_t inputs) {
  return {KernelClass::kElementwise, {elements, inputs}};
}
KernelSignature KernelSignature::reduction(int64_t elements, int64_t out) {
  return {KernelClass::kReduction, {elements, out}};
}
KernelSignature KernelSignature::embedding(int64_t rows, int64_t dim, int64_t lookups) {
  return {KernelClass::kEmbedding, {rows, dim, lookups}};
}
KernelSignature KernelSignature::softmax(int64_t rows, int64_t cols) {
  return {KernelClass::kSoftmax, {rows, cols}};
}
KernelSignature KernelSignature::copy(int64_t bytes) { return {KernelClass::kCopy, {bytes}}; }

int64_t KernelSignature::dim(std::string_view field) const {
  const ClassInfo& ci = info(cls);
  for (int i = 0; i < ci.num_fields; ++i)
    if (ci.fields[static_cast<std::size_t>(i)] == field) return dims[static_cast<std::size_t>(i)];
  throw Error(std::string("kernel class ") + std::string(ci.name) + " has no field '" + std::string(field) + "'");
}

std::string_view kernel_class_name(KernelClass cls) { return info(cls).name; }

std::optional<KernelClass> kernel_class_from_name(std::string_view name) {
  for (const ClassInfo& ci : kClasses)
    if (ci.name == name) return ci.cls;
  return std::nullopt;
}

std::span<const std::string_view> kernel_fields(KernelClass cls) {
  const ClassInfo& ci = info(cls);
  return {ci.fields.data(), static_cast<std::size_t>(ci.num_fields)};
}

std::string to_string(const KernelSignature& sig) {
  const ClassInfo& ci = info(sig.cls);
  std::string out(ci.name);
  out += '{';
  for (int i = 0; i < ci.num_fields; ++i) {
    if (i) out += ',';
    out += ci.fields[static_cast<std::size_t>(i)];
    out += '=';
    out += std::to_string(sig.dims[static_cast<std::size_t>(i)]);
  }
  out += '}';
  return out;
}

std::optional<KernelSignature> parse_kernel_signature(std::string_view text) {
  auto brace = text.find('{');
  if (brace == std::string_view::npos || text.empty() || text.back() != '}') return std::nullopt;
  auto cls = kernel_class_from_name(text.substr(0, brace));
  if (!cls) return std::nullopt;
  KernelSignature sig{*cls, {}};
  auto fields = kernel_fields(*cls);
  std::string_view body = text.substr(brace + 1, text.size() - brace - 2);
  std::size_t i = 0;
  while (!body.empty()) {
    auto comma = body.find(',');
    std::string_view item = body.substr(0, comma);
    body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
    auto eq = item.find('=');
    if (eq == std::string_view::npos || i >= fields.size() || item.substr(0, eq) != fields[i]) return std::nullopt;
    const std::optional<int64_t> value = parse_number<int64_t>(item.substr(eq + 1));
    if (!value) return std::nullopt;
    sig.dims[i++] = *value;
  }
  if (i != fields.size()) return std::nullopt;
  return sig;
}

double kernel_flops(const KernelSignature& sig) {
  auto d = [&](std::size_t i) { return static_cast<double>(sig.dims[i]); };
  switch (sig.cls) {
    case KernelClass::kNoop:
    case KernelClass::kCopy:
    case KernelClass::kEmbedding:
      return 0;
    case KernelClass::kGemm:
      return 2 * d(0) * d(1) * d(2) * std::max(1.0, d(3));
    case KernelClass::kConv2D:
    case KernelClass::kConv2DBackpropInput:
    case KernelClass::kConv2DBackpropFilter: {
      double ho = static_cast<double>(conv_out(sig.dims[2], sig.dims[5], sig.dims[7], sig.dims[8]));
      double wo = static_cast<double>(conv_out(sig.dims[3], sig.dims[6], sig.dims[7], sig.dims[8]));
      return 2 * d(0) * d(4) * d(1) * d(5) * d(6) * ho * wo;
    }
    case KernelClass::kElementwise:
      return d(0) * std::max(1.0, d(1));
    case KernelClass::kReduction:
      return d(0);
    case KernelClass::kSoftmax:
      return 5 * d(0) * d(1);
  }
  return 0;
}

double kernel_bytes(const KernelSignature& sig) {
  auto d = [&](std::size_t i) { return static_cast<double>(sig.dims[i]); };
  constexpr double kF = 4;  // FP32
  switch (sig.cls) {
    case KernelClass::kNoop:
      return 0;
    case KernelClass::kCopy:
      return 2 * d(0);
    case KernelClass::kGemm:
      return kF * std::max(1.0, d(3)) * (d(0) * d(2) + d(2) * d(1) + d(0) * d(1));
    case KernelClass::kConv2D:
    case KernelClass::kConv2DBackpropInput:
    case KernelClass::kConv2DBackpropFilter: {
      double ho = static_cast<double>(conv_out(sig.dims[2], sig.dims[5], sig.dims[7], sig.dims[8]));
      double wo = static_cast<double>(conv_out(sig.dims[3], sig.dims[6], sig.dims[7], sig.dims[8]));
      return kF * (d(0) * d(1) * d(2) * d(3) + d(4) * d(1) * d(5) * d(6) + d(0) * d(4) * ho * wo);
    }
    case KernelClass::kElementwise:
      return kF * d(0) * (std::max(1.0, d(1)) + 1);
    case KernelClass::kReduction:
      return kF * (d(0) + d(1));
    case KernelClass::kEmbedding:
      return kF * 2 * d(2) * d(1) + 4 * d(2);
    case KernelClass::kSoftmax:
      return kF * 2 * d(0) * d(1);
  }
  return 0;
}

std::size_t KernelSignatureHash::operator()(const KernelSignature& sig) const noexcept {
  std::size_t h = static_cast<std::size_t>(sig.cls) * 0x9e3779b97f4a7c15ULL;
  for (int64_t v : sig.dims) h = (h ^ std::hash<int64_t>{}(v)) * 0x100000001b3ULL + 0x9e3779b9;
  return h;
}

}  // namespace placelab
