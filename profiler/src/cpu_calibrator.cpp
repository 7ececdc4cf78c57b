#include "placelab/profiler/cpu_calibrator.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <ranges>
#include <set>
#include <thread>
#include <unordered_set>

#include <time.h>
#include <unistd.h>

#include "placelab/core/error.h"
#include "placelab/core/keys.h"
#include "placelab/profiler/cpu_device.h"
#include "placelab/profiler/cpu_executor.h"
#include "measure_util.h"

namespace placelab {
namespace {

using detail::median;
using detail::host_name;
using detail::utc_now_iso;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Seconds on the chosen clock, for differences only.
double clock_s(TimingClock clock) {
  if (clock == TimingClock::kThreadCpu) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "CPU";
}

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{8} << 30;
}

std::string cores_text(const std::vector<int>& cores) {
  return join_names(cores | std::views::transform([](int c) { return std::to_string(c); }), ",");
}

// Signatures always measured, so that the machine's peak_flops and memory_bandwidth_Bps come from
// a compute-bound and a bandwidth-bound kernel even when only a graph's signatures are asked for.
const KernelSignature kPeakProbe = KernelSignature::gemm(512, 512, 512);
const KernelSignature kBandwidthProbe = KernelSignature::elementwise(int64_t{1} << 22, 2);

}  // namespace

void KernelTimingOptions::validate() const {
  if (!(warmup_s >= 0)) throw InputError("KernelTimingOptions.warmup_s: must be >= 0");
  if (!(target_s > 0)) throw InputError("KernelTimingOptions.target_s: must be > 0");
  if (min_repeats < 1) throw InputError("KernelTimingOptions.min_repeats = " + std::to_string(min_repeats) + ": must be >= 1");
  if (max_repeats < min_repeats)
    throw InputError("KernelTimingOptions.max_repeats = " + std::to_string(max_repeats) + ": must be >= min_repeats");
  if (flush_bytes < 0) throw InputError("KernelTimingOptions.flush_bytes = " + std::to_string(flush_bytes) + ": must be >= 0");
  if (cold_max_repeats < 1)
    throw InputError("KernelTimingOptions.cold_max_repeats = " + std::to_string(cold_max_repeats) + ": must be >= 1");
}

int64_t cache_flush_bytes() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index2/size");
  int64_t size = 0;
  char unit = 0;
  if (in >> size) {
    if (in >> unit) size *= unit == 'M' ? (1 << 20) : unit == 'K' ? 1024 : 1;
  }
  return size > 0 ? 2 * size : int64_t{4} << 20;
}

int64_t last_level_cache_flush_bytes() {
  int64_t size = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    int64_t v = 0;
    char unit = 0;
    if (!(in >> v)) continue;
    if (in >> unit) v *= unit == 'M' ? (1 << 20) : unit == 'K' ? 1024 : 1;
    size = std::max(size, v);  // the last level is the largest
  }
  return size > 0 ? 2 * size : int64_t{64} << 20;
}

bool is_memory_bound(KernelClass cls) {
  switch (cls) {
    case KernelClass::kElementwise:
    case KernelClass::kReduction:
    case KernelClass::kEmbedding:
    case KernelClass::kSoftmax:
    case KernelClass::kCopy:
      return true;
    default:
      return false;
  }
}

namespace {

// Writes one byte per cache line of a thread-local buffer of `bytes`, evicting the kernel's data
// from the caches that size covers.
void flush_caches(int64_t bytes) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < static_cast<std::size_t>(bytes)) buffer.resize(static_cast<std::size_t>(bytes));
  for (std::size_t i = 0; i < static_cast<std::size_t>(bytes); i += 64) buffer[i] = static_cast<char>(buffer[i] + 1);
  // Keep the compiler from dropping the writes.
  asm volatile("" : : "r"(buffer.data()) : "memory");
}

}  // namespace

KernelSignature drift_probe_signature() { return KernelSignature::gemm(256, 256, 256); }

double time_drift_probe(std::span<const int> cores) {
  double t = 0;
  cpu::run_pinned(cores, [&] {
    cpu::CpuKernel kernel(drift_probe_signature());
    t = time_kernel(kernel).median_s;
  });
  return std::max(t, 1e-9);
}

KernelTiming time_kernel(cpu::CpuKernel& kernel, const KernelTimingOptions& options) {
  options.validate();
  // Warm-up: page faults of the output buffers, the CPU's frequency ramp.
  const auto warm = Clock::now();
  do kernel.run();
  while (seconds_since(warm) < options.warmup_s);
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < options.max_repeats &&
         (static_cast<int>(times.size()) < options.min_repeats || total < options.target_s)) {
    if (options.cold_cache) flush_caches(options.flush_bytes > 0 ? options.flush_bytes : cache_flush_bytes());
    const double t = clock_s(options.clock);
    kernel.run();
    const double d = clock_s(options.clock) - t;
    times.push_back(d);
    total += d;
  }
  KernelTiming out;
  out.repeats = static_cast<int>(times.size());
  out.min_s = *std::min_element(times.begin(), times.end());
  out.median_s = median(std::move(times));
  return out;
}

std::vector<KernelSignature> default_cpu_sweep(double scale) {
  if (!(scale > 0 && scale <= 1)) throw InputError("sweep scale = " + std::to_string(scale) + ": must be in (0, 1]");
  std::vector<KernelSignature> s;
  // GEMM: squares from latency- to compute-bound; fully-connected and LSTM shapes (m = batch);
  // their weight gradients (k = batch, memory-heavy); batched small GEMMs (attention).
  for (int64_t d : {16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024}) s.push_back(KernelSignature::gemm(d, d, d));
  for (auto [m, n, k] : std::initializer_list<std::array<int64_t, 3>>{
           {8, 512, 512}, {8, 1024, 1024}, {8, 4096, 1024}, {32, 1024, 1024}, {32, 2048, 512}, {64, 1024, 512},
           {128, 1024, 1024}, {128, 512, 2048}, {256, 256, 4096}, {512, 512, 8}, {1024, 1024, 8}, {2048, 512, 32},
           {1024, 1024, 64}, {512, 512, 128}, {1024, 4096, 32}, {4096, 1024, 8}, {32, 10, 1024}, {8, 10, 4096}})
    s.push_back(KernelSignature::gemm(m, n, k));
  for (auto [d, b] : std::initializer_list<std::array<int64_t, 2>>{{32, 8}, {64, 8}, {64, 32}, {128, 16}})
    s.push_back(KernelSignature::gemm(d, d, d, b));
  // Convolutions shaped like CIFAR/ImageNet-style layers (n, c, hw, k, r, stride, pad), each in
  // its three forms.
  for (auto [n, c, hw, k, r, st, pad] : std::initializer_list<std::array<int64_t, 7>>{
           {8, 3, 32, 32, 3, 1, 1}, {8, 32, 32, 32, 3, 1, 1}, {8, 32, 16, 64, 3, 1, 1}, {8, 64, 16, 64, 3, 1, 1},
           {8, 64, 8, 128, 3, 1, 1}, {8, 128, 8, 128, 3, 1, 1}, {8, 3, 32, 64, 5, 1, 2}, {8, 64, 16, 256, 1, 1, 0},
           {8, 64, 16, 128, 3, 2, 1}, {1, 32, 32, 32, 3, 1, 1}, {1, 64, 8, 64, 3, 1, 1}, {32, 32, 16, 32, 3, 1, 1},
           {32, 64, 8, 64, 3, 1, 1}, {16, 16, 32, 16, 3, 1, 1}, {4, 128, 16, 128, 3, 1, 1}, {8, 256, 4, 256, 3, 1, 1}})
    for (KernelClass cls : {KernelClass::kConv2D, KernelClass::kConv2DBackpropInput, KernelClass::kConv2DBackpropFilter})
      s.push_back(KernelSignature::conv2d(cls, n, c, hw, hw, k, r, r, st, pad));
  for (int64_t e = 1 << 8; e <= (1 << 24); e *= 4) {
    s.push_back(KernelSignature::elementwise(e, 1));
    s.push_back(KernelSignature::elementwise(e, 2));
    if (e >= (1 << 12)) s.push_back(KernelSignature::elementwise(e, 4));
  }
  for (int64_t e = 1 << 10; e <= (1 << 24); e *= 4) {
    s.push_back(KernelSignature::reduction(e, 1));
    s.push_back(KernelSignature::reduction(e, std::max<int64_t>(1, e / 256)));
    s.push_back(KernelSignature::reduction(e, e / 16));
  }
  for (int64_t dim : {64, 256, 1024})
    for (int64_t lookups : {16, 128, 1024, 8192}) s.push_back(KernelSignature::embedding(10000, dim, lookups));
  for (int64_t rows : {1, 8, 64, 512})
    for (int64_t cols : {10, 100, 1000, 10000, 32768})
      if (rows * cols <= (int64_t{1} << 24)) s.push_back(KernelSignature::softmax(rows, cols));
  for (int64_t b = 256; b <= (int64_t{64} << 20); b *= 4) s.push_back(KernelSignature::copy(b));

  std::vector<KernelSignature> kept;
  for (const KernelSignature& sig : s)
    if (kernel_flops(sig) <= scale * 4.5e9 && kernel_bytes(sig) <= scale * 3e8) kept.push_back(sig);
  return kept;
}

std::vector<KernelSignature> graph_signatures(const OpGraph& graph) {
  std::vector<KernelSignature> out;
  std::unordered_set<KernelSignature, KernelSignatureHash> seen;
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    const KernelSignature& sig = graph.op(op).kernel;
    if (sig.cls != KernelClass::kNoop && seen.insert(sig).second) out.push_back(sig);
  }
  return out;
}

void CpuCalibrationOptions::validate() const {
  std::set<int> used;
  for (std::size_t d = 0; d < device_cores.size(); ++d) {
    const std::string f = "CpuCalibrationOptions.device_cores[" + std::to_string(d) + "]";
    if (device_cores[d].empty()) throw InputError(f + ": must list at least one core");
    for (int c : device_cores[d]) {
      if (c < 0) throw InputError(f + " = " + std::to_string(c) + ": must be >= 0");
      if (!used.insert(c).second) throw InputError(f + ": core " + std::to_string(c) + " is in two devices; devices must be disjoint");
    }
  }
  if (cores_per_device < 1)
    throw InputError("CpuCalibrationOptions.cores_per_device = " + std::to_string(cores_per_device) + ": must be >= 1");
  if (max_devices < 0) throw InputError("CpuCalibrationOptions.max_devices = " + std::to_string(max_devices) + ": must be >= 0");
  if (!(sweep_scale > 0 && sweep_scale <= 1))
    throw InputError("CpuCalibrationOptions.sweep_scale = " + std::to_string(sweep_scale) + ": must be in (0, 1]");
  for (int64_t b : copy_bytes)
    if (b <= 0) throw InputError("CpuCalibrationOptions.copy_bytes: " + std::to_string(b) + ": must be > 0");
  if (max_kernel_bytes <= 0) throw InputError("CpuCalibrationOptions.max_kernel_bytes: must be > 0");
  if (machine_name.empty()) throw InputError("CpuCalibrationOptions.machine_name: must not be empty");
  timing.validate();
  fit.validate();
}

namespace {


// The kernels to time: the sweep, the caller's signatures and the two probes, each once; every
// one's buffers within max_kernel_bytes.
std::vector<KernelSignature> calibration_signatures(const CpuCalibrationOptions& options) {
  std::vector<KernelSignature> sigs;
  std::unordered_set<KernelSignature, KernelSignatureHash> seen;
  auto add = [&](const KernelSignature& sig) {
    if (sig.cls != KernelClass::kNoop && seen.insert(sig).second) sigs.push_back(sig);
  };
  if (options.sweep)
    for (const KernelSignature& s : default_cpu_sweep(options.sweep_scale)) add(s);
  for (const KernelSignature& s : options.signatures) add(s);
  add(kPeakProbe);
  add(kBandwidthProbe);
  for (const KernelSignature& s : sigs)
    if (cpu::CpuKernel::required_bytes(s) > options.max_kernel_bytes)
      throw InputError(to_string(s) + " needs " + std::to_string(cpu::CpuKernel::required_bytes(s)) +
                       " bytes of buffers, above CpuCalibrationOptions.max_kernel_bytes = " +
                       std::to_string(options.max_kernel_bytes));
  return sigs;
}

// The best compute and memory rates each device's kernels reached: its peaks in the machine.
struct DevicePeaks {
  std::vector<double> flops, bandwidth;
};

// Kernels, one device at a time (the other cores idle, so that a device's numbers are its own).
DevicePeaks time_kernels(const CpuCalibrationOptions& options, const std::vector<std::vector<int>>& cores,
                         const std::vector<KernelSignature>& sigs, int64_t llc_flush, CalibrationResult& result,
                         const CalibrationProgressCallback& progress) {
  const std::size_t nd = cores.size();
  DevicePeaks peaks{std::vector<double>(nd, 0), std::vector<double>(nd, 0)};
  const int total = static_cast<int>(nd * sigs.size());
  int done = 0;
  for (std::size_t d = 0; d < nd; ++d) {
    DeviceCalibration dc;
    dc.device = "cpu:" + std::to_string(d);
    dc.cores = cores[d];
    for (const KernelSignature& sig : sigs) {
      KernelTiming t;
      cpu::run_pinned(cores[d], [&] {
        if (!cpu::pin_current_thread(cores[d])) result.pinned = false;
        cpu::CpuKernel kernel(sig, options.max_kernel_bytes);
        KernelTimingOptions timing = options.timing;
        if (timing.cold_cache && timing.cold_memory_bound && is_memory_bound(sig.cls)) {
          timing.flush_bytes = llc_flush;
          timing.max_repeats = std::min(timing.max_repeats, timing.cold_max_repeats);
          timing.min_repeats = std::min(timing.min_repeats, timing.max_repeats);
        }
        t = time_kernel(kernel, timing);
      });
      // A timer tick of 0 (a kernel faster than the clock) would break the relative fit.
      const double time_s = std::max(t.median_s, 1e-9);
      dc.kernel_times_s[sig] = time_s;
      if (sig.cls == KernelClass::kGemm || sig.cls == KernelClass::kConv2D)
        peaks.flops[d] = std::max(peaks.flops[d], kernel_flops(sig) / time_s);
      if (sig.cls == KernelClass::kElementwise || sig.cls == KernelClass::kCopy)
        peaks.bandwidth[d] = std::max(peaks.bandwidth[d], kernel_bytes(sig) / time_s);
      detail::report_progress(progress, "kernels", dc.device + " " + to_string(sig), ++done, total);
    }
    result.calibration.devices.push_back(std::move(dc));
  }
  return peaks;
}

// Copies between every ordered device pair: the source device's thread writes the source buffer
// (first touch), the destination device's thread allocates the destination and performs the
// memcpy, as the executor does. With cold_memory_bound, the last-level cache is flushed before
// each timed copy, as for the memory-bound kernels: in the executor the copy's source was last
// touched a step ago and both buffers come from DRAM (with only the L2 flushed, copies inside
// steps of random RNNLM placements took 1.9x the calibrated time, docs/reproductions.md).
void time_copies(const CpuCalibrationOptions& options, const std::vector<std::vector<int>>& cores, int64_t llc_flush,
                 Calibration& cal, const CalibrationProgressCallback& progress) {
  const std::size_t nd = cores.size();
  const bool cold_copies = options.timing.cold_cache && options.timing.cold_memory_bound;
  const int64_t copy_flush = cold_copies ? llc_flush : cache_flush_bytes();
  const int copy_max_repeats =
      cold_copies ? std::min(options.timing.max_repeats, options.timing.cold_max_repeats) : options.timing.max_repeats;
  const int copy_min_repeats = std::min(options.timing.min_repeats, copy_max_repeats);
  std::vector<int64_t> sizes = options.copy_bytes;
  if (sizes.empty())
    for (int64_t b = 1024; b <= (int64_t{64} << 20); b *= 4) sizes.push_back(b);
  const int copy_total = static_cast<int>(nd * (nd - 1) * sizes.size());
  int done = 0;
  for (std::size_t s = 0; s < nd; ++s)
    for (std::size_t d = 0; d < nd; ++d) {
      if (s == d) continue;
      CopyCalibration cc;
      cc.src = "cpu:" + std::to_string(s);
      cc.dst = "cpu:" + std::to_string(d);
      for (int64_t bytes : sizes) {
        std::vector<char> src, dst;
        cpu::run_pinned(cores[s], [&] { src.assign(static_cast<std::size_t>(bytes), 1); });
        KernelTiming t;
        cpu::run_pinned(cores[d], [&] {
          dst.assign(static_cast<std::size_t>(bytes), 0);
          std::vector<double> times;
          const auto warm = Clock::now();
          do std::memcpy(dst.data(), src.data(), src.size());
          while (seconds_since(warm) < options.timing.warmup_s);
          double sum = 0;
          while (static_cast<int>(times.size()) < copy_max_repeats &&
                 (static_cast<int>(times.size()) < copy_min_repeats || sum < options.timing.target_s)) {
            if (options.timing.cold_cache) flush_caches(copy_flush);
            const double t0 = clock_s(options.timing.clock);
            std::memcpy(dst.data(), src.data(), src.size());
            times.push_back(clock_s(options.timing.clock) - t0);
            sum += times.back();
          }
          t.median_s = median(times);
        });
        cc.samples.push_back({0, static_cast<double>(bytes), std::max(t.median_s, 1e-9)});
        detail::report_progress(progress, "copies", cc.src + " -> " + cc.dst + " " + std::to_string(bytes) + " B", ++done, copy_total);
      }
      cc.fit = fit_copy(cc.samples);
      cal.copies.push_back(std::move(cc));
    }
}

// The machine the measurements describe, with no launch overhead yet (the executor measures it).
Machine calibrated_cpu_machine(const CpuCalibrationOptions& options, const Calibration& cal,
                               const std::vector<std::vector<int>>& cores, const DevicePeaks& peaks) {
  const std::size_t nd = cores.size();
  Machine m;
  m.name = options.machine_name;
  m.description = "this CPU (" + cpu_model_name() + ") as " + std::to_string(nd) +
                  " device(s) of disjoint cores, measured by placelab's cpu calibration on " + cal.host + " at " + cal.created;
  const int64_t memory = physical_memory_bytes() / static_cast<int64_t>(nd);
  for (std::size_t d = 0; d < nd; ++d) {
    m.devices.push_back(Device{.name = "cpu:" + std::to_string(d),
                               .kind = DeviceKind::kCpu,
                               .model = cpu_model_name() + " (cores " + cores_text(cores[d]) + ")",
                               .peak_flops_per_s = peaks.flops[d],
                               .memory_bandwidth_Bps = peaks.bandwidth[d],
                               .memory_bytes = memory,
                               .streams = static_cast<int>(cores[d].size()),
                               // the executor runs each op on one core of its own
                               .full_speed_ops = static_cast<int>(cores[d].size()),
                               .launch_overhead_s = 0,
                               // the executor's destination worker does the memcpy
                               .copy_engine = false});
  }
  std::vector<std::vector<const CopyCalibration*>> pair(nd, std::vector<const CopyCalibration*>(nd, nullptr));
  for (const CopyCalibration& cc : cal.copies) pair[*m.find_device(cc.src)][*m.find_device(cc.dst)] = &cc;
  for (std::size_t a = 0; a < nd; ++a)
    for (std::size_t b = a + 1; b < nd; ++b)
      m.links.push_back(Link{.a = m.devices[a].name,
                             .b = m.devices[b].name,
                             .kind = LinkKind::kMemory,
                             .bandwidth_Bps = pair[a][b]->fit.bandwidth_Bps,
                             .latency_s = pair[a][b]->fit.latency_s,
                             .reverse_bandwidth_Bps = pair[b][a]->fit.bandwidth_Bps,
                             .reverse_latency_s = pair[b][a]->fit.latency_s});
  m.finalize();
  return m;
}

// Per-op dispatch cost of the executor: a chain of noops on device 0. And the cross-device
// hand-off (waking the other device's worker): the same chain alternating between devices 0
// and 1 over empty tensors, whose extra time per hop the copy latencies absorb.
void measure_executor_overheads(Machine& m, Calibration& cal, const std::vector<std::vector<int>>& cores,
                                const CalibrationProgressCallback& progress) {
  const std::size_t nd = cores.size();
  constexpr int kChain = 400;
  OpGraph chain;
  for (int i = 0; i < kChain; ++i) {
    chain.add_op({.name = "noop" + std::to_string(i), .type = "NoOp"});
    if (i > 0) chain.add_edge(static_cast<OpId>(i - 1), static_cast<OpId>(i), {.bytes = 0});
  }
  CpuExecutor exec(chain, m, {.steps = 6, .device_cores = cores});
  detail::report_progress(progress, "overhead", "executor dispatch on cpu:0", 0, nd > 1 ? 2 : 1);
  const double local = exec.run(Placement(kChain, 0)).step_time_s;
  const double overhead = local / kChain;
  for (Device& dev : m.devices) dev.launch_overhead_s = overhead;
  if (nd > 1) {
    detail::report_progress(progress, "overhead", "cross-device hand-off cpu:0 <-> cpu:1", 1, 2);
    Placement alternate(kChain);
    for (int i = 0; i < kChain; ++i) alternate[static_cast<std::size_t>(i)] = static_cast<DeviceId>(i % 2);
    const double remote = exec.run(alternate).step_time_s;
    const double handoff = std::max(0.0, (remote - local) / (kChain - 1));
    for (CopyCalibration& cc : cal.copies) cc.fit.latency_s += handoff;
    for (Link& l : m.links) {
      l.latency_s += handoff;
      *l.reverse_latency_s += handoff;
    }
  }
  m.finalize();
  detail::report_progress(progress, "overhead", "done", nd > 1 ? 2 : 1, nd > 1 ? 2 : 1);
}

}  // namespace

CalibrationResult calibrate_cpu(const CpuCalibrationOptions& options, const CalibrationProgressCallback& progress) {
  options.validate();
  const auto start = Clock::now();
  std::vector<std::vector<int>> cores = options.device_cores;
  if (cores.empty()) {
    std::vector<int> avail = cpu::available_cores();
    cores = cpu::split_cores(avail, options.cores_per_device, options.max_devices);
  }
  const std::vector<KernelSignature> sigs = calibration_signatures(options);

  CalibrationResult result;
  Calibration& cal = result.calibration;
  detail::stamp(cal, "cpu");
  const int64_t llc_flush = last_level_cache_flush_bytes();
  const DevicePeaks peaks = time_kernels(options, cores, sigs, llc_flush, result, progress);
  cal.refit(options.fit);
  time_copies(options, cores, llc_flush, cal, progress);
  result.machine = calibrated_cpu_machine(options, cal, cores, peaks);
  measure_executor_overheads(result.machine, cal, cores, progress);
  result.elapsed_s = seconds_since(start);
  return result;
}

InSituSampler::InSituSampler(const OpGraph& graph, const Machine& machine, const CpuExecutor& executor,
                             const InSituOptions& options)
    : graph_(graph), machine_(machine), executor_(executor), options_(options) {
  check_measured_steps(options.steps, "InSituOptions.steps");
  samples_.resize(machine.num_devices());
  step_sum_s_.assign(machine.num_devices(), 0);
}

void InSituSampler::record(std::size_t d, const ExecutionResult& r) {
  if (r.oom) throw InputError("in-situ calibration: " + r.oom_message);
  for (OpId op = 0; op < graph_.num_ops(); ++op) {
    const KernelSignature& sig = graph_.op(op).kernel;
    if (sig.cls != KernelClass::kNoop) samples_[d][sig].push_back(r.op_time_s[op]);
  }
  step_sum_s_[d] += r.step_time_s;
}

void InSituSampler::run_round() {
  ++rounds_;
  const std::size_t nd = machine_.num_devices();
  const auto all_on = [&](std::size_t d) { return Placement(graph_.num_ops(), static_cast<DeviceId>(d)); };
  if (!options_.co_run || nd == 1) {
    for (std::size_t d = 0; d < nd; ++d) record(d, executor_.run(all_on(d)));
    return;
  }
  // Every device runs its own copy of the graph at the same time, so each kernel is timed under
  // the contention (shared caches, memory bandwidth, sibling hyperthreads) of a step that keeps
  // all devices busy.
  std::vector<ExecutionResult> results(nd);
  std::vector<std::exception_ptr> errors(nd);
  std::vector<std::thread> threads;
  for (std::size_t d = 0; d < nd; ++d)
    threads.emplace_back([&, d] {
      try {
        results[d] = executor_.run(all_on(d));
      } catch (...) {
        errors[d] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  for (std::size_t d = 0; d < nd; ++d) record(d, results[d]);
}

int InSituSampler::apply(Calibration& calibration) const {
  int replaced = 0;
  for (std::size_t d = 0; d < machine_.num_devices(); ++d) {
    const std::string& name = machine_.devices[d].name;
    DeviceCalibration* dc = calibration.find_device(name);
    if (dc == nullptr) throw InputError("in-situ calibration: the calibration has no device " + name);
    for (const auto& [sig, times] : samples_[d]) {
      dc->kernel_times_s[sig] = median(times);
      ++replaced;
    }
  }
  calibration.refit(options_.fit);
  return replaced;
}

std::vector<double> InSituSampler::step_time_s() const {
  std::vector<double> out(step_sum_s_);
  for (double& s : out) s /= std::max(rounds_, 1);
  return out;
}

InSituReport calibrate_in_situ(const OpGraph& graph, CalibrationResult& result, const InSituOptions& options) {
  check_measured_steps(options.steps, "InSituOptions.steps");
  if (options.rounds < 1) throw InputError("InSituOptions.rounds = " + std::to_string(options.rounds) + ": must be >= 1");
  CpuExecutorOptions eo{.steps = options.steps};
  for (const DeviceCalibration& dc : result.calibration.devices) eo.device_cores.push_back(dc.cores);
  CpuExecutor exec(graph, result.machine, eo);
  // Rounds alternate the devices, so a slow spell of a shared machine (seconds long on a VM) lands
  // in one round of each device rather than in all rounds of one; the median then drops it.
  InSituSampler sampler(graph, result.machine, exec, options);
  for (int round = 0; round < options.rounds; ++round) sampler.run_round();
  InSituReport report;
  report.signatures = sampler.apply(result.calibration);
  report.step_time_s = sampler.step_time_s();
  return report;
}

}  // namespace placelab
