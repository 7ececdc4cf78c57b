#include "placelab/profiler/trace_import.h"

#include <algorithm>
#include <cstdio>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "placelab/graph/error.h"
#include "placelab/graph/io.h"
#include "placelab/graph/json_locator.h"
#include "placelab/graph/numbers.h"
#include "placelab/graph/units.h"
#include "measure_util.h"

namespace placelab {
namespace {

using detail::median;

using json = nlohmann::ordered_json;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// An event's "args" object (a shared empty object when absent), by reference: callers keep
// pointers to it while the document lives.
const json& args_of(const json& e) {
  static const json kEmpty = json::object();
  auto it = e.find("args");
  return it != e.end() ? *it : kEmpty;
}

// A number that Kineto writes either as a JSON number or as a decimal string ("size": "2560").
std::optional<double> number_of(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() && *end == '\0') return d;
  }
  return std::nullopt;
}

std::optional<double> arg_number(const json& args, std::initializer_list<const char*> keys) {
  if (!args.is_object()) return std::nullopt;
  for (const char* k : keys) {
    auto it = args.find(k);
    if (it != args.end())
      if (auto d = number_of(*it)) return d;
  }
  return std::nullopt;
}

// An integer argument (an id, a device, a byte count): arg_number when it lies within ±2^50, else
// nullopt, as if absent — a trace's 1e96 converted to int64_t would be undefined behaviour, and
// 2^50 bytes (1 PiB) is already the graph format's limit.
std::optional<int64_t> arg_integer(const json& args, std::initializer_list<const char*> keys) {
  const std::optional<double> d = arg_number(args, keys);
  if (!d || !(std::fabs(*d) <= 1125899906842624.0)) return std::nullopt;
  return static_cast<int64_t>(*d);
}

std::string arg_string(const json& args, const char* key) {
  if (!args.is_object()) return {};
  auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// pid/tid are numbers in Kineto host events but strings for its synthetic rows ("Spans").
std::string id_text(const json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_number()) return std::to_string(it->get<double>());
  return {};
}

// "" for a time before 1970 or from year 10000 on (a trace's clock, not a date; and converting
// 1e300 seconds to time_t would be undefined).
std::string iso_utc(double epoch_s) {
  if (!(epoch_s >= 0 && epoch_s < 253402300800.0)) return {};
  std::time_t t = static_cast<std::time_t>(epoch_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

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

struct CopyKindEntry {
  const char* token;
  const char* kind;
};
constexpr CopyKindEntry kCopyKinds[] = {{"HtoD", "HtoD"}, {"DtoH", "DtoH"}, {"DtoD", "DtoD"}, {"PtoP", "PtoP"},
                                        {"HtoH", "HtoH"}, {"HostToDevice", "HtoD"}, {"DeviceToHost", "DtoH"},
                                        {"DeviceToDevice", "DtoD"}, {"PeerToPeer", "PtoP"}};

// A concrete input (Kineto "Concrete Inputs"): its integers when recorded, nullopt when the trace
// left the position empty ("" is what the profiler writes for tensors and unrecorded values).
std::optional<std::vector<int64_t>> concrete_ints(std::span<const std::string> concrete, std::size_t index) {
  if (index >= concrete.size() || concrete[index].empty()) return std::nullopt;
  return ints_in(concrete[index]);
}

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

// ---------------------------------------------------------------------------------------------
// Signatures from recorded shapes.

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
  // The builder's signatures of the TensorFlow counterparts (models/src/builder.cpp): FusedBatchNorm
  // elementwise{e, 2}, FusedBatchNormGrad elementwise{e, 3}, MaxPoolGrad elementwise{in, 3},
  // AvgPoolGrad elementwise{in, 1}, the cross-entropy gradient elementwise{n × c, 2}.
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

// ---------------------------------------------------------------------------------------------
// Collected events, format independent.

// One framework op execution that launched kernels.
struct InstanceRec {
  std::string op;             // attributed op type ("aten::conv2d"; TF: the op type)
  std::string autograd_node;  // Kineto: the enclosing autograd function ("ConvolutionBackward0"), "" none
  Phase phase = Phase::kForward;
  double ts = 0;              // host start (µs): orders the instances of one step
  // Kineto: the host time its issue took, seconds — its share of the outermost cpu_op around it
  // on its thread (an autograd node's evaluate_function, or the aten op itself), split evenly
  // among the instances under that root. 0 where unknown (TensorFlow timelines).
  double host_s = 0;
  int64_t host_root = -1;     // Kineto: index of that root among Collected's roots; -1 none
  std::optional<KernelSignature> signature;             // from shapes (TF: from the graph by node name)
  std::optional<ConvBackwardSignatures> conv_backward;  // aten::convolution_backward with shapes
  std::optional<std::vector<bool>> output_mask;         // aten::convolution_backward, when recorded
  TraceDropReason unsigned_reason = TraceDropReason::kNoShapes;  // why `signature` is absent
};

struct KernelRec {
  int64_t device = 0;
  double dur_s = 0;
  std::string name;
  double launch_ts = 0;     // µs; orders the kernels of one instance
  // Kineto: how many library-call marks (cudaEventRecord runtime calls) its launching thread made
  // before the launch. Kernels of one op instance with different values came from different
  // cuDNN calls (split_conv_backward).
  int64_t call_segment = 0;
  double start_us = 0;      // GPU start time (Kineto); orders a device's kernels for launch_gap_s
  int64_t instance = -1;    // index into Collected::instances; -1 when unattributed
  int step = -1;            // index into steps; -1 outside any step
  bool host = false;        // TF CPU op (not a GPU kernel)
};

struct CopyRec {
  std::string kind;
  int64_t device = -1;      // the GPU that ran it; -1 none
  int64_t peer = -1;        // PtoP: the other GPU when recorded
  double bytes = -1;        // -1 unknown
  double dur_s = 0;
};

struct Collected {
  TraceFormat format = TraceFormat::kAuto;
  std::string gpu_name;
  std::string host;
  std::string created;
  int steps = 0;
  int64_t memsets = 0;
  std::vector<InstanceRec> instances;
  std::vector<KernelRec> kernels;
  std::vector<CopyRec> copies;
};

[[noreturn]] void fail(std::string_view origin, int line, const std::string& what) {
  throw InputError(std::string(origin) + ":" + std::to_string(line) + ": " + what);
}

// "cpu_op 359, cuda_runtime 361, (none) 2 …": the most frequent values first, `limit` of them.
std::string counts_text(const std::map<std::string, int64_t>& counts, std::size_t limit = 8) {
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
// Kineto

// The event categories of every Kineto schema. PyTorch 1.8 shipped the first libkineto, whose
// ChromeTraceLogger (libkineto/src/output_json.cpp, 2020-09 to 2021-11) wrote "Operator" (CPU ops,
// with "Input dims", "Input type", "External id"), "Runtime" ("correlation", "external id"),
// "Kernel", "Memcpy" and "Memset" (each with "correlation" and "external id"), "Trace" (the
// profiler's span) and, from 2020-12, "User" for GPU-side user spans. From 2021-06 on
// (libkineto/src/ActivityType.cpp) the names are cpu_op, user_annotation, gpu_user_annotation
// (spelt gpu_user_Annotation until 2022-05), gpu_memcpy, gpu_memset, kernel, cuda_runtime,
// cuda_driver, python_function, cpu_instant_event, overhead, cuda_sync and the flow categories
// ac2g / fwdbwd. Compared without case.
enum class KinetoCat : uint8_t { kKernel, kMemcpy, kMemset, kRuntime, kHostOp, kAnnotation, kIgnored, kUnknown };

KinetoCat kineto_category(std::string_view cat) {
  std::string c(cat);
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (c == "kernel") return KinetoCat::kKernel;
  if (c == "gpu_memcpy" || c == "memcpy") return KinetoCat::kMemcpy;
  if (c == "gpu_memset" || c == "memset") return KinetoCat::kMemset;
  if (c == "cuda_runtime" || c == "runtime" || c == "cuda_driver") return KinetoCat::kRuntime;
  if (c == "cpu_op" || c == "operator") return KinetoCat::kHostOp;
  if (c == "user_annotation") return KinetoCat::kAnnotation;
  // python_function events nest around ops on the host threads; the attribution is by aten op, so
  // they are left out rather than taken for ops.
  static const std::set<std::string, std::less<>> ignored = {
      "gpu_user_annotation", "user", "trace", "python_function", "cpu_instant_event", "overhead", "cuda_sync",
      "ac2g", "fwdbwd", "async", "external_correlation", "cuda_profiler_range", "glow_runtime", "net"};
  return ignored.count(c) ? KinetoCat::kIgnored : KinetoCat::kUnknown;
}

bool is_evaluate_function(std::string_view name) { return starts_with(name, "autograd::engine::evaluate_function"); }
// An autograd function's own event: "ConvolutionBackward0", "torch::autograd::AccumulateGrad" is not.
bool is_backward_node(std::string_view name) {
  return !starts_with(name, "aten::") && !is_evaluate_function(name) && name.find("Backward") != std::string_view::npos;
}
// Optimizer.step#SGD.step, Optimizer.zero_grad#SGD.zero_grad (torch.optim's record_function), and
// the "## optimizer ##" style markers of training loops.
bool is_optimizer_scope(std::string_view name) { return contains_ci(name, "optimizer"); }

struct HostEvent {
  double ts = 0, end = 0;
  const json* ev = nullptr;
  std::string_view name;
  bool annotation = false;  // user_annotation rather than cpu_op
  int parent = -1;          // innermost enclosing event on the same thread
};

struct Thread {
  std::vector<HostEvent> events;  // sorted by (ts, longer first); parents resolved
  bool autograd = false;          // runs autograd::engine::evaluate_function scopes
  void finalize() {
    std::sort(events.begin(), events.end(), [](const HostEvent& a, const HostEvent& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.end > b.end;
    });
    std::vector<int> stack;
    for (int i = 0; i < static_cast<int>(events.size()); ++i) {
      while (!stack.empty() && events[stack.back()].end < events[i].ts) stack.pop_back();
      events[i].parent = stack.empty() ? -1 : stack.back();
      stack.push_back(i);
      autograd |= is_evaluate_function(events[i].name);
    }
  }
  // Innermost event that contains time t, or -1.
  int innermost(double t) const {
    auto it = std::upper_bound(events.begin(), events.end(), t, [](double v, const HostEvent& e) { return v < e.ts; });
    int i = static_cast<int>(it - events.begin()) - 1;
    while (i >= 0 && events[i].end < t) i = events[i].parent;
    return i;
  }
};

struct Launch {
  std::string thread;
  double ts = 0;
  const json* args = nullptr;
};

// "Input Dims" (PyTorch ≥ 1.10) or "Input dims" (the 1.8 / 1.9 Operator events).
const json* input_dims_arg(const json& args) {
  for (const char* key : {"Input Dims", "Input dims"}) {
    auto it = args.find(key);
    if (it != args.end() && it->is_array()) return &*it;
  }
  return nullptr;
}

std::vector<std::vector<int64_t>> input_dims_of(const json& dims_arg) {
  std::vector<std::vector<int64_t>> dims;
  for (const json& d : dims_arg) {
    std::vector<int64_t> v;
    if (d.is_array())
      for (const json& x : d)
        if (x.is_number_integer()) v.push_back(x.get<int64_t>());
    dims.push_back(std::move(v));
  }
  return dims;
}

std::vector<std::string> concrete_inputs_of(const json& args) {
  std::vector<std::string> out;
  auto it = args.find("Concrete Inputs");
  if (it == args.end() || !it->is_array()) return out;
  for (const json& c : *it) out.push_back(c.is_string() ? c.get<std::string>() : c.dump());
  return out;
}

// The op a launch belongs to, walking out from host event `inner` of thread `t`: the outermost
// aten:: op (the one the user wrote; below aten::cross_entropy_loss, the one it calls), else the innermost cpu_op, else the innermost annotation;
// with the phase and the autograd function around it.
struct Attribution {
  int event = -1;
  int root = -1;  // the outermost cpu_op (not annotation) around the launch
  Phase phase = Phase::kForward;
  std::string_view autograd_node;
};
Attribution attribute(const Thread& t, int inner) {
  Attribution a;
  int first_op = -1, first_annotation = -1, below_outermost = -1;
  bool backward = false, update = false;
  for (int i = inner; i >= 0; i = t.events[i].parent) {
    const HostEvent& h = t.events[i];
    if (!h.annotation && starts_with(h.name, "aten::")) {
      below_outermost = a.event;
      a.event = i;  // keeps the outermost
    }
    if (!h.annotation && first_op < 0) first_op = i;
    if (!h.annotation) a.root = i;
    if (h.annotation && first_annotation < 0) first_annotation = i;
    if (is_backward_node(h.name) && a.autograd_node.empty()) a.autograd_node = h.name;
    backward |= is_evaluate_function(h.name) || is_backward_node(h.name);
    update |= is_optimizer_scope(h.name);
  }
  // A composite loss is two ops the graph keeps apart (LogSoftmax, NllLoss): the op below it.
  if (a.event >= 0 && below_outermost >= 0 && t.events[a.event].name == "aten::cross_entropy_loss") a.event = below_outermost;
  if (a.event < 0) a.event = first_op >= 0 ? first_op : first_annotation;
  a.phase = backward ? Phase::kBackward : update ? Phase::kUpdate : t.autograd ? Phase::kBackward : Phase::kForward;
  return a;
}

// The instance record of a host event: op, phase, and what its shapes give.
InstanceRec instance_of(const HostEvent& h, const Attribution& a) {
  InstanceRec in;
  in.op = std::string(h.name);
  in.autograd_node = std::string(a.autograd_node);
  in.phase = a.phase;
  in.ts = h.ts;
  const json& args = args_of(*h.ev);
  const json* dims_arg = args.is_object() ? input_dims_arg(args) : nullptr;
  if (!dims_arg) return in;  // unsigned_reason stays kNoShapes
  const auto dims = input_dims_of(*dims_arg);
  const auto concrete = concrete_inputs_of(args);
  if (in.op == "aten::convolution_backward") {
    in.output_mask = concrete_bools(concrete, 10);
    in.conv_backward = conv_backward_signatures(dims, concrete);
    in.unsigned_reason = concrete_ints(concrete, 4) ? TraceDropReason::kNoMapping : TraceDropReason::kStrideNotRecorded;
    return in;
  }
  in.signature = torch_signature(in.op, dims, concrete, in.unsigned_reason);
  return in;
}

struct KinetoScan {
  std::unordered_map<std::string, Thread> threads;
  std::unordered_map<int64_t, Launch> launches;  // correlation → runtime call
  std::unordered_map<std::string, std::vector<double>> call_marks;  // thread → cudaEventRecord times
  struct Step {
    double ts, end;
  };
  std::vector<Step> steps;
  struct GpuEvent {
    const json* ev;
    bool kernel;
  };
  std::vector<GpuEvent> gpu;
  std::map<std::string, int64_t> categories;  // of "X" events, for messages
  double first_ts = std::numeric_limits<double>::infinity();
};

KinetoScan scan_kineto(const json& events, Collected& c, std::string_view step_marker) {
  KinetoScan s;
  for (const json& e : events) {
    if (!e.is_object()) continue;
    auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string() || *ph != "X") continue;
    const std::string cat = arg_string(e, "cat");
    ++s.categories[cat];
    const std::string_view name = e.contains("name") && e["name"].is_string() ? std::string_view(e["name"].get_ref<const std::string&>()) : std::string_view{};
    const double ts = number_of(e.value("ts", json())).value_or(0.0);
    const double dur = number_of(e.value("dur", json())).value_or(0.0);
    const json& args = args_of(e);
    switch (kineto_category(cat)) {
      case KinetoCat::kKernel:
        s.gpu.push_back({&e, true});
        s.first_ts = std::min(s.first_ts, ts);
        break;
      case KinetoCat::kMemcpy: s.gpu.push_back({&e, false}); break;
      case KinetoCat::kMemset: ++c.memsets; break;
      case KinetoCat::kRuntime:
        if (name == "cudaEventRecord") s.call_marks[id_text(e, "pid") + "/" + id_text(e, "tid")].push_back(ts);
        if (auto corr = arg_integer(args, {"correlation"}))
          s.launches[*corr] = {id_text(e, "pid") + "/" + id_text(e, "tid"), ts, &args};
        break;
      case KinetoCat::kHostOp:
      case KinetoCat::kAnnotation:
        if (name.find(step_marker) != std::string_view::npos) {
          s.steps.push_back({ts, ts + dur});
          break;
        }
        s.threads[id_text(e, "pid") + "/" + id_text(e, "tid")].events.push_back(
            {ts, ts + dur, &e, name, kineto_category(cat) == KinetoCat::kAnnotation, -1});
        break;
      case KinetoCat::kIgnored:
      case KinetoCat::kUnknown: break;
    }
  }
  for (auto& [_, t] : s.threads) t.finalize();
  for (auto& [_, marks] : s.call_marks) std::sort(marks.begin(), marks.end());
  std::sort(s.steps.begin(), s.steps.end(), [](const KinetoScan::Step& a, const KinetoScan::Step& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.end > b.end;
  });
  // Benchmark harnesses nest markers of one name (an iteration around its forward pass): a step is
  // an innermost marker, one that contains no other.
  std::vector<KinetoScan::Step> innermost;
  for (std::size_t i = 0; i < s.steps.size(); ++i) {
    const bool holds_next = i + 1 < s.steps.size() && s.steps[i + 1].ts <= s.steps[i].end &&
                            s.steps[i + 1].end <= s.steps[i].end;
    if (!holds_next) innermost.push_back(s.steps[i]);
  }
  s.steps = std::move(innermost);
  return s;
}

// Every complete event's times are physical: `ts` finite, `dur` finite, >= 0 and at most a day
// (8.64e10 µs), and no longer than the trace's events span plus a second. A kernel of 10^15 µs,
// or a negative one, would otherwise become a calibration that predicts 10^11-s steps. The line of
// the first offending event is named.
void check_event_times(const json& events, std::string_view text, std::string_view origin, std::string_view pointer) {
  constexpr double kMaxDurationUs = 86400e6;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const json& e : events)
    if (e.is_object())
      if (auto ts = number_of(e.value("ts", json())); ts && std::isfinite(*ts)) {
        first = std::min(first, *ts);
        last = std::max(last, *ts);
      }
  const double bound = std::isfinite(first) ? std::min(kMaxDurationUs, last - first + 1e6) : kMaxDurationUs;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object() || arg_string(e, "ph") != "X") continue;
    const auto at = [&] { return JsonLocator(text).line_of(std::string(pointer) + "/" + std::to_string(i)); };
    const std::optional<double> ts = number_of(e.value("ts", json()));
    if (ts && !std::isfinite(*ts)) fail(origin, at(), "ts = " + format_6g(*ts) + ": must be a finite time (µs)");
    const std::optional<double> dur = number_of(e.value("dur", json()));
    if (!dur) continue;
    if (!std::isfinite(*dur) || *dur < 0 || *dur > bound)
      fail(origin, at(),
           "dur = " + format_6g(*dur) + " µs: must be >= 0 and at most " + format_6g(bound) +
               " µs (the trace's events span " + format_6g(std::isfinite(first) ? last - first : 0.0) +
               " µs, plus a second)");
  }
}

CopyRec copy_of(const json& e, const Launch* launch) {
  const json& args = args_of(e);
  CopyRec r;
  auto kind = memcpy_kind(arg_string(e, "name"));
  if (!kind) kind = memcpy_kind(arg_string(args, "kind"));
  r.kind = kind.value_or("unknown");
  r.device = arg_integer(args, {"device"}).value_or(0);
  r.dur_s = number_of(e.value("dur", json())).value_or(0.0) * 1e-6;
  if (auto b = arg_integer(args, {"bytes"})) r.bytes = static_cast<double>(*b);
  else if (launch)
    if (auto lb = arg_integer(*launch->args, {"size", "bytes", "count"})) r.bytes = static_cast<double>(*lb);
  if (r.kind == "PtoP") {
    // 1.8-era Kineto wrote "fromDevice" / "toDevice" for Memcpy2 activities.
    if (auto dst = arg_integer(args, {"dstDevice", "dst device", "toDevice"})) r.peer = *dst;
    if (auto src = arg_integer(args, {"srcDevice", "src device", "fromDevice"})) r.device = *src;
  }
  return r;
}

Collected collect_kineto(const json& root, const json& events, std::string_view origin, std::string_view step_marker) {
  Collected c;
  c.format = TraceFormat::kKineto;
  if (root.is_object()) {
    auto dp = root.find("deviceProperties");
    if (dp != root.end() && dp->is_array() && !dp->empty() && (*dp)[0].is_object())
      c.gpu_name = arg_string((*dp)[0], "name");
    c.host = arg_string(root, "host_name");
  }
  KinetoScan s = scan_kineto(events, c, step_marker);
  c.steps = static_cast<int>(s.steps.size());
  if (!std::isfinite(s.first_ts))
    fail(origin, 1,
         "no GPU kernel events (event categories seen: " + counts_text(s.categories) +
             "); expected category \"kernel\" (PyTorch >= 1.9) or \"Kernel\" (1.8) — profile with "
             "activities=[ProfilerActivity.CUDA]");
  if (root.is_object() && root.contains("baseTimeNanoseconds")) {
    if (auto base = number_of(root["baseTimeNanoseconds"])) c.created = iso_utc(*base * 1e-9 + s.first_ts * 1e-6);
  } else if (s.first_ts > 1e15) {  // epoch microseconds (after 2001): a wall-clock time
    c.created = iso_utc(s.first_ts * 1e-6);
  }

  // Host events by "External id", for kernels whose launch has no enclosing op on its thread: the
  // 1.8-era Kernel and Runtime events carry the op's id as "external id".
  std::unordered_map<int64_t, std::pair<const Thread*, int>> by_external;
  for (const auto& [_, t] : s.threads)
    for (int i = 0; i < static_cast<int>(t.events.size()); ++i)
      if (auto id = arg_integer(args_of(*t.events[i].ev), {"External id"}))
        by_external.emplace(*id, std::make_pair(&t, i));

  std::unordered_map<const json*, int64_t> instance_ids;  // host event → index into c.instances
  std::unordered_map<const json*, int64_t> root_ids;      // outermost host op → index into root_s
  std::vector<double> root_s;                             // its duration, seconds
  auto step_of = [&](double t) {
    auto it = std::upper_bound(s.steps.begin(), s.steps.end(), t, [](double v, const KinetoScan::Step& st) { return v < st.ts; });
    if (it == s.steps.begin()) return -1;
    --it;
    return t <= it->end ? static_cast<int>(it - s.steps.begin()) : -1;
  };

  for (const KinetoScan::GpuEvent& g : s.gpu) {
    const json& e = *g.ev;
    const json& args = args_of(e);
    const Launch* launch = nullptr;
    if (auto corr = arg_integer(args, {"correlation"})) {
      auto it = s.launches.find(*corr);
      if (it != s.launches.end()) launch = &it->second;
    }
    if (!g.kernel) {
      c.copies.push_back(copy_of(e, launch));
      continue;
    }
    KernelRec k;
    k.device = arg_integer(args, {"device"}).value_or(0);
    k.dur_s = number_of(e.value("dur", json())).value_or(0.0) * 1e-6;
    k.start_us = number_of(e.value("ts", json())).value_or(0.0);
    k.name = arg_string(e, "name");
    const Thread* thread = nullptr;
    int inner = -1;
    if (launch) {
      k.launch_ts = launch->ts;
      k.step = step_of(launch->ts);
      if (auto m = s.call_marks.find(launch->thread); m != s.call_marks.end())
        k.call_segment = std::upper_bound(m->second.begin(), m->second.end(), launch->ts) - m->second.begin();
      if (auto th = s.threads.find(launch->thread); th != s.threads.end()) {
        thread = &th->second;
        inner = thread->innermost(launch->ts);
      }
    }
    if (inner < 0) {
      std::optional<int64_t> ext = launch ? arg_integer(*launch->args, {"external id", "External id"}) : std::nullopt;
      if (!ext) ext = arg_integer(args, {"external id", "External id"});
      if (ext)
        if (auto it = by_external.find(*ext); it != by_external.end()) {
          thread = it->second.first;
          inner = it->second.second;
          if (!launch) {
            k.launch_ts = thread->events[inner].ts;
            k.step = step_of(k.launch_ts);
          }
        }
    }
    if (inner >= 0) {
      const Attribution a = attribute(*thread, inner);
      if (a.event >= 0) {
        const HostEvent& h = thread->events[a.event];
        auto [it, inserted] = instance_ids.emplace(h.ev, static_cast<int64_t>(c.instances.size()));
        if (inserted) {
          c.instances.push_back(instance_of(h, a));
          if (a.root >= 0) {
            const HostEvent& root_event = thread->events[a.root];
            auto [r, new_root] = root_ids.emplace(root_event.ev, static_cast<int64_t>(root_s.size()));
            if (new_root) root_s.push_back((root_event.end - root_event.ts) * 1e-6);
            c.instances.back().host_root = r->second;
          }
        }
        k.instance = it->second;
      }
    }
    c.kernels.push_back(std::move(k));
  }
  // Each root's host time, split evenly among the op instances under it.
  std::vector<int> per_root(root_s.size(), 0);
  for (const InstanceRec& in : c.instances)
    if (in.host_root >= 0) ++per_root[static_cast<std::size_t>(in.host_root)];
  for (InstanceRec& in : c.instances)
    if (in.host_root >= 0)
      in.host_s = root_s[static_cast<std::size_t>(in.host_root)] / per_root[static_cast<std::size_t>(in.host_root)];
  return c;
}

// ---------------------------------------------------------------------------------------------
// TensorFlow timeline

struct TfProcess {
  enum Kind { kOther, kDeviceCompute, kStreamAll, kStream, kMemcpy } kind = kOther;
  bool gpu = false;
  int64_t device = 0;
  std::string name;
};

TfProcess classify_tf_process(const std::string& name) {
  TfProcess p;
  p.name = name;
  static const std::regex dev_re(R"((?:device:|/)(GPU|CPU|gpu|cpu):(\d+))");
  std::smatch m;
  if (!std::regex_search(name, m, dev_re)) return p;
  const auto device = parse_number<int64_t>(m[2].str());
  if (!device) return p;  // a device number beyond int64_t: not a device this importer knows
  p.gpu = m[1] == "GPU" || m[1] == "gpu";
  p.device = *device;
  if (name.find("Tensors") != std::string::npos || name.find("Allocators") != std::string::npos) return p;
  if (name.find("memcpy") != std::string::npos) p.kind = TfProcess::kMemcpy;
  else if (name.find("stream:all") != std::string::npos) p.kind = TfProcess::kStreamAll;
  else if (name.find("stream:") != std::string::npos) p.kind = TfProcess::kStream;
  else if (name.find("Compute") != std::string::npos) p.kind = TfProcess::kDeviceCompute;
  return p;
}

Collected collect_tensorflow(const json& events, const TraceImportOptions& options, std::string_view origin) {
  Collected c;
  c.format = TraceFormat::kTensorFlow;
  std::unordered_map<std::string, TfProcess> procs;
  for (const json& e : events)
    if (e.is_object() && arg_string(e, "ph") == "M" && arg_string(e, "name") == "process_name" && e.contains("args"))
      procs[id_text(e, "pid")] = classify_tf_process(arg_string(e["args"], "name"));

  // Kernel source per GPU: "stream:all" when present (the per-stream rows repeat its events),
  // else the per-stream rows, else the device's compute row (no GPU tracer: op schedule times).
  std::map<int64_t, int> best_kind;  // GPU device → chosen process kind rank
  auto rank = [](TfProcess::Kind k) {
    return k == TfProcess::kStreamAll ? 3 : k == TfProcess::kStream ? 2 : k == TfProcess::kDeviceCompute ? 1 : 0;
  };
  std::set<std::string> pids_with_events;
  std::map<std::string, int64_t> categories;
  for (const json& e : events)
    if (e.is_object() && arg_string(e, "ph") == "X") {
      pids_with_events.insert(id_text(e, "pid"));
      ++categories[arg_string(e, "cat")];
    }
  for (const auto& [pid, p] : procs)
    if (p.gpu && rank(p.kind) > 0 && pids_with_events.count(pid))
      best_kind[p.device] = std::max(best_kind[p.device], rank(p.kind));
  for (const auto& [pid, p] : procs)
    if (p.gpu && c.gpu_name.empty() && p.kind != TfProcess::kOther) c.gpu_name = "GPU:" + std::to_string(p.device);

  static const std::regex bytes_re(R"((\d+)\s*bytes)");
  std::unordered_map<std::string, int64_t> instance_ids;
  for (const json& e : events) {
    if (!e.is_object() || arg_string(e, "ph") != "X") continue;
    auto pit = procs.find(id_text(e, "pid"));
    if (pit == procs.end()) continue;
    const TfProcess& p = pit->second;
    const json& args = args_of(e);
    const std::string name = arg_string(e, "name");
    const std::string op = arg_string(args, "op").empty() ? name : arg_string(args, "op");
    const double dur_s = number_of(e.value("dur", json())).value_or(0.0) * 1e-6;
    auto kind = memcpy_kind(op);
    if (!kind) kind = memcpy_kind(name);
    if (p.kind == TfProcess::kMemcpy || kind) {
      CopyRec r;
      r.kind = kind.value_or("unknown");
      r.device = p.gpu ? p.device : -1;
      r.dur_s = dur_s;
      if (auto b = arg_integer(args, {"bytes"})) r.bytes = static_cast<double>(*b);
      else
        for (const std::string& text : {name, arg_string(args, "name"), arg_string(args, "label")}) {
          std::smatch m;
          if (std::regex_search(text, m, bytes_re)) {
            // strtod, not stod: 400 digits are HUGE_VAL here, not std::out_of_range.
            if (const double v = std::strtod(m[1].str().c_str(), nullptr); v <= 1125899906842624.0) r.bytes = v;
            break;
          }
        }
      c.copies.push_back(r);
      continue;
    }
    KernelRec k;
    if (p.gpu) {
      if (rank(p.kind) == 0 || rank(p.kind) != best_kind[p.device]) continue;
      k.device = p.device;
    } else if (p.kind == TfProcess::kDeviceCompute) {
      k.host = true;
    } else {
      continue;
    }
    k.dur_s = dur_s;
    k.name = name;
    k.launch_ts = number_of(e.value("ts", json())).value_or(0.0);
    k.step = 0;
    const std::string node = arg_string(args, "name").empty() ? name : arg_string(args, "name");
    std::string key = k.host ? std::string("cpu/") : "gpu" + std::to_string(k.device) + "/";
    key += node;
    auto [it, inserted] = instance_ids.emplace(key, static_cast<int64_t>(c.instances.size()));
    if (inserted) {
      InstanceRec in;
      in.op = op;
      in.ts = k.launch_ts;
      in.unsigned_reason = options.graph ? TraceDropReason::kNoMapping : TraceDropReason::kNoShapes;
      if (options.graph)
        if (auto id = options.graph->find(node)) {
          const Op& gop = options.graph->op(*id);
          in.phase = gop.phase;
          if (gop.kernel.cls != KernelClass::kNoop) in.signature = gop.kernel;
        }
      c.instances.push_back(std::move(in));
    }
    k.instance = it->second;
    c.kernels.push_back(std::move(k));
  }
  if (c.kernels.empty())
    fail(origin, 1,
         "no op events on a device compute row (event categories seen: " + counts_text(categories) +
             "); expected a TensorFlow timeline whose process names are devices (\"/device:GPU:0/stream:all Compute\")");
  c.steps = 1;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Graph-guided signatures for Kineto traces without shapes.

// Which part of an op instance's kernels a unit is: all of them, or one gradient of a convolution
// backward.
enum class Part : uint8_t { kWhole, kInputGrad, kFilterGrad };

// (torch op or autograd function, phase) → the graph op type whose signature its instances take.
// Graphs in "PyTorch form" use these types, in the order torchvision executes the ops.
struct TorchToGraph {
  std::string_view torch_op;
  Phase phase;
  std::string_view graph_type;
  Part part = Part::kWhole;
};
constexpr TorchToGraph kTorchToGraph[] = {
    {"aten::conv2d", Phase::kForward, "Conv2D"},
    {"aten::convolution", Phase::kForward, "Conv2D"},
    {"aten::_convolution", Phase::kForward, "Conv2D"},
    {"aten::convolution_backward", Phase::kBackward, "Conv2DBackpropInput", Part::kInputGrad},
    {"aten::convolution_backward", Phase::kBackward, "Conv2DBackpropFilter", Part::kFilterGrad},
    {"aten::batch_norm", Phase::kForward, "FusedBatchNorm"},
    {"aten::cudnn_batch_norm", Phase::kForward, "FusedBatchNorm"},
    {"aten::native_batch_norm", Phase::kForward, "FusedBatchNorm"},
    {"aten::cudnn_batch_norm_backward", Phase::kBackward, "FusedBatchNormGrad"},
    {"aten::native_batch_norm_backward", Phase::kBackward, "FusedBatchNormGrad"},
    {"aten::relu", Phase::kForward, "Relu"},
    {"aten::relu_", Phase::kForward, "Relu"},
    {"aten::threshold_backward", Phase::kBackward, "ReluGrad"},
    {"aten::max_pool2d", Phase::kForward, "MaxPool"},
    {"aten::max_pool2d_with_indices", Phase::kForward, "MaxPool"},
    {"aten::max_pool2d_with_indices_backward", Phase::kBackward, "MaxPoolGrad"},
    {"aten::adaptive_avg_pool2d", Phase::kForward, "AvgPool"},
    {"aten::avg_pool2d", Phase::kForward, "AvgPool"},
    {"aten::avg_pool2d_backward", Phase::kBackward, "AvgPoolGrad"},
    {"aten::_adaptive_avg_pool2d_backward", Phase::kBackward, "AvgPoolGrad"},
    {"aten::adaptive_avg_pool2d_backward", Phase::kBackward, "AvgPoolGrad"},
    // adaptive_avg_pool2d to 1×1 runs aten::mean; its backward is MeanBackward1's kernels.
    {"MeanBackward1", Phase::kBackward, "AvgPoolGrad"},
    {"aten::linear", Phase::kForward, "MatMul"},
    {"aten::addmm", Phase::kForward, "MatMul"},
    {"aten::mm", Phase::kBackward, "MatMul"},
    {"aten::add", Phase::kForward, "Add"},
    {"aten::add_", Phase::kForward, "Add"},
    // Autograd sums the gradients of a tensor read twice (a residual block's input) with add_.
    {"aten::add", Phase::kBackward, "AddN"},
    {"aten::add_", Phase::kBackward, "AddN"},
    {"aten::log_softmax", Phase::kForward, "LogSoftmax"},
    {"aten::_log_softmax_backward_data", Phase::kBackward, "LogSoftmaxGrad"},
    {"aten::nll_loss", Phase::kForward, "NllLoss"},
    {"aten::nll_loss_nd", Phase::kForward, "NllLoss"},
    {"aten::nll_loss_backward", Phase::kBackward, "NllLossGrad"},
    {"aten::dropout", Phase::kForward, "Dropout"},
    {"aten::native_dropout", Phase::kForward, "Dropout"},
};

const TorchToGraph* graph_rule(const InstanceRec& in, Part part) {
  for (std::string_view name : {std::string_view(in.op), std::string_view(in.autograd_node)}) {
    if (name.empty()) continue;
    for (const TorchToGraph& r : kTorchToGraph)
      if (r.torch_op == name && r.phase == in.phase && r.part == part) return &r;
  }
  return nullptr;
}

// The kernels of an instance, or of one gradient of a convolution backward, as one measurement.
struct Unit {
  int64_t instance = -1;
  Part part = Part::kWhole;
  std::string device;
  int step = -1;
  double total_s = 0;
  std::optional<KernelSignature> signature;
  std::optional<TraceDropReason> dropped;  // set when `signature` is absent
  std::string graph_type, detail;
};

struct InstanceKernels {
  std::string device;
  int step = -1;
  std::vector<const KernelRec*> kernels;  // in launch order
};

// Splits an aten::convolution_backward's kernels. PyTorch's cuDNN path computes grad_input, then
// grad_weight (cudnn_convolution_backward in aten/src/ATen/native/cudnn/ConvShared.cpp), in two
// cuDNN calls. Each call opens with runtime calls of its own (cudaEventRecord among them, in the
// real V100 trace before every convolution call), so when the instance's kernels fall into two or
// more call segments, the last segment is the weight gradient and the earlier ones the input
// gradient (a bias gradient, when there is one, runs first and counts with it). Within one
// segment: every kernel from the first "wgrad"-named one on is the weight gradient (an instance
// whose only kernels are wgrad ones is the first layer's, whose input needs no gradient); failing
// that, a recorded output_mask asking for one gradient decides; otherwise the instance is one
// unsplittable unit.
void split_conv_backward(const InstanceRec& in, const InstanceKernels& ik, Unit base, std::vector<Unit>& units) {
  const auto& ks = ik.kernels;
  auto sum = [](auto b, auto e) {
    double t = 0;
    for (auto it = b; it != e; ++it) t += (*it)->dur_s;
    return t;
  };
  const bool want_input = !in.output_mask || in.output_mask->empty() || in.output_mask->front();
  const bool want_filter = !in.output_mask || in.output_mask->size() < 2 || (*in.output_mask)[1];
  std::vector<std::pair<Part, double>> parts;
  const auto last_call = std::find_if(ks.begin(), ks.end(), [&](const KernelRec* k) {
    return !ks.empty() && k->call_segment == ks.back()->call_segment;
  });
  const auto w = std::find_if(ks.begin(), ks.end(), [](const KernelRec* k) { return contains_ci(k->name, "wgrad"); });
  if (last_call != ks.begin() && want_input && want_filter) {
    parts.push_back({Part::kInputGrad, sum(ks.begin(), last_call)});
    parts.push_back({Part::kFilterGrad, sum(last_call, ks.end())});
  } else if (w != ks.end() && want_filter && (w != ks.begin() || !in.output_mask || !want_input)) {
    if (w != ks.begin()) parts.push_back({Part::kInputGrad, sum(ks.begin(), w)});
    parts.push_back({Part::kFilterGrad, sum(w, ks.end())});
  } else if (in.output_mask && want_input != want_filter) {
    parts.push_back({want_input ? Part::kInputGrad : Part::kFilterGrad, sum(ks.begin(), ks.end())});
  } else {
    base.total_s = sum(ks.begin(), ks.end());
    base.dropped = TraceDropReason::kUnsplittableBackward;
    units.push_back(std::move(base));
    return;
  }
  for (const auto& [part, total] : parts) {
    Unit u = base;
    u.part = part;
    u.total_s = total;
    if (in.conv_backward) u.signature = part == Part::kInputGrad ? in.conv_backward->input_grad : in.conv_backward->filter_grad;
    if (!u.signature) u.dropped = in.unsigned_reason;
    units.push_back(std::move(u));
  }
}

std::vector<Unit> make_units(const Collected& c, const std::map<int64_t, InstanceKernels>& by_instance) {
  std::vector<Unit> units;
  for (const auto& [id, ik] : by_instance) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(id)];
    Unit base;
    base.instance = id;
    base.device = ik.device;
    base.step = ik.step;
    if (c.format == TraceFormat::kKineto && in.op == "aten::convolution_backward") {
      split_conv_backward(in, ik, std::move(base), units);
      continue;
    }
    for (const KernelRec* k : ik.kernels) base.total_s += k->dur_s;
    base.signature = in.signature;
    if (!base.signature) base.dropped = in.unsigned_reason;
    units.push_back(std::move(base));
  }
  return units;
}

// "53" when every step agrees, else the counts per step "53/53/52".
std::string per_step_counts(const std::vector<std::size_t>& counts) {
  if (counts.empty()) return "0";
  std::string out;
  const bool same = std::all_of(counts.begin(), counts.end(), [&](std::size_t n) { return n == counts.front(); });
  for (std::size_t i = 0; i < counts.size() && (i == 0 || !same); ++i) {
    if (i) out += '/';
    out += std::to_string(counts[i]);
  }
  return out;
}

// Gives units without a signature the signature of the graph op at the same position: per step,
// the i-th unit of (graph type, phase) in host order ↔ the i-th graph op of that type and phase in
// op-id order, for the types whose counts agree in every step that launched kernels.
void match_graph(const Collected& c, const OpGraph& graph, const std::vector<double>& step_kernel_s, std::vector<Unit>& units) {
  std::map<std::pair<std::string, Phase>, std::vector<OpId>> graph_ops;
  for (OpId id = 0; id < graph.num_ops(); ++id) graph_ops[{graph.op(id).type, graph.op(id).phase}].push_back(id);

  const std::size_t num_steps = static_cast<std::size_t>(std::max(c.steps, 1));
  std::map<std::pair<std::string, Phase>, std::vector<std::vector<Unit*>>> groups;
  for (Unit& u : units) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(u.instance)];
    if (u.dropped == TraceDropReason::kUnsplittableBackward) continue;
    const TorchToGraph* rule = graph_rule(in, u.part);
    if (!rule) {
      if (!u.signature && u.dropped == TraceDropReason::kNoShapes) u.dropped = TraceDropReason::kNoMapping;
      continue;
    }
    u.graph_type = std::string(rule->graph_type);
    const int step = c.steps == 0 ? 0 : u.step;
    if (step < 0) {
      if (!u.signature) u.dropped = TraceDropReason::kOutsideSteps;
      continue;
    }
    auto& by_step = groups[{u.graph_type, rule->phase}];
    by_step.resize(num_steps);
    by_step[static_cast<std::size_t>(step)].push_back(&u);
  }
  for (auto& [key, by_step] : groups) {
    const std::vector<OpId>& ops = graph_ops[key];
    std::vector<std::size_t> counts;
    for (std::size_t s = 0; s < by_step.size(); ++s)
      if (c.steps == 0 || step_kernel_s[s] > 0) counts.push_back(by_step[s].size());
    const bool agree = !ops.empty() && !counts.empty() &&
                       std::all_of(counts.begin(), counts.end(), [&](std::size_t n) { return n == ops.size(); });
    for (auto& step_units : by_step) {
      std::stable_sort(step_units.begin(), step_units.end(), [&](const Unit* a, const Unit* b) {
        const double ta = c.instances[static_cast<std::size_t>(a->instance)].ts;
        const double tb = c.instances[static_cast<std::size_t>(b->instance)].ts;
        return ta != tb ? ta < tb : a->part < b->part;
      });
      for (std::size_t i = 0; i < step_units.size(); ++i) {
        Unit& u = *step_units[i];
        if (u.signature) continue;  // shapes win
        if (!agree) {
          u.dropped = TraceDropReason::kCountMismatch;
          u.detail = "trace " + per_step_counts(counts);
          u.detail += " per step, graph ";
          u.detail += std::to_string(ops.size());
          continue;
        }
        const KernelSignature& sig = graph.op(ops[i]).kernel;
        if (sig.cls == KernelClass::kNoop) continue;  // stays dropped (no mapping)
        u.signature = sig;
        u.dropped.reset();
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// From collected events to a calibration and a report.

void summarise_usage(const Collected& c, const std::vector<Unit>& units, int busy_steps, ImportReport& rep) {
  using Key = std::tuple<std::string, Phase, std::string, std::string, int, std::string>;
  std::map<Key, TraceOpUsage> rows;
  const double per_step = 1.0 / std::max(busy_steps, 1);
  for (const Unit& u : units) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(u.instance)];
    const std::string cls = u.signature ? std::string(kernel_class_name(u.signature->cls)) : std::string();
    std::string graph_type = u.dropped && *u.dropped != TraceDropReason::kCountMismatch ? std::string() : u.graph_type;
    const int reason = u.dropped ? static_cast<int>(*u.dropped) : -1;
    TraceOpUsage& row = rows[{in.op, in.phase, graph_type, cls, reason, u.detail}];
    row.op = in.op;
    row.phase = in.phase;
    row.graph_type = graph_type;
    row.kernel_class = cls;
    row.dropped = u.dropped;
    row.detail = u.detail;
    ++row.instances;
    row.kernel_s_per_step += u.total_s * per_step;
    (u.signature ? rep.used_kernel_s_per_step : rep.dropped_kernel_s_per_step) += u.total_s * per_step;
  }
  for (auto& [_, row] : rows) rep.usage.push_back(std::move(row));
  std::stable_sort(rep.usage.begin(), rep.usage.end(), [](const TraceOpUsage& a, const TraceOpUsage& b) {
    if (a.dropped.has_value() != b.dropped.has_value()) return !a.dropped.has_value();
    return a.kernel_s_per_step > b.kernel_s_per_step;
  });
}

// Copies: per (device, kind) for the report; HtoD / DtoH / PtoP become device-pair copy fits,
// DtoD becomes the copy kernel class of its device (a copy inside one device's memory).
using SignatureTimes = std::map<std::string, std::unordered_map<KernelSignature, std::vector<double>, KernelSignatureHash>>;
void summarise_copies(const Collected& c, const TraceImportOptions& options, ImportReport& rep, Calibration& cal,
                      SignatureTimes& times) {
  std::map<std::pair<std::string, std::string>, std::vector<const CopyRec*>> groups;
  for (const CopyRec& r : c.copies)
    groups[{r.device >= 0 ? rep.devices.at(r.device) : std::string{}, r.kind}].push_back(&r);
  auto fit_or_aggregate = [](const std::vector<FitSample>& samples, double bytes, double seconds, bool& fitted) {
    fitted = false;
    if (samples.size() >= 2) {
      try {
        CopyFit f = fit_copy(samples);
        fitted = true;
        return f;
      } catch (const Error&) {
        // Times that do not grow with size: fall through to the aggregate bandwidth.
      }
    }
    return CopyFit{.latency_s = 0, .bandwidth_Bps = seconds > 0 && bytes > 0 ? bytes / seconds : 0};
  };
  std::map<std::pair<std::string, std::string>, std::vector<FitSample>> pair_samples;
  for (const auto& [key, recs] : groups) {
    TraceCopyKind k;
    k.device = key.first;
    k.kind = key.second;
    std::vector<FitSample> samples;
    for (const CopyRec* r : recs) {
      ++k.count;
      k.total_s += r->dur_s;
      if (r->bytes >= 0) {
        k.bytes += static_cast<int64_t>(r->bytes);
        if (r->bytes > 0 && r->dur_s > 0) samples.push_back({0, r->bytes, r->dur_s});
      }
      if (r->bytes <= 0 || r->dur_s <= 0 || r->device < 0) continue;
      const std::string dev = rep.devices.at(r->device);
      if (r->kind == "HtoD") pair_samples[{options.host_device, dev}].push_back({0, r->bytes, r->dur_s});
      else if (r->kind == "DtoH") pair_samples[{dev, options.host_device}].push_back({0, r->bytes, r->dur_s});
      else if (r->kind == "PtoP" && r->peer >= 0 && r->peer != r->device)
        pair_samples[{dev, rep.devices.at(r->peer)}].push_back({0, r->bytes, r->dur_s});
      else if (r->kind == "DtoD")
        times[dev][KernelSignature::copy(static_cast<int64_t>(r->bytes))].push_back(r->dur_s);
    }
    double timed_bytes = 0, timed_s = 0;
    for (const FitSample& s : samples) timed_bytes += s.bytes, timed_s += s.time_s;
    k.fit = fit_or_aggregate(samples, timed_bytes, timed_s, k.fitted);
    rep.copies.push_back(k);
  }
  for (const auto& [key, samples] : pair_samples) {
    double b = 0, s = 0;
    for (const FitSample& x : samples) b += x.bytes, s += x.time_s;
    bool fitted = false;
    CopyCalibration cc{.src = key.first, .dst = key.second, .fit = fit_or_aggregate(samples, b, s, fitted), .samples = samples};
    if (cc.fit.bandwidth_Bps > 0) cal.copies.push_back(std::move(cc));
  }
}

// ImportReport::launch_gap_s: per GPU, the median idle time before an op instance's first kernel
// (its start minus the end of the kernel the device ran before it), over the instances launched
// in steps. The simulator charges that per op as the device's launch overhead. The median
// ignores the rare long stalls a profiled run has (a harness's clear-cache pass, the profiler
// flushing), which a mean over the step's idle time would spread over every op.
template <typename DeviceName>
void measure_launch_gaps(const Collected& c, const DeviceName& device_name, ImportReport& rep) {
  std::map<std::string, std::vector<const KernelRec*>> by_device;
  for (const KernelRec& k : c.kernels)
    if (!k.host) by_device[device_name(k)].push_back(&k);
  for (auto& [device, ks] : by_device) {
    std::stable_sort(ks.begin(), ks.end(), [](const KernelRec* a, const KernelRec* b) { return a->start_us < b->start_us; });
    std::vector<double> gaps;
    double previous_end = -std::numeric_limits<double>::infinity();
    int64_t previous_instance = -2;
    for (const KernelRec* k : ks) {
      const bool first_of_instance = k->instance != previous_instance || k->instance < 0;
      // Only a kernel that was launched before the one before it ended waited for the GPU alone;
      // a gap after a later launch is the host's (its issue cost, which the eager model charges
      // the host, docs/simulator.md), not the device's.
      const bool queued = k->launch_ts <= previous_end;
      if (first_of_instance && queued && k->step >= 0 && std::isfinite(previous_end))
        gaps.push_back(std::max(0.0, k->start_us - previous_end) * 1e-6);
      previous_end = std::max(previous_end, k->start_us + k->dur_s * 1e6);
      previous_instance = k->instance;
    }
    if (gaps.empty()) continue;
    std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
    rep.launch_gap_s[device] = gaps[gaps.size() / 2];
  }
}

// Host costs (docs/calibration.md, "Host costs"): each unit's share of its instance's host time
// (a convolution backward's two units halve it), in steps; the median per graph op type (the type
// the graph match gave it, else kTorchToGraph's) and over all of them.
void measure_host_costs(const Collected& c, const std::vector<Unit>& units, ImportReport& rep, Calibration& cal) {
  std::map<int64_t, int> units_of;
  for (const Unit& u : units) ++units_of[u.instance];
  std::vector<double> all;
  std::map<std::string, std::vector<double>> by_type;
  for (const Unit& u : units) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(u.instance)];
    if (in.host_s <= 0 || (c.steps > 0 && u.step < 0)) continue;
    const double t = in.host_s / units_of[u.instance];
    all.push_back(t);
    std::string type = u.graph_type;
    if (type.empty())
      if (const TorchToGraph* rule = graph_rule(in, u.part)) type = std::string(rule->graph_type);
    if (!type.empty()) by_type[type].push_back(t);
  }
  rep.host_ops = static_cast<int64_t>(all.size());
  if (all.empty()) return;
  double total = 0;
  for (double t : all) total += t;
  std::set<int> steps;
  for (const Unit& u : units) steps.insert(u.step);
  rep.host_s_per_step = total / static_cast<double>(std::max<std::size_t>(steps.size(), 1));
  cal.dispatch_s = std::min(median(all), 1.0);
  for (auto& [type, v] : by_type) cal.dispatch_s_by_type[type] = std::min(median(v), 1.0);
}

TraceImport build(const Collected& c, std::string_view origin, const TraceImportOptions& options) {
  TraceImport out;
  ImportReport& rep = out.report;
  Calibration& cal = out.calibration;
  rep.origin = std::string(origin);
  rep.format = c.format;
  rep.gpu_name = c.gpu_name;
  rep.steps = c.steps;
  rep.memsets = c.memsets;
  cal.backend = "trace";
  cal.host = c.host;
  cal.created = c.created;

  std::set<int64_t> ids;
  for (const KernelRec& k : c.kernels)
    if (!k.host) ids.insert(k.device);
  for (const CopyRec& r : c.copies) {
    if (r.device >= 0) ids.insert(r.device);
    if (r.peer >= 0) ids.insert(r.peer);
  }
  int64_t index = 0;
  for (int64_t id : ids) rep.devices[id] = options.gpu_prefix + std::to_string(options.renumber_devices ? index++ : id);
  auto device_name = [&](const KernelRec& k) { return k.host ? options.host_device : rep.devices.at(k.device); };

  // Kernel totals and the kernels of each op instance.
  rep.step_kernel_s.assign(static_cast<std::size_t>(std::max(c.steps, 0)), 0.0);
  double in_steps = 0;
  std::map<int64_t, InstanceKernels> by_instance;
  for (const KernelRec& k : c.kernels) {
    if (!k.host) {
      ++rep.kernels;
      rep.total_kernel_s += k.dur_s;
      if (k.step >= 0 && k.step < c.steps) {
        rep.step_kernel_s[static_cast<std::size_t>(k.step)] += k.dur_s;
        in_steps += k.dur_s;
      }
    }
    if (k.instance < 0) {
      if (!k.host) ++rep.unattributed_kernels;
      continue;
    }
    InstanceKernels& ik = by_instance[k.instance];
    if (ik.kernels.empty()) {
      ik.device = device_name(k);
      ik.step = k.step;
    }
    ik.kernels.push_back(&k);
  }
  for (auto& [_, ik] : by_instance)
    std::stable_sort(ik.kernels.begin(), ik.kernels.end(),
                     [](const KernelRec* a, const KernelRec* b) { return a->launch_ts < b->launch_ts; });
  // Steps that launched nothing (the profiler's closing step marker) would dilute the mean.
  int busy_steps = 0;
  for (double s : rep.step_kernel_s) busy_steps += s > 0;
  rep.kernel_time_per_step_s = busy_steps > 0 ? in_steps / busy_steps : rep.total_kernel_s;

  if (c.format == TraceFormat::kKineto) measure_launch_gaps(c, device_name, rep);
  std::vector<Unit> units = make_units(c, by_instance);
  if (c.format == TraceFormat::kKineto && options.graph) match_graph(c, *options.graph, rep.step_kernel_s, units);
  summarise_usage(c, units, busy_steps, rep);

  SignatureTimes times;
  std::map<std::string, TraceOpSummary> by_op;
  std::set<std::string> without;
  std::set<int64_t> signed_instances;
  for (const Unit& u : units) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(u.instance)];
    if (u.signature && u.total_s > 0) {
      times[u.device][*u.signature].push_back(u.total_s);
      signed_instances.insert(u.instance);
    } else {
      without.insert(in.op);
    }
  }
  for (const auto& [id, ik] : by_instance) {
    const InstanceRec& in = c.instances[static_cast<std::size_t>(id)];
    TraceOpSummary& s = by_op[in.op];
    s.op = in.op;
    ++s.calls;
    s.kernels += static_cast<int64_t>(ik.kernels.size());
    for (const KernelRec* k : ik.kernels) s.total_s += k->dur_s;
    s.with_signature += signed_instances.count(id) ? 1 : 0;
  }
  for (auto& [_, s] : by_op) rep.ops.push_back(s);
  std::sort(rep.ops.begin(), rep.ops.end(), [](const TraceOpSummary& a, const TraceOpSummary& b) {
    return a.total_s != b.total_s ? a.total_s > b.total_s : a.op < b.op;
  });
  rep.ops_without_signature.assign(without.begin(), without.end());

  measure_host_costs(c, units, rep, cal);
  summarise_copies(c, options, rep, cal, times);
  for (auto& [dev, sigs] : times) {
    DeviceCalibration d;
    d.device = dev;
    for (auto& [sig, v] : sigs) d.kernel_times_s[sig] = median(v);
    rep.signatures += static_cast<int64_t>(d.kernel_times_s.size());
    cal.devices.push_back(std::move(d));
  }
  cal.refit(options.fit);
  return out;
}

}  // namespace

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
