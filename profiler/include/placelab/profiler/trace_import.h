// The `trace` calibration backend: reads a profiler trace of a real training run — PyTorch
// profiler (Kineto) Chrome-trace JSON or a TensorFlow timeline (step_stats as Chrome trace), plain
// or gzip-compressed — and turns it into a Calibration (backend "trace") plus an ImportReport that
// says what was found. Kernels are attributed to the framework op that launched them; ops whose
// shapes the trace records become kernel signatures with measured times; memcpy events become
// copy fits per direction. Nothing here needs a GPU.
//
//   TraceImport t = import_trace("run.pt.trace.json.gz");
//   t.report.kernel_time_per_step_s;          // 0.0937 …
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
  kAuto,        // Kineto when the events carry `cat` kernel/cpu_op/cuda_runtime, else TensorFlow
  kKineto,      // PyTorch profiler
  kTensorFlow,  // tf.profiler / timeline.Timeline(step_stats).generate_chrome_trace_format()
};
std::string_view trace_format_name(TraceFormat format);  // "auto", "kineto", "tensorflow"

struct TraceImportOptions {
  TraceFormat format = TraceFormat::kAuto;
  // Calibration device names. A trace GPU (Kineto args.device, TF "/device:GPU:N") becomes
  // gpu_prefix + index, where index is its rank among the trace's GPU ids (dense from 0) when
  // renumber_devices, else the trace id itself. Host-side work and host ends of copies use
  // host_device.
  std::string gpu_prefix = "gpu:";
  bool renumber_devices = true;
  std::string host_device = "cpu:0";
  // TensorFlow timelines carry node names but no shapes: with a graph, a node whose name is an op
  // of the graph gets that op's kernel signature. Not owned; may be null.
  const OpGraph* graph = nullptr;
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
  int64_t memsets = 0;
  std::vector<TraceCopyKind> copies;   // sorted by device, then kind
  std::vector<TraceOpSummary> ops;     // by total_s, largest first
  // Op types whose kernels got no signature (no shapes recorded, or a type with no mapping),
  // sorted by name.
  std::vector<std::string> ops_without_signature;
  int64_t unattributed_kernels = 0;    // no launch or no enclosing op found
  int64_t signatures = 0;              // distinct (device, signature) entries in the calibration
  // trace device id → calibration device name
  std::map<int64_t, std::string> devices;

  // A few lines for the CLI: format, GPU, steps, kernel time per step, copies, signatures.
  std::string brief() const;
};

struct TraceImport {
  Calibration calibration;  // backend "trace"; kernel_times_s are medians over op instances
  ImportReport report;
};

// Reads `path` (gzip-compressed when it starts with the gzip magic bytes) and imports it. Throws
// InputError when the file cannot be read, is not JSON ("run.json:12: invalid JSON: …"), or is no
// trace this reader knows ("run.json:1: traceEvents: missing").
TraceImport import_trace(const std::filesystem::path& path, const TraceImportOptions& options = {});
// The same for a trace already in memory; `origin` names it in messages.
TraceImport import_trace_text(std::string_view text, std::string_view origin, const TraceImportOptions& options = {});

// The bytes of a file, decompressed when it is gzip. Throws InputError when it cannot be read or
// the gzip stream is corrupt.
std::string read_maybe_gzip(const std::filesystem::path& path);

// The kernel signature of one PyTorch op instance from its recorded shapes (Kineto args
// "Input Dims", one list per input, [] for scalars and non-tensors) and "Concrete Inputs" (the
// literal values of non-tensor inputs, may be empty). Maps aten::mm, addmm, bmm, baddbmm, matmul
// (2-D/3-D), linear → gemm; conv2d / convolution / cudnn_convolution (4-D, groups 1) → conv2d
// (stride/padding from the concrete inputs, PyTorch defaults 1/0 when not recorded); softmax,
// _softmax, log_softmax → softmax over the last dim; embedding → embedding; elementwise ops
// (add, mul, sub, div, relu, sigmoid, tanh, gelu, threshold_backward, copy_, fill_ …) →
// elementwise{elements of the largest input, tensor inputs}. nullopt for anything else.
std::optional<KernelSignature> signature_for_torch_op(std::string_view op, std::span<const std::vector<int64_t>> input_dims,
                                                      std::span<const std::string> concrete_inputs = {});

// The copy kind of a memcpy event name: "Memcpy HtoD (Pinned -> Device)" → "HtoD", TF
// "MEMCPYDtoH" → "DtoH"; nullopt when the name names no known kind.
std::optional<std::string> memcpy_kind(std::string_view name);

}  // namespace placelab
