// The CUDA-free parts of the CUPTI backend: option checks, the sweep, and turning activity
// records into per-repetition times. Kept apart so that their tests run on machines with no GPU.
#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "placelab/core/error.h"
#include "placelab/profiler/cpu_kernels.h"
#include "placelab/profiler/cupti_calibrator.h"

namespace placelab {

void GpuCalibrationOptions::validate() const {
  std::set<int> seen;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::string f = "GpuCalibrationOptions.devices[" + std::to_string(i) + "] = " + std::to_string(devices[i]);
    if (devices[i] < 0) throw InputError(f + ": must be >= 0");
    if (!seen.insert(devices[i]).second) throw InputError(f + ": listed twice");
  }
  if (!sweep && signatures.empty())
    throw InputError("GpuCalibrationOptions.sweep = false with no signatures: nothing to measure");
  if (!(sweep_scale > 0 && sweep_scale <= 1))
    throw InputError("GpuCalibrationOptions.sweep_scale = " + std::to_string(sweep_scale) + ": must be in (0, 1]");
  for (std::size_t i = 0; i < copy_bytes.size(); ++i)
    if (copy_bytes[i] <= 0)
      throw InputError("GpuCalibrationOptions.copy_bytes[" + std::to_string(i) + "] = " + std::to_string(copy_bytes[i]) +
                       ": must be > 0");
  if (!copy_bytes.empty() && std::set<int64_t>(copy_bytes.begin(), copy_bytes.end()).size() < 2)
    throw InputError("GpuCalibrationOptions.copy_bytes: needs at least 2 distinct sizes to fit a bandwidth");
  if (warmup < 0) throw InputError("GpuCalibrationOptions.warmup = " + std::to_string(warmup) + ": must be >= 0");
  if (repeats < 1) throw InputError("GpuCalibrationOptions.repeats = " + std::to_string(repeats) + ": must be >= 1");
  if (max_kernel_bytes <= 0)
    throw InputError("GpuCalibrationOptions.max_kernel_bytes = " + std::to_string(max_kernel_bytes) + ": must be > 0");
  if (machine_name.empty()) throw InputError("GpuCalibrationOptions.machine_name = \"\": must not be empty");
  fit.validate();
}

std::vector<int64_t> default_gpu_copy_sizes() {
  std::vector<int64_t> s;
  for (int64_t b = 4096; b <= (int64_t{256} << 20); b *= 4) s.push_back(b);
  return s;
}

std::vector<KernelSignature> gpu_calibration_signatures(const GpuCalibrationOptions& options) {
  options.validate();
  std::vector<KernelSignature> out;
  std::unordered_set<KernelSignature, KernelSignatureHash> seen;
  auto add = [&](const KernelSignature& sig) {
    if (sig.cls == KernelClass::kNoop || !seen.insert(sig).second) return;
    const int64_t need = cpu::CpuKernel::required_bytes(sig);
    if (need > options.max_kernel_bytes)
      throw InputError(to_string(sig) + " needs " + std::to_string(need) +
                       " bytes of buffers, above GpuCalibrationOptions.max_kernel_bytes = " +
                       std::to_string(options.max_kernel_bytes));
    out.push_back(sig);
  };
  if (options.sweep)
    for (const KernelSignature& s : default_cpu_sweep(options.sweep_scale)) add(s);
  for (const KernelSignature& s : options.signatures) add(s);
  return out;
}

std::vector<double> repetition_times_s(std::span<const ActivityRecord> records, uint64_t first_external_id,
                                       int repetitions) {
  PLACELAB_CHECK(repetitions >= 0) << "repetitions = " << repetitions;
  std::unordered_map<uint32_t, uint64_t> external;  // correlation id → external id
  for (const ActivityRecord& r : records)
    if (r.kind == ActivityRecord::Kind::kExternalCorrelation) external[r.correlation_id] = r.external_id;
  std::vector<double> t(static_cast<std::size_t>(repetitions), 0.0);
  std::vector<int> count(static_cast<std::size_t>(repetitions), 0);
  for (const ActivityRecord& r : records) {
    if (r.kind == ActivityRecord::Kind::kExternalCorrelation) continue;
    auto it = external.find(r.correlation_id);
    if (it == external.end() || it->second < first_external_id ||
        it->second >= first_external_id + static_cast<uint64_t>(repetitions))
      continue;
    if (r.end_ns < r.start_ns)
      throw Error("CUPTI record of correlation " + std::to_string(r.correlation_id) + " ends (" +
                  std::to_string(r.end_ns) + " ns) before it starts (" + std::to_string(r.start_ns) + " ns)");
    const std::size_t i = static_cast<std::size_t>(it->second - first_external_id);
    t[i] += static_cast<double>(r.end_ns - r.start_ns) * 1e-9;
    ++count[i];
  }
  for (std::size_t i = 0; i < count.size(); ++i)
    if (count[i] == 0)
      throw Error("no CUPTI activity record for repetition " + std::to_string(i) + " (external id " +
                  std::to_string(first_external_id + i) + "): records were dropped or the work launched nothing");
  return t;
}

}  // namespace placelab
