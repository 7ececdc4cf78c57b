// CalibratedCostModel: measured kernel time, else class fit, else the analytic roofline.
#include <string>

#include "placelab/core/error.h"
#include "placelab/hwmodels/calibration.h"

namespace placelab {

CalibratedCostModel::CalibratedCostModel(const Machine& machine, const Calibration& calibration,
                                         AnalyticCostModel::Options analytic)
    : CostModel(machine),
      calibration_(&calibration),
      analytic_(std::make_unique<AnalyticCostModel>(machine, std::move(analytic))) {
  const std::size_t n = machine.num_devices();
  by_device_.assign(n, nullptr);
  for (const DeviceCalibration& d : calibration.devices)
    if (auto id = machine.find_device(d.device)) by_device_[*id] = &d;
  // A calibration covers identical devices (docs/calibration.md, "Identical devices"): a device
  // without measurements of its own takes those of the first calibrated device identical to it —
  // a trace of gpu:0 prices gpu:1..7 of an 8-GPU node alike. Identical devices are the analytic
  // model's classes (its representatives group them by identical_devices).
  std::vector<DeviceId> first_calibrated(n, static_cast<DeviceId>(n));  // by analytic representative
  for (std::size_t c = 0; c < n; ++c) {
    DeviceId& first = first_calibrated[analytic_->op_time_representative(static_cast<DeviceId>(c))];
    if (by_device_[c] && first == n) first = static_cast<DeviceId>(c);
  }
  measured_on_.resize(n);
  for (std::size_t d = 0; d < n; ++d) {
    const DeviceId first = first_calibrated[analytic_->op_time_representative(static_cast<DeviceId>(d))];
    measured_on_[d] = by_device_[d] || first == n ? static_cast<DeviceId>(d) : first;
    by_device_[d] = by_device_[measured_on_[d]];
  }
  // Devices priced by one calibration share the op times of the smallest of them; the others
  // share those of the first device of their analytic class.
  representative_.resize(n);
  std::vector<DeviceId> first_of_calibration(n, static_cast<DeviceId>(n));  // by measured_on_
  std::vector<DeviceId> first_uncalibrated(n, static_cast<DeviceId>(n));    // by analytic representative
  for (std::size_t d = 0; d < n; ++d) {
    DeviceId& first = by_device_[d] ? first_of_calibration[measured_on_[d]]
                                    : first_uncalibrated[analytic_->op_time_representative(static_cast<DeviceId>(d))];
    if (first == n) first = static_cast<DeviceId>(d);
    representative_[d] = first;
  }
  copies_.assign(n * n, nullptr);
  for (const CopyCalibration& c : calibration.copies) {
    auto src = machine.find_device(c.src), dst = machine.find_device(c.dst);
    if (src && dst && *src != *dst) copies_[static_cast<std::size_t>(*src) * n + *dst] = &c.fit;
  }
}

CalibratedCostModel::~CalibratedCostModel() = default;

CostLookup CalibratedCostModel::model_lookup(const Op& op, DeviceId device) const {
  PLACELAB_CHECK(device < by_device_.size()) << "device " << device << " of " << by_device_.size();
  if (const DeviceCalibration* d = by_device_[device]) {
    const double overhead = machine().devices[device].launch_overhead_s;
    // A noop runs no kernel: its whole cost is the dispatch overhead the backend measured.
    if (op.kernel.cls == KernelClass::kNoop) return {overhead, CostSource::kMeasured};
    if (auto it = d->kernel_times_s.find(op.kernel); it != d->kernel_times_s.end())
      return {overhead + it->second, CostSource::kMeasured};
    if (std::optional<double> t = fitted_time_s(*d, op.kernel)) return {overhead + *t, CostSource::kClassFit};
  }
  return {analytic_->op_time_s(op, device), CostSource::kAnalytic};
}

CostLookup CalibratedCostModel::lookup(const KernelSignature& sig, DeviceId device) const {
  // The analytic fallback reads work from the op; give it the signature's own.
  Op op{.name = to_string(sig), .kernel = sig, .flops = kernel_flops(sig), .bytes_accessed = kernel_bytes(sig)};
  return model_lookup(op, device);
}

double CalibratedCostModel::model_op_time_s(const Op& op, DeviceId device) const { return model_lookup(op, device).time_s; }

DeviceId CalibratedCostModel::op_time_representative(DeviceId device) const {
  PLACELAB_CHECK(device < representative_.size()) << "device " << device << " of " << representative_.size();
  return representative_[device];
}

std::optional<DeviceId> CalibratedCostModel::measured_on(DeviceId device) const {
  PLACELAB_CHECK(device < measured_on_.size()) << "device " << device << " of " << measured_on_.size();
  if (!by_device_[device]) return std::nullopt;
  return measured_on_[device];
}

double CalibratedCostModel::transfer_time_s(int64_t bytes, DeviceId src, DeviceId dst) const {
  if (src == dst) return 0;
  const std::size_t n = machine().num_devices();
  PLACELAB_CHECK(src < n && dst < n) << src << " -> " << dst << " of " << n << " devices";
  if (const CopyFit* fit = copies_[static_cast<std::size_t>(src) * n + dst]) return fit->time_s(static_cast<double>(bytes));
  return CostModel::transfer_time_s(bytes, src, dst);
}

double CalibratedCostModel::dispatch_time_s(const Op& op) const {
  if (auto it = calibration_->dispatch_s_by_type.find(op.type); it != calibration_->dispatch_s_by_type.end())
    return it->second;
  if (calibration_->dispatch_s > 0) return calibration_->dispatch_s;
  return CostModel::dispatch_time_s(op);
}

std::string CalibratedCostModel::describe() const {
  std::string s = "calibrated (" + calibration_->backend;
  if (!calibration_->host.empty()) s += " on " + calibration_->host;
  if (!calibration_->created.empty()) s += ", " + calibration_->created;
  return s + ")";
}

}  // namespace placelab
