#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "placelab/core/error.h"
#include "placelab/hwmodels/cost_model.h"

namespace placelab {
namespace {

void set(AnalyticCostModel::Options& o, DeviceKind kind, KernelClass cls, double compute, double memory) {
  o.efficiency[AnalyticCostModel::efficiency_index(kind)][static_cast<std::size_t>(cls)] = {compute, memory};
}

}  // namespace

// The numbers and their sources are explained in docs/machines.md ("Analytic cost model").
AnalyticCostModel::Options::Options() {
  using K = KernelClass;
  constexpr DeviceKind kGpu = DeviceKind::kGpu, kCpu = DeviceKind::kCpu;
  // GPU. gemm: SGEMM 1536³ reaches ~2.9 of 4.37 TFLOP/s boost on a K80 die (HARDWARE.md) → 0.66.
  // memory: bandwidthTest device-to-device moves 170 of 240 GB/s on a K80 die (NUMBERS.md) → 0.7.
  set(*this, kGpu, K::kNoop, 1.0, 1.0);
  set(*this, kGpu, K::kGemm, 0.66, 0.7);
  set(*this, kGpu, K::kConv2D, 0.5, 0.7);
  set(*this, kGpu, K::kConv2DBackpropInput, 0.5, 0.7);
  set(*this, kGpu, K::kConv2DBackpropFilter, 0.4, 0.7);
  set(*this, kGpu, K::kElementwise, 0.5, 0.7);
  set(*this, kGpu, K::kReduction, 0.5, 0.6);
  set(*this, kGpu, K::kEmbedding, 0.5, 0.5);
  set(*this, kGpu, K::kSoftmax, 0.5, 0.6);
  set(*this, kGpu, K::kCopy, 1.0, 0.7);
  // CPU (Eigen thread pool as TF 1.x uses it): lower fractions of a socket's peak.
  set(*this, kCpu, K::kNoop, 1.0, 1.0);
  set(*this, kCpu, K::kGemm, 0.5, 0.5);
  set(*this, kCpu, K::kConv2D, 0.3, 0.5);
  set(*this, kCpu, K::kConv2DBackpropInput, 0.3, 0.5);
  set(*this, kCpu, K::kConv2DBackpropFilter, 0.25, 0.5);
  set(*this, kCpu, K::kElementwise, 0.3, 0.5);
  set(*this, kCpu, K::kReduction, 0.3, 0.4);
  set(*this, kCpu, K::kEmbedding, 0.3, 0.3);
  set(*this, kCpu, K::kSoftmax, 0.2, 0.4);
  set(*this, kCpu, K::kCopy, 1.0, 0.5);
}

void AnalyticCostModel::Options::validate() const {
  for (DeviceKind kind : {DeviceKind::kCpu, DeviceKind::kGpu}) {
    for (int c = 0; c < kNumKernelClasses; ++c) {
      const ClassEfficiency& e = efficiency[efficiency_index(kind)][static_cast<std::size_t>(c)];
      std::string where = "efficiency[" + std::string(device_kind_name(kind)) + "][" +
                          std::string(kernel_class_name(static_cast<KernelClass>(c))) + "]";
      for (auto [field, value] : {std::pair{".compute", e.compute}, std::pair{".memory", e.memory}}) {
        if (!(value > 0 && value <= 1)) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%g", value);
          throw InputError(where + field + " = " + buf + ": must be in (0, 1]");
        }
      }
    }
  }
}

AnalyticCostModel::AnalyticCostModel(const Machine& machine, Options options)
    : CostModel(machine), options_(std::move(options)) {
  options_.validate();
  // Each device against the distinct ones seen so far: a machine has few device types, and
  // identical devices (identical_devices) cost the same.
  std::vector<DeviceId> distinct;
  representative_.resize(machine.num_devices());
  for (std::size_t d = 0; d < machine.num_devices(); ++d) {
    const auto it = std::find_if(distinct.begin(), distinct.end(),
                                 [&](DeviceId r) { return identical_devices(machine.devices[r], machine.devices[d]); });
    representative_[d] = it == distinct.end() ? static_cast<DeviceId>(d) : *it;
    if (it == distinct.end()) distinct.push_back(static_cast<DeviceId>(d));
  }
}

DeviceId AnalyticCostModel::op_time_representative(DeviceId device) const {
  PLACELAB_CHECK(device < representative_.size()) << "device " << device << " of " << representative_.size();
  return representative_[device];
}

double AnalyticCostModel::model_op_time_s(const Op& op, DeviceId device) const {
  PLACELAB_CHECK(device < machine().num_devices()) << "device " << device << " of " << machine().num_devices();
  const Device& d = machine().devices[device];
  const double flops = op.flops > 0 ? op.flops : kernel_flops(op.kernel);
  const double bytes = op.bytes_accessed > 0 ? op.bytes_accessed : kernel_bytes(op.kernel);
  if (d.efficiency) {
    const EfficiencyProfile& p = *d.efficiency;
    if (op.kernel.cls == KernelClass::kNoop) return p.host_op_s.value_or(d.launch_overhead_s);
    const EfficiencyCurve& e = p.curve(op.kernel.cls);
    const bool conv = op.kernel.cls == KernelClass::kConv2D || op.kernel.cls == KernelClass::kConv2DBackpropInput ||
                      op.kernel.cls == KernelClass::kConv2DBackpropFilter;
    // conv dims: n, c, h, w, k, r, s, stride, pad (graph/kernel.h).
    const bool winograd = conv && op.kernel.dims[5] == 3 && op.kernel.dims[6] == 3 && op.kernel.dims[7] == 1;
    const double compute_max = e.compute_max * (winograd ? p.winograd_speedup : 1.0);
    // flops / (peak · compute_max · flops / (flops + half)) = (flops + half) / (peak · compute_max).
    const double compute_s = flops > 0 ? (flops + e.compute_half_flops) / (d.peak_flops_per_s * compute_max) : 0;
    const double memory_s = bytes > 0 ? (bytes + e.memory_half_bytes) / (d.memory_bandwidth_Bps * e.memory_max) : 0;
    return d.launch_overhead_s + std::max(compute_s, memory_s);
  }
  if (op.kernel.cls == KernelClass::kNoop) return d.launch_overhead_s;
  const ClassEfficiency& e =
      options_.efficiency[efficiency_index(d.kind)][static_cast<std::size_t>(op.kernel.cls)];
  const double compute_s = flops / (d.peak_flops_per_s * e.compute);
  const double memory_s = bytes / (d.memory_bandwidth_Bps * e.memory);
  return d.launch_overhead_s + std::max(compute_s, memory_s);
}

}  // namespace placelab
