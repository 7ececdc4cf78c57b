#include "placelab/hwmodels/efficiency.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace placelab {
namespace {

using K = KernelClass;

// Shared by the built-in GPU profiles, each measured once and assumed for the other types:
// * backward convolutions reach 0.8 of the forward rate: in the V100 ResNet-50 trace
//   (/work/shared/data/traces/v100-sxm2-cnn-training.kineto.json.gz, one step) the 53 forward
//   convolutions take 17.92 ms of kernels for 261.6 GFLOP and the 53 backward ones 42.47 ms for
//   twice that: (2 × 17.92) / 42.47 = 0.84; the 1×1 convolutions alone give 0.65 / 0.77 = 0.84.
// * 3×3 stride-1 convolutions run 2× the direct rate (Winograd): same trace, per convolution,
//   1×1 forward 0.64–0.85 of the V100's 15.7 TFLOP/s, 3×3 stride 1 1.34–1.65; backward 0.48–0.76
//   against 1.36–1.69 (docs/machines.md, "Where the profiles come from").
// * memory-bound kernels reach half their bandwidth at 1 MB: a fixed few µs per kernel (tail and
//   ramp) at the 170–780 GB/s these GPUs copy at; fitted with the K80 rows (docs/reproductions.md).
constexpr double kBackwardConv = 0.8;
constexpr double kWinograd = 2.0;
constexpr double kMemoryHalfBytes = 1e6;

// The GPU classes other than gemm and convolutions: memory-bound; their compute maxima are the
// old flat defaults (they barely matter). Memory maxima scale with the type's copy efficiency:
// reductions and softmax make more than one pass (×0.86), a gather reads scattered rows (×0.71),
// the ratios of the old defaults 0.6 / 0.5 to 0.7.
EfficiencyProfile gpu_profile(std::string name, double gemm_compute, double conv_compute, double conv_half_flops,
                              double memory) {
  EfficiencyProfile p;
  p.name = std::move(name);
  auto set = [&](K cls, double compute, double compute_half, double mem) {
    p.curve(cls) = {compute, compute_half, mem, cls == K::kNoop ? 0 : kMemoryHalfBytes};
  };
  set(K::kNoop, 1.0, 0, 1.0);
  set(K::kGemm, gemm_compute, 0, memory);
  set(K::kConv2D, conv_compute, conv_half_flops, memory);
  set(K::kConv2DBackpropInput, conv_compute * kBackwardConv, conv_half_flops, memory);
  set(K::kConv2DBackpropFilter, conv_compute * kBackwardConv, conv_half_flops, memory);
  set(K::kElementwise, 0.5, 0, memory);
  set(K::kReduction, 0.5, 0, memory * 0.6 / 0.7);
  set(K::kEmbedding, 0.5, 0, memory * 0.5 / 0.7);
  set(K::kSoftmax, 0.5, 0, memory * 0.6 / 0.7);
  set(K::kCopy, 1.0, 0, memory);
  p.winograd_speedup = kWinograd;
  return p;
}

std::vector<EfficiencyProfile> make_builtin_profiles() {
  std::vector<EfficiencyProfile> out;
  // K80 (one GK210 die), TensorFlow 1.x as Post ran it (Google Cloud, NeurIPS 2018 Table 1).
  // gemm 0.66: SGEMM 1536³ reaches ~2.9 of 4.37 TFLOP/s boost (HARDWARE.md).
  // memory 0.7: bandwidthTest device-to-device 170 of 240 GB/s (NUMBERS.md, k80x8-bandwidthTest).
  // conv 0.45 with half size 4 GFLOP: fitted to Post's single-GPU ResNet-50 (0.86 s) and
  // Inception-V3 (1.75–1.79 s) at batch 32; ResNet-101, ResNet-200 and RNNLM held out
  // (docs/reproductions.md, "Analytic presets against measurements"). The large half size stands
  // for what Post's TF 1.x convolutions lose against the direct rate; it is the fit's, not a
  // measured kernel curve.
  out.push_back(gpu_profile("k80", 0.66, 0.45, 4e9, 0.7));
  // P100 (PCIe and SXM2 alike, each relative to its own peak), TensorFlow 1.x.
  // memory 0.61: bandwidthTest device-to-device 443.8 of 732 GB/s on a P100-PCIE-16GB (NUMBERS.md,
  // gearshifft PR #82). gemm 0.66: as the K80 (no P100 SGEMM figure in shared/; an assumption).
  // conv 0.78, flat: fitted to tf_cnn_benchmarks' ResNet-50 at batch 64 on one DGX-1 P100 (219
  // images/s, tensorflow.org/performance/benchmarks, May 2017) together with host_op_s against
  // EAGLE's Inception-V3 at batch 1 (0.071 s); its other rows are held out.
  {
    EfficiencyProfile p = gpu_profile("p100", 0.66, 0.78, 0, 0.61);
    // Ops without a kernel cost 1 µs on the host: fitted with the conv rate above to EAGLE's
    // Inception-V3 batch 1 (17,203 ops, 9,933 of them without a kernel: at the 3 µs launch gap of
    // the p100x4 preset for every op the step cannot be below 0.052 s of the measured 0.071 s).
    p.host_op_s = 1e-6;
    out.push_back(p);
  }
  // V100 (SXM2), from the PyTorch ResNet-50 training trace above (cuDNN, FP32, batch 32).
  // conv 0.77: the median forward 1×1 convolution reaches 0.77 of 15.7 TFLOP/s (0.64–0.85).
  // memory 0.87: on-device copy 780 of 900 GB/s (NUMBERS.md, ABCI V100 p2pBandwidthLatencyTest
  // diagonal). gemm 0.66: as the K80 (an assumption; the trace's GEMMs are too small to tell).
  out.push_back(gpu_profile("v100", 0.66, 0.77, 0, 0.87));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

const std::vector<EfficiencyProfile>& builtin_profiles() {
  static const std::vector<EfficiencyProfile> profiles = make_builtin_profiles();
  return profiles;
}

std::string format(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::optional<EfficiencyProfile> builtin_efficiency_profile(std::string_view name) {
  for (const EfficiencyProfile& p : builtin_profiles())
    if (p.name == name) return p;
  return std::nullopt;
}

std::vector<std::string> efficiency_profile_names() {
  std::vector<std::string> names;
  for (const EfficiencyProfile& p : builtin_profiles()) names.push_back(p.name);
  return names;
}

std::string validate_efficiency_profile(const EfficiencyProfile& profile) {
  for (int c = 0; c < kNumKernelClasses; ++c) {
    const EfficiencyCurve& e = profile.classes[static_cast<std::size_t>(c)];
    std::string cls(kernel_class_name(static_cast<KernelClass>(c)));
    auto bad = [&](std::string_view field, double v, std::string_view rule) {
      std::string out = cls;
      out += '.';
      out += field;
      out += " = ";
      out += format(v);
      out += ": ";
      out += rule;
      return out;
    };
    if (!(e.compute_max > 0 && e.compute_max <= 1)) return bad("compute_max", e.compute_max, "must be in (0, 1]");
    if (!(e.memory_max > 0 && e.memory_max <= 1)) return bad("memory_max", e.memory_max, "must be in (0, 1]");
    if (!(e.compute_half_flops >= 0 && e.compute_half_flops <= 1e15))
      return bad("compute_half_flops", e.compute_half_flops, "must be in [0, 1e15]");
    if (!(e.memory_half_bytes >= 0 && e.memory_half_bytes <= 1e15))
      return bad("memory_half_bytes", e.memory_half_bytes, "must be in [0, 1e15]");
  }
  if (!(profile.winograd_speedup >= 1 && profile.winograd_speedup <= 4))
    return "winograd_speedup = " + format(profile.winograd_speedup) + ": must be in [1, 4]";
  if (profile.host_op_s && !(*profile.host_op_s >= 0 && *profile.host_op_s <= 1e4))
    return "host_op_s = " + format(*profile.host_op_s) + ": must be in [0, 1e4] seconds";
  return "";
}

}  // namespace placelab
