// Efficiency profiles: how close one GPU or CPU type comes to its peak FLOP/s and memory bandwidth,
// per kernel class and as a function of the kernel's size. A device in a machine file names one
// (`efficiency: k80`) or spells one out; AnalyticCostModel turns it into op times. The built-in
// profiles are fitted to published step times and real kernel traces (docs/machines.md).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/graph/kernel.h"

namespace placelab {

// The fraction of peak one kernel class reaches, growing with the kernel's size:
//   compute efficiency = compute_max · flops / (flops + compute_half_flops)
//   memory efficiency  = memory_max  · bytes / (bytes + memory_half_bytes)
// A half size of 0 makes the curve flat. Equivalently, a kernel's compute time is
// (flops + compute_half_flops) / (peak · compute_max): the half size is the fixed cost of a small
// kernel (tails, a partly idle GPU), expressed as work.
struct EfficiencyCurve {
  double compute_max = 1.0;         // (0, 1]: of Device::peak_flops_per_s, for large kernels
  double compute_half_flops = 0;    // >= 0, FLOPs at which the kernel reaches compute_max / 2
  double memory_max = 1.0;          // (0, 1]: of Device::memory_bandwidth_Bps, for large kernels
  double memory_half_bytes = 0;     // >= 0, bytes at which the kernel reaches memory_max / 2
  bool operator==(const EfficiencyCurve&) const = default;
};

// One device type's curves, one per kernel class (indexed by static_cast<int>(KernelClass)).
struct EfficiencyProfile {
  std::string name;  // "k80", "p100", …, or "custom" for one spelled out in a machine file
  std::array<EfficiencyCurve, kNumKernelClasses> classes{};
  // Compute-efficiency multiplier of 3×3, stride-1 convolutions (all three conv classes): cuDNN
  // runs them as Winograd transforms, which do fewer multiplications than the direct count that
  // Op::flops holds. In [1, 4]; 1 = no such effect.
  double winograd_speedup = 1.0;
  // Seconds an op without a kernel (class noop: Identity, VariableV2, Shape …) costs instead of the
  // device's launch_overhead_s: the framework runs it on the host without launching anything.
  // nullopt = launch_overhead_s, as for every other op.
  std::optional<double> host_op_s;

  bool operator==(const EfficiencyProfile&) const = default;
  const EfficiencyCurve& curve(KernelClass cls) const { return classes[static_cast<std::size_t>(cls)]; }
  EfficiencyCurve& curve(KernelClass cls) { return classes[static_cast<std::size_t>(cls)]; }
};

// The built-in profile `name` ("k80", "p100", "v100"); nullopt when there is none.
std::optional<EfficiencyProfile> builtin_efficiency_profile(std::string_view name);
// Names of the built-in profiles, sorted.
std::vector<std::string> efficiency_profile_names();
// Checks every value's range; returns "" when valid, else "<class>.<field> = <value>: <rule>"
// (e.g. "conv2d.compute_max = 1.5: must be in (0, 1]").
std::string validate_efficiency_profile(const EfficiencyProfile& profile);

}  // namespace placelab
