// Internals of the trace importer that its three files share: trace_import.cpp (helpers, signatures
// from shapes, entry points), trace_collect.cpp (events into Collected), trace_calibrate.cpp (Collected
// into a calibration and report). Private to profiler/.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "placelab/profiler/trace_import.h"

namespace placelab::trace_detail {

using json = nlohmann::ordered_json;

// Helpers (trace_import.cpp).
bool starts_with(std::string_view s, std::string_view p);
// An event field's text; "" when absent or not a string.
std::string arg_string(const json& args, const char* key);
// Concrete inputs (Kineto "Concrete Inputs") at `index`: the integers, or the bools of a
// "[True, False]" list; nullopt when the trace left the position empty.
std::optional<std::vector<int64_t>> concrete_ints(std::span<const std::string> concrete, std::size_t index);
std::optional<std::vector<bool>> concrete_bools(std::span<const std::string> concrete, std::size_t index);
bool contains_ci(std::string_view s, std::string_view needle);  // case-insensitive find
// The signature of one op instance from its shapes, or the reason there is none (trace_import.cpp).
std::optional<KernelSignature> torch_signature(std::string_view op, std::span<const std::vector<int64_t>> dims,
                                               std::span<const std::string> concrete, TraceDropReason& why);

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

// One GPU kernel (TF: also a CPU op), with the op instance and step it belongs to.
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

// One memcpy event; its kind and size, as far as the trace recorded them.
struct CopyRec {
  std::string kind;
  int64_t device = -1;      // the GPU that ran it; -1 none
  int64_t peer = -1;        // PtoP: the other GPU when recorded
  double bytes = -1;        // -1 unknown
  double dur_s = 0;
};

// What a trace holds for the import, whichever format it came in (collect_kineto,
// collect_tensorflow); build() makes the calibration and the report of it.
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

// Throws InputError "origin:line: what" (trace_import.cpp).
[[noreturn]] void fail(std::string_view origin, int line, const std::string& what);
// Value counts as text for messages, the most frequent first (trace_import.cpp).
std::string counts_text(const std::map<std::string, int64_t>& counts, std::size_t limit = 8);

// ---------------------------------------------------------------------------------------------
// Reading events (trace_collect.cpp).

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
KinetoCat kineto_category(std::string_view cat);  // an event's `cat`, compared without case
// Throws, naming the line, when an event's ts or dur is not a physical time.
void check_event_times(const json& events, std::string_view text, std::string_view origin, std::string_view pointer);
// A Kineto trace's kernels, copies and op instances, with steps from the `step_marker` annotations.
Collected collect_kineto(const json& root, const json& events, std::string_view origin, std::string_view step_marker);
// A TensorFlow timeline's, as one step; signatures from options.graph by node name.
Collected collect_tensorflow(const json& events, const TraceImportOptions& options, std::string_view origin);

// From collected events to a calibration and a report (trace_calibrate.cpp).
TraceImport build(const Collected& c, std::string_view origin, const TraceImportOptions& options);

}  // namespace placelab::trace_detail
