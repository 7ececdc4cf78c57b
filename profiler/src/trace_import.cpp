// The trace importer's entry points (import_trace, the report's text), the helpers its three files
// share and the signatures of torch ops from recorded shapes; trace_collect.cpp and
// trace_calibrate.cpp hold the rest (trace_import_internal.h).
#include "placelab/profiler/trace_import.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <sstream>

#include <zlib.h>

#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/core/json_locator.h"
#include "placelab/core/numbers.h"
#include "placelab/core/units.h"
#include "trace_import_internal.h"

namespace placelab::trace_detail {
namespace {

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

// "[1, 2]" or "2" → the integers in it; one too large for int64_t is left out.
std::vector<int64_t> ints_in(std::string_view text) {
  std::vector<int64_t> out;
  std::string cur;
  const auto flush = [&] {
    if (!cur.empty() && cur != "-")
      if (auto v = parse_number<int64_t>(cur)) out.push_back(*v);
    cur.clear();
  };
  for (char c : text) {
    if ((c >= '0' && c <= '9') || (c == '-' && cur.empty())) cur += c;
    else flush();
  }
  flush();
  return out;
}

const std::set<std::string, std::less<>>& elementwise_ops() {
  static const std::set<std::string, std::less<>> ops = {
      "aten::add",       "aten::add_",          "aten::sub",           "aten::sub_",        "aten::mul",
      "aten::mul_",      "aten::div",           "aten::div_",          "aten::relu",        "aten::relu_",
      "aten::sigmoid",   "aten::sigmoid_",      "aten::tanh",          "aten::tanh_",       "aten::gelu",
      "aten::silu",      "aten::silu_",         "aten::threshold_backward", "aten::clamp_min", "aten::clamp_min_",
      "aten::copy_",     "aten::fill_",         "aten::zero_",         "aten::neg",         "aten::exp",
      "aten::sqrt",      "aten::rsqrt",         "aten::pow",           "aten::addcmul_",    "aten::addcdiv_",
      "aten::where",     "aten::dropout",       "aten::native_dropout", "aten::gelu_backward",
      "aten::sigmoid_backward", "aten::tanh_backward", "aten::mse_loss_backward", "aten::clone",
      "aten::contiguous",
  };
  return ops;
}

// One spelling of a copy direction in an event's name or kind, and the kind it stands for.
struct CopyKindEntry {
  const char* token;
  const char* kind;
};
constexpr CopyKindEntry kCopyKinds[] = {{"HtoD", "HtoD"}, {"DtoH", "DtoH"}, {"DtoD", "DtoD"}, {"PtoP", "PtoP"},
                                        {"HtoH", "HtoH"}, {"HostToDevice", "HtoD"}, {"DeviceToHost", "DtoH"},
                                        {"DeviceToDevice", "DtoD"}, {"PeerToPeer", "PtoP"}};

// One value for both spatial axes: [2, 2] or 2 → 2; [] → `if_empty` (PyTorch's "same as the
// kernel" for a pooling stride); nullopt when not recorded or asymmetric ([1, 2]).
std::optional<int64_t> concrete_square(std::span<const std::string> concrete, std::size_t index,
                                       std::optional<int64_t> if_empty = std::nullopt) {
  auto v = concrete_ints(concrete, index);
  if (!v) return std::nullopt;
  if (v->empty()) return if_empty;
  if (std::any_of(v->begin(), v->end(), [&](int64_t x) { return x != v->front(); })) return std::nullopt;
  return v->front();
}

}  // namespace

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string arg_string(const json& args, const char* key) {
  if (!args.is_object()) return {};
  auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// A concrete input (Kineto "Concrete Inputs"): its integers when recorded, nullopt when the trace
// left the position empty ("" is what the profiler writes for tensors and unrecorded values).
std::optional<std::vector<int64_t>> concrete_ints(std::span<const std::string> concrete, std::size_t index) {
  if (index >= concrete.size() || concrete[index].empty()) return std::nullopt;
  return ints_in(concrete[index]);
}

// A concrete bool list, "[True, True, False]" (PyTorch prints Python literals).
std::optional<std::vector<bool>> concrete_bools(std::span<const std::string> concrete, std::size_t index) {
  if (index >= concrete.size() || concrete[index].empty()) return std::nullopt;
  std::vector<bool> out;
  std::string word;
  const auto flush = [&] {
    if (word == "True" || word == "true" || word == "1") out.push_back(true);
    else if (word == "False" || word == "false" || word == "0") out.push_back(false);
    word.clear();
  };
  for (char ch : concrete[index]) {
    if (std::isalnum(static_cast<unsigned char>(ch))) word += ch;
    else flush();
  }
  flush();
  return out;
}

bool contains_ci(std::string_view s, std::string_view needle) {
  auto it = std::search(s.begin(), s.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != s.end();
}

[[noreturn]] void fail(std::string_view origin, int line, const std::string& what) {
  throw InputError(std::string(origin) + ":" + std::to_string(line) + ": " + what);
}

// "cpu_op 359, cuda_runtime 361, (none) 2 …": the most frequent values first, `limit` of them.
std::string counts_text(const std::map<std::string, int64_t>& counts, std::size_t limit) {
  std::vector<std::pair<std::string, int64_t>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (std::size_t i = 0; i < v.size() && i < limit; ++i) {
    if (i) out += ", ";
    out += v[i].first.empty() ? std::string("(none)") : v[i].first;
    out += ' ';
    out += std::to_string(v[i].second);
  }
  if (v.size() > limit) out += ", …";
  if (v.empty()) out = "none";
  return out;
}

// ---------------------------------------------------------------------------------------------
// Signatures from recorded shapes.

namespace {

// Where a convolution op keeps stride, padding, dilation, groups and transposed among its inputs
// (the aten schemas: conv2d(input, weight, bias, stride, padding, dilation, groups);
// convolution / _convolution(input, weight, bias, stride, padding, dilation, transposed,
// output_padding, groups, …); cudnn_convolution(self, weight, padding, stride, dilation, groups, …)
// since PyTorch 1.8, with a bias after the weight before).
struct ConvArgs {
  std::size_t stride, padding, dilation, groups;
  std::optional<std::size_t> transposed;
};
std::optional<ConvArgs> conv_args(std::string_view op, std::span<const std::vector<int64_t>> dims) {
  if (op == "aten::conv2d") return ConvArgs{3, 4, 5, 6, std::nullopt};
  if (op == "aten::convolution" || op == "aten::_convolution") return ConvArgs{3, 4, 5, 8, 6};
  if (op == "aten::cudnn_convolution") {
    if (dims.size() > 2 && dims[2].size() == 1) return ConvArgs{4, 3, 5, 6, std::nullopt};  // with bias
    return ConvArgs{3, 2, 4, 5, std::nullopt};
  }
  return std::nullopt;
}

// The conv2d fields of a plain convolution (input [N,C,H,W], weight [K,C,R,S]) from the concrete
// inputs; `why` says what is missing when nullopt.
std::optional<KernelSignature> conv_signature(KernelClass cls, const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                                              std::span<const std::string> concrete, const ConvArgs& a,
                                              TraceDropReason& why) {
  why = TraceDropReason::kNoMapping;
  if (x.size() != 4 || w.size() != 4 || x[1] != w[1]) return std::nullopt;  // not 2-D, or grouped
  const auto stride = concrete_square(concrete, a.stride), pad = concrete_square(concrete, a.padding),
             dilation = concrete_square(concrete, a.dilation);
  if (!concrete_ints(concrete, a.stride) || !concrete_ints(concrete, a.padding) || !concrete_ints(concrete, a.dilation)) {
    why = TraceDropReason::kStrideNotRecorded;
    return std::nullopt;
  }
  if (!stride || !pad || dilation != 1 || *stride < 1 || *pad < 0) return std::nullopt;  // asymmetric or dilated
  if (auto g = concrete_ints(concrete, a.groups); g && (g->size() != 1 || g->front() != 1)) return std::nullopt;
  if (a.transposed)
    if (auto t = concrete_bools(concrete, *a.transposed); t && !t->empty() && t->front()) return std::nullopt;
  return KernelSignature::conv2d(cls, x[0], x[1], x[2], x[3], w[0], w[2], w[3], *stride, *pad);
}

// Output extent of a pooling window along one axis (PyTorch's pooling_output_shape).
int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = span / s + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;  // the last window must start inside the input
  return out;
}

// max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode) and
// avg_pool2d(self, kernel_size, stride, padding, ceil_mode, …) → the builder's MaxPool / AvgPool
// signature reduction{out × k², out}.
std::optional<KernelSignature> pool_signature(bool max, const std::vector<int64_t>& x, std::span<const std::string> concrete,
                                              TraceDropReason& why) {
  why = TraceDropReason::kNoMapping;
  if (x.size() != 4) return std::nullopt;
  const std::size_t ceil_at = max ? 5 : 4;
  if (!concrete_ints(concrete, 1) || !concrete_ints(concrete, 2) || !concrete_ints(concrete, 3) ||
      (max && !concrete_ints(concrete, 4)) || !concrete_bools(concrete, ceil_at)) {
    why = TraceDropReason::kStrideNotRecorded;
    return std::nullopt;
  }
  const auto k = concrete_square(concrete, 1);
  const auto s = concrete_square(concrete, 2, k);
  const auto p = concrete_square(concrete, 3);
  const auto d = max ? concrete_square(concrete, 4) : std::optional<int64_t>(1);
  const auto ceil = concrete_bools(concrete, ceil_at);
  if (!k || !s || !p || !d || *k < 1 || *s < 1 || *p < 0 || *d < 1) return std::nullopt;
  const bool ceil_mode = !ceil->empty() && ceil->front();
  const int64_t ho = pooled(x[2], *k, *s, *p, *d, ceil_mode), wo = pooled(x[3], *k, *s, *p, *d, ceil_mode);
  if (ho < 1 || wo < 1) return std::nullopt;
  const int64_t out = x[0] * x[1] * ho * wo;
  return KernelSignature::reduction(out * *k * *k, out);
}

}  // namespace

// The signature of one op instance from its shapes, or the reason there is none.
std::optional<KernelSignature> torch_signature(std::string_view op, std::span<const std::vector<int64_t>> dims,
                                               std::span<const std::string> concrete, TraceDropReason& why) {
  why = TraceDropReason::kNoMapping;
  auto rank = [&](std::size_t i) { return i < dims.size() ? dims[i].size() : std::size_t{0}; };
  auto elements = [&](std::size_t i) { return i < dims.size() && !dims[i].empty() ? product(dims[i]) : int64_t{0}; };
  for (const auto& d : dims)
    if (!std::all_of(d.begin(), d.end(), [](int64_t x) { return x > 0; }))
      return std::nullopt;  // empty tensors launch nothing worth a signature

  if (op == "aten::mm" && rank(0) == 2 && rank(1) == 2 && dims[0][1] == dims[1][0])
    return KernelSignature::gemm(dims[0][0], dims[1][1], dims[0][1]);
  if (op == "aten::addmm" && rank(1) == 2 && rank(2) == 2 && dims[1][1] == dims[2][0])
    return KernelSignature::gemm(dims[1][0], dims[2][1], dims[1][1]);
  if (op == "aten::bmm" && rank(0) == 3 && rank(1) == 3 && dims[0][0] == dims[1][0] && dims[0][2] == dims[1][1])
    return KernelSignature::gemm(dims[0][1], dims[1][2], dims[0][2], dims[0][0]);
  if (op == "aten::baddbmm" && rank(1) == 3 && rank(2) == 3 && dims[1][0] == dims[2][0] && dims[1][2] == dims[2][1])
    return KernelSignature::gemm(dims[1][1], dims[2][2], dims[1][2], dims[1][0]);
  if (op == "aten::matmul" && rank(0) >= 2 && rank(1) == 2 && dims[0].back() == dims[1][0]) {
    // Leading dimensions of the left operand fold into the rows (one GEMM).
    const int64_t k = dims[0].back();
    return KernelSignature::gemm(product(dims[0]) / k, dims[1][1], k);
  }
  if (op == "aten::matmul" && rank(0) == 3 && rank(1) == 3 && dims[0][0] == dims[1][0] && dims[0][2] == dims[1][1])
    return KernelSignature::gemm(dims[0][1], dims[1][2], dims[0][2], dims[0][0]);
  if (op == "aten::linear" && rank(0) >= 1 && rank(1) == 2 && dims[0].back() == dims[1][1]) {
    const int64_t k = dims[0].back();
    return KernelSignature::gemm(product(dims[0]) / k, dims[1][0], k);
  }
  if (auto a = conv_args(op, dims)) {
    if (rank(0) != 4 || rank(1) != 4) return std::nullopt;
    return conv_signature(KernelClass::kConv2D, dims[0], dims[1], concrete, *a, why);
  }
  if ((op == "aten::softmax" || op == "aten::_softmax" || op == "aten::log_softmax" || op == "aten::_log_softmax") &&
      rank(0) >= 1) {
    const int64_t cols = dims[0].back();
    return KernelSignature::softmax(product(dims[0]) / cols, cols);
  }
  // The builder's signatures of the TensorFlow counterparts (models/src/builder_layers.cpp):
  // FusedBatchNorm elementwise{e, 2}, FusedBatchNormGrad elementwise{e, 3}, MaxPoolGrad
  // elementwise{in, 3}, AvgPoolGrad elementwise{in, 1}, the cross-entropy gradient elementwise{n × c, 2}.
  if ((op == "aten::batch_norm" || op == "aten::cudnn_batch_norm" || op == "aten::native_batch_norm" ||
       op == "aten::_batch_norm_impl_index") && rank(0) >= 2)
    return KernelSignature::elementwise(elements(0), 2);
  if ((op == "aten::cudnn_batch_norm_backward" || op == "aten::native_batch_norm_backward") && rank(0) >= 2)
    return KernelSignature::elementwise(elements(0), 3);
  if ((op == "aten::max_pool2d" || op == "aten::max_pool2d_with_indices") && rank(0) == 4)
    return pool_signature(true, dims[0], concrete, why);
  if (op == "aten::avg_pool2d" && rank(0) == 4) return pool_signature(false, dims[0], concrete, why);
  if (op == "aten::adaptive_avg_pool2d" && rank(0) == 4) {
    auto out = concrete_ints(concrete, 1);
    if (!out) {
      why = TraceDropReason::kStrideNotRecorded;
      return std::nullopt;
    }
    if (out->size() == 1) out->push_back(out->front());
    if (out->size() != 2 || (*out)[0] < 1 || (*out)[1] < 1 || dims[0][2] % (*out)[0] || dims[0][3] % (*out)[1])
      return std::nullopt;  // windows of unequal size: no one reduction describes it
    return KernelSignature::reduction(elements(0), dims[0][0] * dims[0][1] * (*out)[0] * (*out)[1]);
  }
  if (op == "aten::max_pool2d_with_indices_backward" && rank(1) == 4) return KernelSignature::elementwise(elements(1), 3);
  if ((op == "aten::avg_pool2d_backward" || op == "aten::_adaptive_avg_pool2d_backward" ||
       op == "aten::adaptive_avg_pool2d_backward") && rank(1) == 4)
    return KernelSignature::elementwise(elements(1), 1);
  if (op == "aten::_log_softmax_backward_data" && rank(0) >= 1) return KernelSignature::elementwise(elements(0), 2);
  // Not in the zoo's builder (its cross-entropy is one op): the loss gathers one value per row and
  // reduces them; its gradient writes every logit.
  if ((op == "aten::nll_loss" || op == "aten::nll_loss_nd" || op == "aten::nll_loss_forward") && rank(0) >= 1)
    return KernelSignature::reduction(dims[0][0], 1);
  if (op == "aten::nll_loss_backward" && rank(1) >= 1) return KernelSignature::elementwise(elements(1), 1);
  if (op == "aten::embedding" && rank(0) == 2 && rank(1) >= 1)
    return KernelSignature::embedding(dims[0][0], dims[0][1], product(dims[1]));
  if (elementwise_ops().count(op)) {
    int64_t largest = 0, inputs = 0;
    for (const auto& d : dims)
      if (!d.empty()) {
        largest = std::max(largest, product(d));
        ++inputs;
      }
    if (largest == 0) return std::nullopt;
    // copy_ and fill_ read at most one tensor; a fill reads none but still writes every element.
    return KernelSignature::elementwise(largest, std::max<int64_t>(1, op == "aten::copy_" ? 1 : inputs));
  }
  return std::nullopt;
}

}  // namespace placelab::trace_detail

namespace placelab {

// The entry points below use the internals (trace_import_internal.h) unqualified, as when they
// were one file's anonymous namespace.
using namespace trace_detail;

std::string_view trace_format_name(TraceFormat format) {
  switch (format) {
    case TraceFormat::kAuto: return "auto";
    case TraceFormat::kKineto: return "kineto";
    case TraceFormat::kTensorFlow: return "tensorflow";
  }
  return "?";
}

void TraceImportOptions::validate() const {
  if (gpu_prefix.empty()) throw InputError("TraceImportOptions.gpu_prefix = \"\": must not be empty");
  if (host_device.empty()) throw InputError("TraceImportOptions.host_device = \"\": must not be empty");
  if (starts_with(host_device, gpu_prefix))
    throw InputError("TraceImportOptions.host_device = \"" + host_device + "\": must not start with gpu_prefix \"" +
                     gpu_prefix + "\" (it would clash with a GPU's name)");
  if (step_marker.empty()) throw InputError("TraceImportOptions.step_marker = \"\": must not be empty");
  if (first_step < 0 || last_step < -1 || (last_step >= 0 && last_step < first_step))
    throw InputError("TraceImportOptions steps = " + std::to_string(first_step) + ":" + std::to_string(last_step) +
                     ": must be FIRST:LAST with 0 <= FIRST <= LAST (0-based step indices)");
  fit.validate();
}

std::optional<std::string> memcpy_kind(std::string_view name) {
  for (const CopyKindEntry& e : kCopyKinds)
    if (name.find(e.token) != std::string_view::npos) return std::string(e.kind);
  return std::nullopt;
}

std::optional<KernelSignature> signature_for_torch_op(std::string_view op, std::span<const std::vector<int64_t>> dims,
                                                      std::span<const std::string> concrete) {
  TraceDropReason why = TraceDropReason::kNoMapping;
  return torch_signature(op, dims, concrete, why);
}

std::optional<ConvBackwardSignatures> conv_backward_signatures(std::span<const std::vector<int64_t>> dims,
                                                               std::span<const std::string> concrete) {
  // convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
  // transposed, output_padding, groups, output_mask)
  if (dims.size() < 3 || dims[1].size() != 4 || dims[2].size() != 4) return std::nullopt;
  const auto mask = concrete_bools(concrete, 10);
  if (!mask || mask->size() < 2) return std::nullopt;
  TraceDropReason why = TraceDropReason::kNoMapping;
  const ConvArgs args{4, 5, 6, 9, 7};
  ConvBackwardSignatures out;
  if ((*mask)[0]) {
    out.input_grad = conv_signature(KernelClass::kConv2DBackpropInput, dims[1], dims[2], concrete, args, why);
    if (!out.input_grad) return std::nullopt;
  }
  if ((*mask)[1]) {
    out.filter_grad = conv_signature(KernelClass::kConv2DBackpropFilter, dims[1], dims[2], concrete, args, why);
    if (!out.filter_grad) return std::nullopt;
  }
  return out;
}

std::string_view trace_drop_reason_text(TraceDropReason reason) {
  switch (reason) {
    case TraceDropReason::kNoShapes: return "no shapes recorded";
    case TraceDropReason::kStrideNotRecorded: return "stride/padding not recorded";
    case TraceDropReason::kNoMapping: return "no mapping";
    case TraceDropReason::kCountMismatch: return "count mismatch with the graph";
    case TraceDropReason::kUnsplittableBackward: return "unsplittable backward";
    case TraceDropReason::kOutsideSteps: return "outside profiler steps";
  }
  return "?";
}

std::string read_maybe_gzip(const std::filesystem::path& path, int64_t max_bytes) {
  auto too_big = [&](const char* what) {
    return InputError(path.string() + ": " + what + " more than " + std::to_string(max_bytes >> 20) +
                      " MiB (the limit; profile fewer steps, or raise it with --max-trace-mb)");
  };
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && std::filesystem::is_regular_file(path, ec) && size > static_cast<std::uintmax_t>(max_bytes))
    throw too_big("the file holds");
  // Regular files only (a FIFO or a device is refused, not read without end), at most max_bytes.
  std::string raw = read_text_file(path, max_bytes);
  if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f || static_cast<unsigned char>(raw[1]) != 0x8b)
    return raw;

  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header; concatenated members are handled by the reset below.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw Error("zlib: inflateInit2 failed");
  std::string out;
  // The gzip trailer's ISIZE (the last member's length mod 2^32) sizes the text once, up to the
  // limit; a wrong one only costs the doubling it would have saved.
  if (raw.size() >= 18) {
    const auto* tail = reinterpret_cast<const unsigned char*>(raw.data() + raw.size() - 4);
    const uint32_t isize = tail[0] | tail[1] << 8 | tail[2] << 16 | static_cast<uint32_t>(tail[3]) << 24;
    out.reserve(static_cast<std::size_t>(std::min<int64_t>(isize, max_bytes)));
  }
  std::vector<char> buf(1 << 20);
  zs.next_in = reinterpret_cast<Bytef*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  int rc = Z_OK;
  while (true) {
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    const std::size_t produced = buf.size() - zs.avail_out;
    // Checked before the text grows: appending first doubled a full 512 MiB text to 1 GiB for a
    // gzip bomb (scripts/hostile-inputs.sh measured 1,047 MB).
    if (static_cast<int64_t>(out.size() + produced) > max_bytes) {
      inflateEnd(&zs);
      throw too_big("its gzip data inflate to");
    }
    out.append(buf.data(), produced);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      inflateReset(&zs);  // another gzip member follows
      continue;
    }
    if (rc != Z_OK) {
      std::string msg = zs.msg ? zs.msg : "error " + std::to_string(rc);
      inflateEnd(&zs);
      throw InputError(path.string() + ": corrupt gzip data: " + msg);
    }
    if (zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw InputError(path.string() + ": corrupt gzip data: truncated stream");
    }
  }
  inflateEnd(&zs);
  return out;
}

TraceImport import_trace_text(std::string_view text, std::string_view origin, const TraceImportOptions& options) {
  options.validate();
  json root;
  if (auto byte = JsonLocator(text).first_byte_deeper_than(kMaxJsonDepth))
    fail(origin, JsonLocator(text).line_of_byte(*byte), "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    JsonLocator where(text);
    // nlohmann reports the byte after the offending one; the line of the last byte it read.
    const std::size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    const auto colon = what.find("syntax error");
    fail(origin, where.line_of_byte(byte), "invalid JSON: " + (colon != std::string::npos ? what.substr(colon) : what));
  } catch (const json::exception& e) {
    // A number beyond double's range ("number overflow parsing '1e400'"): nlohmann gives no
    // position, so the line is that of the first occurrence of the quoted text.
    std::string what = e.what();
    int line = 1;
    const auto open = what.find('\''), close = what.rfind('\'');
    if (open != std::string::npos && close > open)
      if (const auto at = text.find(what.substr(open + 1, close - open - 1)); at != std::string_view::npos)
        line = JsonLocator(text).line_of_byte(at);
    const auto message = what.find("] ");
    fail(origin, line, "invalid JSON: " + (message != std::string::npos ? what.substr(message + 2) : what));
  }
  const json* events = nullptr;
  if (root.is_array()) events = &root;
  else if (root.is_object() && root.contains("traceEvents")) events = &root["traceEvents"];
  if (!events) fail(origin, 1, "traceEvents: missing (not a Chrome trace)");
  if (!events->is_array()) {
    JsonLocator where(text);
    fail(origin, where.line_of("/traceEvents"), "traceEvents: must be an array");
  }
  check_event_times(*events, text, origin, root.is_array() ? "" : "/traceEvents");

  TraceFormat format = options.format;
  if (format == TraceFormat::kAuto) {
    bool kineto = false, tf = false;
    std::map<std::string, int64_t> categories;
    for (const json& e : *events) {
      if (!e.is_object()) continue;
      const std::string cat = arg_string(e, "cat");
      if (arg_string(e, "ph") == "X") ++categories[cat];
      const KinetoCat k = kineto_category(cat);
      if (k != KinetoCat::kIgnored && k != KinetoCat::kUnknown) kineto = true;
      if (arg_string(e, "ph") == "M" && e.contains("args") && arg_string(e["args"], "name").find("/device:") != std::string::npos)
        tf = true;
      if (e.contains("args") && e["args"].is_object() && e["args"].contains("op")) tf = true;
    }
    if (kineto) format = TraceFormat::kKineto;
    else if (tf) format = TraceFormat::kTensorFlow;
    else
      fail(origin, 1,
           "traceEvents: neither PyTorch profiler (Kineto) nor TensorFlow timeline events found (complete \"X\" "
           "events by category: " +
               counts_text(categories) +
               "); expected Kineto categories kernel, cuda_runtime, cpu_op, user_annotation, gpu_memcpy (PyTorch "
               ">= 1.9) or Kernel, Runtime, Operator, Memcpy (1.8), or a TensorFlow timeline (process names "
               "\"/device:GPU:0 …\", args.op)");
  }
  Collected c = format == TraceFormat::kKineto ? collect_kineto(root, *events, origin, options.step_marker)
                                               : collect_tensorflow(*events, options, origin);
  if (options.first_step > 0 || options.last_step >= 0) {
    // Some steps only: the kernels launched in the others (or outside every step) are left out.
    if (format != TraceFormat::kKineto || c.steps == 0)
      fail(origin, 1, "steps " + std::to_string(options.first_step) + ":" + std::to_string(options.last_step) +
                          " asked for, but the trace has no step markers (\"" + options.step_marker + "\")");
    const int last = options.last_step < 0 ? c.steps - 1 : options.last_step;
    if (last >= c.steps)
      fail(origin, 1, "steps " + std::to_string(options.first_step) + ":" + std::to_string(last) + ": the trace has " +
                          std::to_string(c.steps) + " steps (0.." + std::to_string(c.steps - 1) + ")");
    std::erase_if(c.kernels, [&](const KernelRec& k) { return k.step < options.first_step || k.step > last; });
  }
  return build(c, origin, options);
}

TraceImport import_trace(const std::filesystem::path& path, const TraceImportOptions& options) {
  if (options.max_bytes < 1) throw InputError("TraceImportOptions.max_bytes = " + std::to_string(options.max_bytes) + ": must be >= 1");
  const std::string text = read_maybe_gzip(path, options.max_bytes);
  return import_trace_text(text, path.string(), options);
}

std::string ImportReport::brief() const {
  std::ostringstream o;
  o << origin << ": " << trace_format_name(format) << " trace";
  if (!gpu_name.empty()) o << ", GPU " << gpu_name;
  o << "\n  kernels: " << kernels << " (" << format_seconds(total_kernel_s) << ")";
  if (unattributed_kernels) o << ", " << unattributed_kernels << " not attributed to an op";
  o << "\n  steps: " << steps << ", kernel time per step " << format_seconds(kernel_time_per_step_s) << "\n";
  for (const TraceCopyKind& k : copies) {
    o << "  copies " << k.kind << (k.device.empty() ? "" : " on " + k.device) << ": " << k.count << ", " << k.bytes
      << " bytes";
    if (k.fit.bandwidth_Bps > 0)
      o << ", " << (k.fitted ? "fit " : "aggregate ") << k.fit.bandwidth_Bps / 1e9 << " GB/s + "
        << format_seconds(k.fit.latency_s);
    o << "\n";
  }
  if (memsets) o << "  memsets: " << memsets << "\n";
  for (const auto& [device, gap] : launch_gap_s)
    o << "  " << device << ": median idle time before an op's first kernel " << format_seconds(gap) << "\n";
  if (host_ops)
    o << "  host: " << host_ops << " ops issued, " << format_seconds(host_s_per_step) << " of host time per step\n";
  o << "  signatures measured: " << signatures << "; kernel time per step with a signature "
    << format_seconds(used_kernel_s_per_step) << ", without " << format_seconds(dropped_kernel_s_per_step) << "\n";
  return o.str();
}

std::string ImportReport::usage_table(std::size_t max_rows) const {
  // op | phase | used as / dropped because | instances | ms per step
  std::vector<std::array<std::string, 5>> lines;
  lines.push_back({"op", "phase", "used as / dropped because", "instances", "ms/step"});
  double rest_s = 0;
  int64_t rest_instances = 0;
  std::size_t rest_rows = 0;
  for (std::size_t i = 0; i < usage.size(); ++i) {
    const TraceOpUsage& u = usage[i];
    if (i >= max_rows) {
      rest_s += u.kernel_s_per_step;
      rest_instances += u.instances;
      ++rest_rows;
      continue;
    }
    std::string how;
    if (!u.dropped) {
      how = u.graph_type.empty() ? std::string("shapes -> ") : u.graph_type + " -> ";
      how += u.kernel_class;
    } else {
      how = "DROPPED: ";
      how += trace_drop_reason_text(*u.dropped);
      if (!u.graph_type.empty()) how += " (" + u.graph_type + ")";
      if (!u.detail.empty()) how += ": " + u.detail;
    }
    std::ostringstream ms;
    ms.setf(std::ios::fixed);
    ms.precision(3);
    ms << u.kernel_s_per_step * 1e3;
    lines.push_back({u.op, std::string(phase_name(u.phase)), how, std::to_string(u.instances), ms.str()});
  }
  if (rest_rows) {
    std::ostringstream ms;
    ms.setf(std::ios::fixed);
    ms.precision(3);
    ms << rest_s * 1e3;
    lines.push_back({"(" + std::to_string(rest_rows) + " more rows)", "", "", std::to_string(rest_instances), ms.str()});
  }
  std::array<std::size_t, 5> width{};
  for (const auto& l : lines)
    for (std::size_t c = 0; c < l.size(); ++c) width[c] = std::max(width[c], l[c].size());
  std::string out;
  for (const auto& l : lines) {
    out += "  ";
    for (std::size_t c = 0; c < l.size(); ++c) {
      const std::size_t pad = width[c] - l[c].size();
      if (c >= 3) out.append(pad, ' ');  // numbers right-aligned
      out += l[c];
      if (c < 3) out.append(pad, ' ');
      if (c + 1 < l.size()) out += "  ";
    }
    out += '\n';
  }
  return out;
}

}  // namespace placelab
