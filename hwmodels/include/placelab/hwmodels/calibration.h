// Calibration data — measured kernel times and copy costs of one machine — and the cost model
// built from them. A calibration backend (profiler/: cpu, cupti, trace) measures, this header
// stores, fits, reads and writes (docs/calibration.md), and CalibratedCostModel answers the
// simulator's questions from it: exact signature match, else the per-class fit, else the
// analytic roofline.
//
//   CalibratedMachine cm = load_calibrated_machine("hwmodels/calibrated/localhost.yaml");
//   CalibratedCostModel cost(cm.machine, cm.calibration);
//   CostLookup l = cost.lookup(op, device);   // l.time_s, l.source == CostSource::kMeasured …
#pragma once

#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "placelab/graph/kernel.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine.h"

namespace placelab {

// The shape family of a signature, the key of DeviceCalibration::family_fits: convolutions by
// filter size and stride ("conv2d{r=3,s=3,stride=1}"), elementwise kernels by their number of
// inputs ("elementwise{inputs=2}"); "" for classes without families.
std::string kernel_family(const KernelSignature& sig);
inline constexpr int kMinFamilySamples = 4;

// One measured run configuration: the kernel's FP32 work and traffic and its median time.
struct FitSample {
  double flops = 0;   // kernel_flops of the signature
  double bytes = 0;   // kernel_bytes of the signature (or bytes copied, for copies)
  double time_s = 0;  // measured median seconds, > 0
};

// time_s = a_s + s_per_flop · flops + s_per_byte · bytes, for kernels whose kernel_bytes is at
// most upto_bytes (the last segment of a fit has upto_bytes = +inf). All coefficients ≥ 0.
struct FitSegment {
  double upto_bytes = std::numeric_limits<double>::infinity();
  double a_s = 0;          // fixed latency, seconds
  double s_per_flop = 0;   // seconds per floating-point operation (1 / sustained FLOP/s)
  double s_per_byte = 0;   // seconds per byte moved (1 / sustained bytes/s)
  double time_s(double flops, double bytes) const { return a_s + s_per_flop * flops + s_per_byte * bytes; }
};

// A per-kernel-class fit: one or more segments ordered by upto_bytes. Small sizes are usually
// latency-bound and get their own segment (a larger a_s, smaller slopes).
struct ClassFit {
  std::vector<FitSegment> segments;  // non-empty; upto_bytes strictly increasing, last = +inf
  int num_samples = 0;               // samples the fit was made from (informational)
  double rms_relative_error = 0;     // sqrt(mean(((fit − measured)/measured)²)) on those samples
  // Seconds predicted for a kernel with this work and traffic (the segment covering `bytes`).
  double time_s(double flops, double bytes) const;
};

struct FitOptions {
  int max_segments = 3;             // piecewise fit with at most this many segments (≥ 1)
  int min_samples_per_segment = 4;  // a segment needs at least this many samples
  // A further segment is kept only when it shrinks the sum of squared relative errors to at most
  // this fraction of the fit with one segment fewer.
  double min_improvement = 0.5;
  void validate() const;  // throws InputError naming the field
};

// Non-negative least squares fit of time = a + b·flops + c·bytes minimising the squared
// *relative* residuals (times span orders of magnitude; each sample counts alike). Exact NNLS for
// three unknowns: every subset of free coefficients is solved with Eigen and the best feasible one
// kept. Throws Error when `samples` is empty or holds a time ≤ 0.
FitSegment fit_linear(std::span<const FitSample> samples);
// The piecewise fit over kernel bytes described by FitOptions (sorted by bytes internally).
ClassFit fit_class(std::span<const FitSample> samples, const FitOptions& options = {});

// Copy cost between two devices: time = latency_s + bytes / bandwidth_Bps.
struct CopyFit {
  double latency_s = 0;
  double bandwidth_Bps = 0;  // > 0
  double time_s(double bytes) const { return latency_s + bytes / bandwidth_Bps; }
};
// Fits a CopyFit to (bytes, seconds) samples with the same relative NNLS as fit_linear; the
// samples' flops are ignored. Throws Error when there is no sample or the slope fits to 0.
CopyFit fit_copy(std::span<const FitSample> samples);

// Everything measured on one device.
struct DeviceCalibration {
  std::string device;        // the Machine device name, "cpu:0"
  std::vector<int> cores;    // CPU backend: the logical cores the device runs on (may be empty)
  // Median seconds per kernel signature, launch overhead excluded.
  std::unordered_map<KernelSignature, double, KernelSignatureHash> kernel_times_s;
  std::map<KernelClass, ClassFit> fits;
  // Fits per shape family (kernel_family): a backend picks its algorithm by the family (cuDNN:
  // Winograd for 3x3, implicit GEMM for 1x1), so one line per family predicts an unmeasured
  // signature better than one per class. Only families with at least kMinFamilySamples.
  std::map<std::string, ClassFit> family_fits;
  // CPU backend: the drift probe's median seconds on `cores` at calibration time (0 = not
  // measured). `placelab verify` times the probe again to report how much the machine's speed
  // moved since; predictions do not use it.
  double probe_s = 0;
};

// Copies from one device to another (one direction).
struct CopyCalibration {
  std::string src, dst;               // device names
  CopyFit fit;
  std::vector<FitSample> samples;     // (bytes, seconds) the fit came from; may be empty
};

struct Calibration {
  std::string backend;   // "cpu", "cupti", "trace"
  std::string host;      // where it was measured
  std::string created;   // ISO 8601 UTC time of the measurement
  std::vector<DeviceCalibration> devices;
  std::vector<CopyCalibration> copies;
  // Host seconds an eager framework's thread spends issuing one op (docs/calibration.md, "Host
  // costs"): the median per graph op type, and the median over every op the backend saw for the
  // types it has none of. Empty and 0: not measured (the machine's dispatch_s answers).
  std::map<std::string, double> dispatch_s_by_type;
  double dispatch_s = 0;

  const DeviceCalibration* find_device(std::string_view name) const;
  DeviceCalibration* find_device(std::string_view name) {
    return const_cast<DeviceCalibration*>(std::as_const(*this).find_device(name));
  }
  const CopyCalibration* find_copy(std::string_view src, std::string_view dst) const;
  // Recomputes every device's class fits from its kernel_times_s (classes with at least one
  // sample; noop is never fitted) and its family fits (families with kMinFamilySamples).
  void refit(const FitOptions& options = {});
};

// Leave-some-out check of the class fits: how well does a fit predict a signature it has not
// seen? Per device and class, the signatures sorted by work are split: every `every`-th one
// (starting with the second, so the extremes stay in the fit) is held out, the class is fitted
// on the rest with `options`, and each held-out signature's time is predicted from that fit.
// Classes with fewer than `every` + options.min_samples_per_segment signatures are skipped.
struct HoldOutPrediction {
  std::string device;
  KernelSignature signature;
  double measured_s = 0;
  double predicted_s = 0;
  double relative_error() const { return (predicted_s - measured_s) / measured_s; }
};
struct HoldOutClass {
  std::string device;
  KernelClass cls = KernelClass::kNoop;
  int fitted = 0;                 // signatures in the fit
  int held_out = 0;               // signatures predicted
  double median_abs_error = 0;    // of relative_error(), over the held-out ones
  double max_abs_error = 0;
};
struct HoldOutReport {
  std::vector<HoldOutPrediction> predictions;  // by device, class, then work
  std::vector<HoldOutClass> classes;
  double median_abs_error = 0;                 // over every prediction; 0 when there is none
};
HoldOutReport hold_out_check(const Calibration& calibration, int every = 3, const FitOptions& options = {});

// The fitted time of a signature on a calibrated device (launch overhead excluded): its family's
// fit, else its class's, else nullopt. CalibratedCostModel and hold_out_check both ask this.
std::optional<double> fitted_time_s(const DeviceCalibration& device, const KernelSignature& sig);
// Recomputes one device's class and family fits from its kernel_times_s (Calibration::refit).
void refit_device(DeviceCalibration& device, const FitOptions& options = {});

// A machine together with its calibration, as one calibration file holds them.
struct CalibratedMachine {
  Machine machine;          // finalised
  Calibration calibration;  // its device names all name devices of `machine`
};

// Parses the `calibration:` block of a YAML document (docs/calibration.md). `origin` names the
// source in messages; errors throw InputError "origin:line: devices[0].kernels[…] = -1: must be > 0".
Calibration parse_calibration_yaml(std::string_view text, std::string_view origin);
// Parses a whole calibrated machine file: a `machine:` block in the schema of docs/machines.md and
// a `calibration:` block. Checks that every calibrated device and copy names a machine device.
CalibratedMachine parse_calibrated_machine_yaml(std::string_view text, std::string_view origin);
// Reads a calibrated machine file; throws InputError when it cannot be opened or is invalid.
CalibratedMachine load_calibrated_machine(const std::filesystem::path& path);

// The YAML text of a calibration: a document with one top-level `calibration:` block.
std::string calibration_yaml(const Calibration& calibration);
// The YAML text of a machine in the schema parse_machine_yaml reads, as a `machine:` block
// (indented by two spaces) when `as_block`, else as a top-level document.
std::string machine_yaml(const Machine& machine, bool as_block);
// Writes machine + calibration to `path` atomically (temporary file in the same folder, then
// rename). Throws Error when the file cannot be written.
void write_calibrated_machine(const std::filesystem::path& path, const Machine& machine,
                              const Calibration& calibration);

// The cost model of a calibrated machine. op time = device launch overhead + measured time of the
// exact signature, else of the class fit at the signature's kernel_flops/kernel_bytes, else the
// AnalyticCostModel's answer (which includes the launch overhead itself). A noop on a calibrated
// device costs the launch overhead alone (source kMeasured: the backend measures the dispatch
// cost). Transfers use the measured copy fit of the (src, dst) pair, else the machine's route.
class CalibratedCostModel : public CostModel {
 public:
  // `machine` and `calibration` must outlive the model. Calibrated devices whose name the machine
  // lacks are ignored (parse_calibrated_machine_yaml rejects them earlier).
  CalibratedCostModel(const Machine& machine, const Calibration& calibration,
                      AnalyticCostModel::Options analytic = {});
  ~CalibratedCostModel() override;

  double transfer_time_s(int64_t bytes, DeviceId src, DeviceId dst) const final;
  // A copy fit and the machine's route are both latency + bytes / bandwidth.
  bool transfer_is_affine(DeviceId /*src*/, DeviceId /*dst*/) const final { return true; }
  // The calibration's host cost of the op's type, else its median over all ops, else the
  // machine's (CostModel::dispatch_time_s).
  double dispatch_time_s(const Op& op) const override;
  std::string describe() const override;
  using CostModel::lookup;
  // The time of a bare kernel signature (no op, so no measured time) and which source gave it.
  CostLookup lookup(const KernelSignature& sig, DeviceId device) const;
  // Devices priced by one device's measurements share them; uncalibrated devices share the
  // analytic model's classes.
  DeviceId op_time_representative(DeviceId device) const override;
  // The calibrated device whose measurements price `device`: itself when the calibration has it,
  // else the first calibrated device identical to it (identical_devices), else nullopt (the
  // analytic model prices it).
  std::optional<DeviceId> measured_on(DeviceId device) const;

 protected:
  double model_op_time_s(const Op& op, DeviceId device) const override;
  // The time and which source gave it: measured kernel, class fit, or the analytic roofline.
  CostLookup model_lookup(const Op& op, DeviceId device) const override;

 private:
  const Calibration* calibration_;
  std::vector<DeviceId> representative_;             // per device
  std::vector<DeviceId> measured_on_;                // per device: whose calibration prices it (itself if none)
  std::unique_ptr<AnalyticCostModel> analytic_;
  std::vector<const DeviceCalibration*> by_device_;  // indexed by DeviceId; null = uncalibrated
  std::vector<const CopyFit*> copies_;               // num_devices² row-major by src; null = route
};

}  // namespace placelab
