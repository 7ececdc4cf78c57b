// The `trace` calibration backend: reads a profiler trace of a real training run — PyTorch
// profiler (Kineto) Chrome-trace JSON of any schema from PyTorch 1.8 on, or a TensorFlow 1.x
// timeline (step_stats as Chrome trace), plain or gzip-compressed — and turns it into a Calibration
// (backend "trace") plus an ImportReport that says what was used and what was left out, and why.
// Kernels are attributed to the framework op that launched them and to a phase (forward, backward,
// update); op instances become kernel signatures from their recorded shapes or, when the trace
// has none, from the graph they are matched to; memcpy events become copy fits per direction.
// Nothing here needs a GPU, and nothing is guessed: what cannot be derived is counted, not filled in.
//
//   TraceImport t = import_trace("run.pt.trace.json.gz");
//   t.report.kernel_time_per_step_s;          // 0.0937 …
//   std::cout << t.report.usage_table();      // per op type: used or dropped, and why
//   write_calibrated_machine("my-gpu.yaml", machine, t.calibration);
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/graph/kernel.h"
#include "placelab/graph/op_graph.h"
#include "placelab/hwmodels/calibration.h"

namespace placelab {

enum class TraceFormat : uint8_t {
  kAuto,        // Kineto when an event's `cat` is one Kineto writes (kernel, cpu_op, cuda_runtime,
                //   1.8's Kernel, Operator, Runtime …), else TensorFlow when processes name devices
  kKineto,      // PyTorch profiler
  kTensorFlow,  // tf.profiler / timeline.Timeline(step_stats).generate_chrome_trace_format()
};
std::string_view trace_format_name(TraceFormat format);  // "auto", "kineto", "tensorflow"

// The largest trace text import_trace reads (after decompression), by default. Parsed, a trace
// takes about 5.6 times its text (a 400 MB Kineto trace: 2.2 GB, 24 s), so the default keeps an
// import under 1 GB; a profile of a few steps is a few to a hundred MB (`--max-trace-mb` for more).
inline constexpr int64_t kMaxTraceBytes = int64_t{128} << 20;

struct TraceImportOptions {
  TraceFormat format = TraceFormat::kAuto;
  // Calibration device names. A trace GPU (Kineto args.device, TF "/device:GPU:N") becomes
  // gpu_prefix + index, where index is its rank among the trace's GPU ids (dense from 0) when
  // renumber_devices, else the trace id itself. Host-side work and host ends of copies use
  // host_device.
  std::string gpu_prefix = "gpu:";
  bool renumber_devices = true;
  std::string host_device = "cpu:0";
  // Traces without shapes take signatures from a graph. Not owned; may be null.
  // TensorFlow timelines: a node whose name is an op of the graph gets that op's signature.
  // Kineto: the i-th instance in a step of a torch op in a phase gets the signature of the i-th
  // graph op (in op-id order) of the type and phase that kTorchToGraph in trace_calibrate.cpp assigns
  // to it — when the counts per step agree (docs/calibration.md lists the table). Shapes the
  // trace recorded win over the graph's.
  const OpGraph* graph = nullptr;
  // Kineto: host annotations whose name contains this text mark steps (PyTorch's profiler writes
  // ProfilerStep#N; benchmark harnesses write their own, e.g. "measure|forward"). Of nested
  // markers, the innermost are the steps.
  std::string step_marker = "ProfilerStep#";
  // Kineto: only the kernels launched in steps first_step..last_step (0-based, in step order,
  // inclusive; last_step -1 = the last) feed the calibration, so that a trace can be calibrated on
  // some of its steps and checked on the others. Copies are read from the whole trace.
  int first_step = 0;
  int last_step = -1;
  int64_t max_bytes = kMaxTraceBytes;  // import_trace: the limit of read_maybe_gzip
  FitOptions fit;  // for Calibration::refit of the per-class fits
  void validate() const;  // throws InputError naming the field
};

// Copies of one kind (Kineto "Memcpy HtoD (Pinned -> Device)" → "HtoD"; kinds HtoD, DtoH, DtoD,
// PtoP, HtoH) on one device.
struct TraceCopyKind {
  std::string kind;
  std::string device;        // calibration name of the GPU that ran them ("" for HtoH)
  int64_t count = 0;
  int64_t bytes = 0;         // total bytes; copies of unknown size count here as 0
  double total_s = 0;        // total duration, seconds
  // fit_copy over (bytes, seconds) of the copies with a known size. When the times do not grow
  // with size (one size only, or noise) `fitted` is false and the fit is latency 0 and the
  // aggregate bandwidth bytes / total_s.
  bool fitted = false;
  CopyFit fit;
};

// All kernels attributed to one framework op type (Kineto: the outermost `aten::` op enclosing the
// launch on its thread, else the innermost cpu_op or annotation; TF: the op type).
struct TraceOpSummary {
  std::string op;
  int64_t calls = 0;       // op instances that launched at least one kernel
  int64_t kernels = 0;
  double total_s = 0;      // kernel seconds
  int64_t with_signature = 0;  // instances mapped to a kernel signature
};

// Why the kernels of some op instances fed no kernel signature.
enum class TraceDropReason : uint8_t {
  kNoShapes,              // the trace recorded no shapes and no graph was given
  kStrideNotRecorded,     // shapes, but not the stride / padding / window ("Concrete Inputs" absent)
  kNoMapping,             // no signature rule for the op from shapes, nor a graph rule
  kCountMismatch,         // graph-guided: instances per step differ from the graph's ops of that type
  kUnsplittableBackward,  // aten::convolution_backward with no "wgrad" kernel while both gradients are due
  kOutsideSteps,          // graph-guided: launched outside every ProfilerStep, so no per-step position
};
// "no shapes recorded", "stride/padding not recorded", "no mapping", "count mismatch with the graph",
// "unsplittable backward", "outside profiler steps".
std::string_view trace_drop_reason_text(TraceDropReason reason);

// One row of ImportReport::usage: the instances of one framework op type in one phase that were
// used the same way (matched to the same graph op type, or giving signatures of the same class) or
// dropped for the same reason.
struct TraceOpUsage {
  std::string op;            // "aten::conv2d", "aten::convolution_backward", TF op type "MatMul"
  Phase phase = Phase::kForward;
  std::string graph_type;    // the graph op type matched to ("Conv2DBackpropFilter"); "" when none
  std::string kernel_class;  // class of the signatures given ("conv2d_backprop_filter"); "" when dropped
  std::optional<TraceDropReason> dropped;  // nullopt: used
  std::string detail;        // kCountMismatch: "trace 69 per step, graph 16"
  // Op instances; a convolution backward split into input and weight gradient counts once per part.
  int64_t instances = 0;
  double kernel_s_per_step = 0;  // their kernel seconds per step (total over steps with kernels)
};

struct ImportReport {
  std::string origin;      // the file (or the name given to import_trace_text)
  TraceFormat format = TraceFormat::kAuto;  // the format actually read
  std::string gpu_name;    // deviceProperties[0].name (Kineto) or the TF device, "" if absent
  int64_t kernels = 0;     // GPU kernel events
  double total_kernel_s = 0;
  // Steps: Kineto ProfilerStep#N annotations (host side); a kernel belongs to the step during
  // which it was launched. TF timelines are one step. 0 when the trace has no step markers.
  int steps = 0;
  std::vector<double> step_kernel_s;  // kernel seconds launched in each step, in step order
  // Mean kernel seconds per step over the steps that launched kernels (a trailing marker with
  // no work, as the profiler's last ProfilerStep often is, does not count); with no steps, the
  // total.
  double kernel_time_per_step_s = 0;
  // Kineto: per calibration device, the median GPU idle time before an op instance's first kernel
  // (launched in a step), the per-op overhead the simulator should charge that GPU
  // (Device::launch_overhead_s); `placelab calibrate --backend trace` writes it into the machine.
  std::map<std::string, double> launch_gap_s;
  // Kineto: host costs (docs/calibration.md, "Host costs"): the op units whose issue time was
  // read (in steps), and their host seconds per step; the calibration holds the medians.
  int64_t host_ops = 0;
  double host_s_per_step = 0;
  int64_t memsets = 0;
  std::vector<TraceCopyKind> copies;   // sorted by device, then kind
  std::vector<TraceOpSummary> ops;     // by total_s, largest first
  // Op types whose kernels got no signature (no shapes recorded, or a type with no mapping),
  // sorted by name.
  std::vector<std::string> ops_without_signature;
  // What fed the calibration and what did not, per op type, phase and reason: used rows first, then
  // dropped ones, each by kernel_s_per_step, largest first.
  std::vector<TraceOpUsage> usage;
  double used_kernel_s_per_step = 0;     // kernel seconds per step that gave signatures
  double dropped_kernel_s_per_step = 0;  // attributed kernel seconds per step that did not
  int64_t unattributed_kernels = 0;    // no launch or no enclosing op found
  int64_t signatures = 0;              // distinct (device, signature) entries in the calibration
  // trace device id → calibration device name
  std::map<int64_t, std::string> devices;

  // A few lines for the CLI: format, GPU, steps, kernel time per step, copies, signatures.
  std::string brief() const;
  // `usage` as a compact text table, one line per row: op, phase, used as / dropped because,
  // instances, kernel ms per step; the largest `max_rows` rows, then one line for the rest.
  std::string usage_table(std::size_t max_rows = 30) const;
};

struct TraceImport {
  Calibration calibration;  // backend "trace"; kernel_times_s are medians over op instances
  ImportReport report;
};

// Reads `path` (gzip-compressed when it starts with the gzip magic bytes) and imports it. Throws
// InputError when the file cannot be read, is not JSON ("run.json:12: invalid JSON: …"), is no
// trace this reader knows ("run.json:1: traceEvents: missing"; a schema of neither kind names the
// event categories it found, with counts), or holds no GPU kernel (nor, for TensorFlow, any op).
TraceImport import_trace(const std::filesystem::path& path, const TraceImportOptions& options = {});
// The same for a trace already in memory; `origin` names it in messages.
TraceImport import_trace_text(std::string_view text, std::string_view origin, const TraceImportOptions& options = {});

// The bytes of a file, decompressed when it is gzip. Throws InputError when it cannot be read, the
// gzip stream is corrupt, or the file or its decompressed text exceeds `max_bytes` (a 6 MB gzip
// bomb would otherwise inflate to gigabytes before anything looks at it).
std::string read_maybe_gzip(const std::filesystem::path& path, int64_t max_bytes = kMaxTraceBytes);

// The kernel signature of one PyTorch op instance from its recorded shapes (Kineto args
// "Input Dims" — "Input dims" before PyTorch 1.10 — one list per input, [] for scalars and
// non-tensors) and "Concrete Inputs" (the literal values of non-tensor inputs, may be empty).
// Maps aten::mm, addmm, bmm, baddbmm, matmul (2-D/3-D), linear → gemm; conv2d / convolution /
// _convolution / cudnn_convolution (4-D, groups 1, dilation 1, not transposed, symmetric stride
// and padding) → conv2d, only when the concrete inputs give stride and padding; softmax, _softmax,
// log_softmax, _log_softmax → softmax over the last dim; the ops of a CNN as the zoo's builder
// signs their TensorFlow counterparts: batch_norm / cudnn_batch_norm / native_batch_norm →
// elementwise{e, 2} (FusedBatchNorm), their _backward → elementwise{e, 3} (FusedBatchNormGrad),
// max_pool2d(_with_indices) and avg_pool2d → reduction{out × k², out} and adaptive_avg_pool2d
// (output size dividing the input) → reduction{in, out} (MaxPool, AvgPool; window and stride
// from the concrete inputs), max_pool2d_with_indices_backward → elementwise{in, 3}
// (MaxPoolGrad), avg_pool2d_backward / _adaptive_avg_pool2d_backward → elementwise{in, 1}
// (AvgPoolGrad), _log_softmax_backward_data → elementwise{e, 2} (the cross-entropy gradient),
// nll_loss(_nd) → reduction{batch, 1}, nll_loss_backward → elementwise{input, 1}; embedding →
// embedding; elementwise ops (add, mul, sub, div, relu, sigmoid, tanh, gelu, threshold_backward,
// dropout, copy_, fill_ …) → elementwise{elements of the largest input, tensor inputs}.
// nullopt for anything else, and for a convolution or pooling whose stride, padding or window was
// not recorded (never PyTorch's defaults in their place). aten::convolution_backward: see below.
std::optional<KernelSignature> signature_for_torch_op(std::string_view op, std::span<const std::vector<int64_t>> input_dims,
                                                      std::span<const std::string> concrete_inputs = {});

// The two gradients of one aten::convolution_backward, each signed with the fields of the forward
// convolution it differentiates (as the zoo's Conv2DBackpropInput / Conv2DBackpropFilter).
struct ConvBackwardSignatures {
  std::optional<KernelSignature> input_grad;   // conv2d_backprop_input; nullopt when output_mask[0] is false
  std::optional<KernelSignature> filter_grad;  // conv2d_backprop_filter; nullopt when output_mask[1] is false
};
// From aten::convolution_backward's "Input Dims" (grad_output, input, weight, …) and "Concrete
// Inputs" (…, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
// output_mask at positions 3 … 10). nullopt when the shapes are not 4-D, the concrete inputs
// (stride, padding, output_mask) were not recorded, or the convolution is grouped, dilated,
// transposed or asymmetric.
std::optional<ConvBackwardSignatures> conv_backward_signatures(std::span<const std::vector<int64_t>> input_dims,
                                                               std::span<const std::string> concrete_inputs);

// The copy kind of a memcpy event name: "Memcpy HtoD (Pinned -> Device)" → "HtoD", TF
// "MEMCPYDtoH" → "DtoH"; nullopt when the name names no known kind.
std::optional<std::string> memcpy_kind(std::string_view name);

}  // namespace placelab
