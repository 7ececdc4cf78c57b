// The CPU calibration backend: measures this machine's cores as a `localhost` machine. Each
// device is a disjoint set of cores; on each, every kernel of a sweep of sizes per class (and/or
// exactly a graph's signatures) runs as a real Eigen kernel (cpu_kernels.h) on a thread pinned to
// the device: warm-up, then the median of repeats timed with steady_clock. Copies between device
// buffers are timed over a sweep of sizes and fitted to latency + bytes / bandwidth. The result is
// a Machine plus a Calibration that write_calibrated_machine stores and hwmodels loads back.
//
//   CpuCalibrationOptions options;                       // one device per core, built-in sweep
//   CalibrationResult r = calibrate_cpu(options, [](const CalibrationProgress& p) { … });
//   write_calibrated_machine("hwmodels/calibrated/localhost.yaml", r.machine, r.calibration);
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "placelab/graph/kernel.h"
#include "placelab/graph/op_graph.h"
#include "placelab/hwmodels/calibration.h"
#include "placelab/hwmodels/machine.h"
#include "placelab/profiler/cpu_executor.h"
#include "placelab/profiler/cpu_kernels.h"

namespace placelab {

// Which clock times a kernel. kWall (steady_clock) is what the executor sees and the default;
// kThreadCpu (CLOCK_THREAD_CPUTIME_ID) leaves out the time the measuring thread was descheduled,
// which keeps a calibration usable on a busy shared machine (it then predicts a quiet machine).
enum class TimingClock : uint8_t { kWall, kThreadCpu };

// How one kernel is timed: run until warmup_s has passed (at least once), then repeat until
// target_s of measured time or max_repeats, at least min_repeats; the time is the median.
struct KernelTimingOptions {
  TimingClock clock = TimingClock::kWall;
  double warmup_s = 0.02;
  double target_s = 0.15;
  int min_repeats = 5;
  int max_repeats = 200;
  // Before every timed run, write a buffer of twice the L2 cache size (untimed), so the kernel
  // starts with its data out of L1/L2 — as in the executor, where other ops run in between — but
  // still in L3 when it fits. false: back-to-back runs with warm caches.
  bool cold_cache = true;
  // Bytes cold_cache writes; 0 = cache_flush_bytes(). calibrate_cpu sets it to
  // last_level_cache_flush_bytes() for memory-bound kernels (below).
  int64_t flush_bytes = 0;
  // Memory-bound kernel classes (elementwise, reduction, embedding, softmax, copy) are timed with
  // the last-level cache flushed too, at most cold_max_repeats runs: in the executor every op has
  // its own buffers and a step's working set exceeds the LLC, so these kernels read from DRAM
  // (measured: with L2-only flushing they were predicted 35-65 % too fast). Compute-bound
  // classes (gemm, convolutions) keep the L2 flush: their time hardly depends on it.
  bool cold_memory_bound = true;
  int cold_max_repeats = 9;
  void validate() const;  // throws InputError naming the field
};

// Bytes cold_cache writes between runs: twice this core's L2 size (sysfs), 4 MiB if unknown.
int64_t cache_flush_bytes();
// Twice the size of the last-level cache (the highest cache index in sysfs), 64 MiB if unknown.
int64_t last_level_cache_flush_bytes();
// Whether calibrate_cpu times this class with the last-level cache flushed (cold_memory_bound).
bool is_memory_bound(KernelClass cls);

struct KernelTiming {
  double median_s = 0;
  double min_s = 0;
  int repeats = 0;
};

// Times `kernel` on the calling thread (pin it first: cpu::run_pinned).
KernelTiming time_kernel(cpu::CpuKernel& kernel, const KernelTimingOptions& options = {});

// The drift probe: a fixed GEMM (m = n = k = 256) timed on `cores` with the default timing
// (median of repeats). `placelab calibrate` stores it per device (DeviceCalibration::probe_s) and
// `placelab verify` times it again, so a report says how much faster or slower the machine runs
// than when it was calibrated — a shared VM drifts by tens of percent within minutes.
KernelSignature drift_probe_signature();
double time_drift_probe(std::span<const int> cores);

// The built-in sweep: for every kernel class, sizes from latency-bound to compute- or
// bandwidth-bound, shaped like the layers of the model zoo's networks (CNN convolutions,
// fully-connected GEMMs, LSTM-sized GEMMs, embeddings, softmaxes). `scale` in (0, 1] shrinks it
// (fewer and smaller sizes) for quick runs and tests; 1 is the full sweep.
std::vector<KernelSignature> default_cpu_sweep(double scale = 1.0);
// The distinct signatures of a graph's ops (noop excluded), in op order.
std::vector<KernelSignature> graph_signatures(const OpGraph& graph);

struct CpuCalibrationOptions {
  // Devices: explicit core sets when non-empty (disjoint), else the available cores split into
  // devices of cores_per_device (cpu::split_cores), at most max_devices of them (0 = all).
  std::vector<std::vector<int>> device_cores;
  int cores_per_device = 1;
  int max_devices = 0;

  bool sweep = true;                         // measure default_cpu_sweep(sweep_scale)
  double sweep_scale = 1.0;
  std::vector<KernelSignature> signatures;   // measured too (e.g. graph_signatures(g))
  // Copy sizes in bytes for the device-pair fits; empty = 1 KiB … 64 MiB by factors of 4.
  std::vector<int64_t> copy_bytes;
  KernelTimingOptions timing;
  FitOptions fit;
  int64_t max_kernel_bytes = cpu::kDefaultMaxKernelBytes;  // a larger signature is an InputError
  std::string machine_name = "localhost";

  // Throws InputError naming the field: overlapping or empty core sets, cores_per_device < 1,
  // sweep off with no signatures, a copy size ≤ 0, sweep_scale outside (0, 1] …
  void validate() const;
};

struct CalibrationProgress {
  std::string stage;  // "kernels", "copies", "overhead"
  std::string item;   // the device and the signature or copy being measured
  int done = 0;       // items finished in this stage, of `total`
  int total = 0;
};
using CalibrationProgressCallback = std::function<void(const CalibrationProgress&)>;

struct CalibrationResult {
  // The `localhost` machine: one CPU device per core set ("cpu:0"…) with streams = its cores,
  // peak_flops = the best measured GEMM rate, memory_bandwidth_Bps = the best measured
  // elementwise/copy rate, memory_bytes = physical memory / devices, launch_overhead_s = the
  // executor's measured per-op dispatch cost, and a `memory` link between every device pair with
  // the measured copy latency and bandwidth (per direction).
  Machine machine;
  Calibration calibration;  // backend "cpu"; fits already made (Calibration::refit)
  double elapsed_s = 0;
  bool pinned = true;       // every measuring thread got its core affinity
};

// Runs the calibration; `progress` (may be empty) is called on the calling thread after each
// item. Throws InputError for invalid options or a signature above max_kernel_bytes.
CalibrationResult calibrate_cpu(const CpuCalibrationOptions& options, const CalibrationProgressCallback& progress = {});

// In-situ calibration: the sweep times each kernel alone, in a loop, with flushed caches; inside a
// training step a kernel meets other cache contents (weights evicted by other tenants of a shared
// L3, activations still hot). This runs `graph` on the CPU executor with all ops on each device in
// turn and replaces each of the graph's signatures' times on that device by the median over its
// ops of their mean in-step time, then refits. The calibration's devices need their cores.
struct InSituOptions {
  int steps = 6;     // executor steps per run (>= 2; the first is warm-up)
  int rounds = 3;    // runs per device, alternating devices; per signature the median over all
  // Run every device's copy at the same time (one executor run per device, in parallel), so the
  // times include the contention of a step that keeps all devices busy (on the development VM
  // this took the worst error over 30 placements from 60 % to 15 %, docs/reproductions.md).
  bool co_run = true;
  FitOptions fit;
};
struct InSituReport {
  int signatures = 0;                // (device, signature) times replaced
  std::vector<double> step_time_s;   // the measured step with every op on device d (mean of rounds)
};
InSituReport calibrate_in_situ(const OpGraph& graph, CalibrationResult& result, const InSituOptions& options = {});

// The rounds of calibrate_in_situ one at a time, so a caller can interleave them with other runs:
// `placelab verify --in-situ` runs one round before each round of the placements it measures, so
// the kernel times and the step times it compares come from the same minutes of a drifting VM.
// Uses options.steps, options.co_run and options.fit; options.rounds is the caller's loop.
class InSituSampler {
 public:
  // `graph`, `machine` and the executor must outlive the sampler; the executor runs `graph` on
  // `machine` with the calibration's device cores.
  InSituSampler(const OpGraph& graph, const Machine& machine, const CpuExecutor& executor, const InSituOptions& options);
  // One round: all ops on each device, every device at once (co_run) or in turn. Throws
  // InputError when the graph does not fit on a device.
  void run_round();
  // Replaces each (device, signature) time of `calibration` (its devices matched to the machine's
  // by name) by the median of its in-step times over all rounds, then refits. Returns the number
  // replaced; InputError when a machine device has no calibrated counterpart.
  int apply(Calibration& calibration) const;
  // Per device, the mean measured step of the all-on-this-device runs.
  std::vector<double> step_time_s() const;

 private:
  using Samples = std::unordered_map<KernelSignature, std::vector<double>, KernelSignatureHash>;
  void record(std::size_t device, const ExecutionResult& r);
  const OpGraph& graph_;
  const Machine& machine_;
  const CpuExecutor& executor_;
  InSituOptions options_;
  int rounds_ = 0;
  std::vector<Samples> samples_;     // per device: one value per (op, round)
  std::vector<double> step_sum_s_;   // per device: sum over rounds of the measured step
};

}  // namespace placelab
