// The `cupti` calibration backend: measures every visible NVIDIA GPU. Each kernel of the same size
// sweep as the CPU backend (default_cpu_sweep, and/or exactly a graph's signatures) runs as a real
// GPU kernel — cuBLAS SGEMM, cuDNN convolutions and their gradients, placelab's own elementwise,
// reduction, softmax and embedding kernels, a device-to-device memcpy for copies — and its
// duration comes from CUPTI activity records (kernel and memcpy), never from host clocks.
// Copies host↔device (pinned) and device↔device (peer access when possible) are timed the same way
// for every pair over a size sweep and fitted to latency + bytes / bandwidth.
//
// Built only when CMake finds CUDA (target placelab::profiler_cuda). With no usable GPU the entry
// point throws InputError("no CUDA device: …") before touching CUPTI, so the CLI exits 2.
//
//   GpuCalibrationOptions options;                 // every GPU, built-in sweep
//   CalibrationResult r = calibrate_cupti(options);
//   write_calibrated_machine("hwmodels/calibrated/node.yaml", r.machine, r.calibration);
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "placelab/graph/kernel.h"
#include "placelab/hwmodels/calibration.h"
#include "placelab/profiler/cpu_calibrator.h"

namespace placelab {

struct GpuCalibrationOptions {
  std::vector<int> devices;  // CUDA device ordinals to measure; empty = every visible device
  bool sweep = true;         // measure default_cpu_sweep(sweep_scale), the CPU backend's sweep
  double sweep_scale = 1.0;
  std::vector<KernelSignature> signatures;  // measured too (e.g. graph_signatures(g))
  // Copy sizes in bytes (at least 2 distinct ones); empty = default_gpu_copy_sizes().
  std::vector<int64_t> copy_bytes;
  int warmup = 3;    // untimed launches per signature (and copy size) first
  int repeats = 10;  // timed launches; the time is the median of their CUPTI durations
  FitOptions fit;
  int64_t max_kernel_bytes = int64_t{2} << 30;  // a larger signature is an InputError
  std::string machine_name = "gpu-node";
  // Throws InputError naming the field: a negative or repeated device, sweep off with no
  // signatures, sweep_scale outside (0, 1], a copy size ≤ 0, warmup < 0, repeats < 1 …
  void validate() const;
};

// 4 KiB … 256 MiB by factors of 4: latency-bound to bandwidth-bound on PCIe and NVLink.
std::vector<int64_t> default_gpu_copy_sizes();

// The signatures a GPU calibration measures, in order, without repeats: the sweep (when on), then
// options.signatures; noop dropped. Throws InputError as options.validate() and for a signature
// above max_kernel_bytes.
std::vector<KernelSignature> gpu_calibration_signatures(const GpuCalibrationOptions& options);

// One CUPTI activity record, reduced to what the calibrator needs (a CUDA-free copy, so the
// record → sample logic is testable without a GPU).
struct ActivityRecord {
  enum class Kind : uint8_t {
    kKernel,               // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
    kMemcpy,               // CUPTI_ACTIVITY_KIND_MEMCPY
    kPeerCopy,             // CUPTI_ACTIVITY_KIND_MEMCPY2 (peer to peer)
    kExternalCorrelation,  // maps correlation_id to the external_id the calibrator pushed
  };
  Kind kind = Kind::kKernel;
  uint32_t correlation_id = 0;
  uint64_t external_id = 0;          // kExternalCorrelation only
  uint64_t start_ns = 0, end_ns = 0;  // GPU timestamps, nanoseconds
  uint32_t device = 0;               // the device that ran it
  uint32_t src_device = 0, dst_device = 0;  // kPeerCopy
  uint64_t bytes = 0;                // copies
};

// Seconds of GPU activity (kernels and copies) of each repetition: repetition i is every record
// whose correlation id was launched under external id first_external_id + i; a repetition's time is
// the sum of its records' durations. Throws Error when a repetition has no record (CUPTI dropped it)
// or a record ends before it starts.
std::vector<double> repetition_times_s(std::span<const ActivityRecord> records, uint64_t first_external_id,
                                       int repetitions);

// Runs the calibration on every GPU of options.devices. The machine has a `cpu:0` host device
// (peak FLOP/s = one-core GEMM rate × online cores and streaming bandwidth, from a quick probe
// with the CPU backend's kernels — run the CPU backend for measured CPU numbers) and one
// `gpu:i` per measured GPU (name, memory from cudaGetDeviceProperties; peak_flops = best measured
// SGEMM rate (a 2048³ GEMM and a 2²⁴-element elementwise probe are always measured), memory_bandwidth_Bps = best measured elementwise/copy rate, launch_overhead_s = the
// measured gap between back-to-back kernels), a `pcie_root` switch joined to cpu:0 by a `memory`
// link and to each GPU by a `pcie` link with the measured H2D/D2H fits, and a direct link between GPUs with peer access (`nvlink` when the measured peer bandwidth
// exceeds 32 GB/s, beyond any PCIe 4 x16 link, else `pcie`). Throws InputError "no CUDA device:
// <reason>" when no GPU is usable, InputError for invalid options, Error for a failing CUDA call.
CalibrationResult calibrate_cupti(const GpuCalibrationOptions& options, const CalibrationProgressCallback& progress = {});

}  // namespace placelab
