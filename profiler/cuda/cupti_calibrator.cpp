#include "placelab/profiler/cupti_calibrator.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>

#include <unistd.h>

#include "cupti_activity.h"
#include "gpu_kernel.h"
#include "placelab/core/error.h"
#include "placelab/profiler/cpu_kernels.h"
#include "placelab/profiler/gpu_check.h"
#include "../src/measure_util.h"

namespace placelab {
namespace {

using detail::median;
using detail::host_name;
using detail::utc_now_iso;

// RAII stream on the current device.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { PLACELAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s) cudaStreamDestroy(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

struct PinnedBuffer {
  void* ptr = nullptr;
  explicit PinnedBuffer(int64_t bytes) { PLACELAB_CUDA_CHECK(cudaMallocHost(&ptr, static_cast<size_t>(bytes))); }
  ~PinnedBuffer() {
    if (ptr) cudaFreeHost(ptr);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
};

// Runs `enqueue` warmup + repeats times on `stream`, each timed repetition under its own external
// correlation id, and returns the median of the CUPTI durations of the timed repetitions.
class Timer {
 public:
  Timer(gpu::ActivityCollector& cupti, int warmup, int repeats) : cupti_(cupti), warmup_(warmup), repeats_(repeats) {}

  template <typename Enqueue>
  double median_s(cudaStream_t stream, Enqueue&& enqueue) {
    for (int i = 0; i < warmup_; ++i) enqueue();
    PLACELAB_CUDA_CHECK(cudaStreamSynchronize(stream));
    cupti_.take();  // drop the warm-up records
    const uint64_t first = next_id_;
    for (int i = 0; i < repeats_; ++i) {
      cupti_.push(next_id_++);
      enqueue();
      cupti_.pop();
    }
    PLACELAB_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<ActivityRecord> records = cupti_.take();
    return std::max(median(repetition_times_s(records, first, repeats_)), 1e-9);
  }

  // Mean gap between the end of one kernel and the start of the next when `count` tiny kernels
  // are enqueued back to back: the per-op dispatch cost a device adds on top of kernel time.
  template <typename Enqueue>
  double launch_gap_s(cudaStream_t stream, int count, Enqueue&& enqueue) {
    for (int i = 0; i < warmup_; ++i) enqueue();
    PLACELAB_CUDA_CHECK(cudaStreamSynchronize(stream));
    cupti_.take();
    for (int i = 0; i < count; ++i) enqueue();
    PLACELAB_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<ActivityRecord> records = cupti_.take();
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const ActivityRecord& r : records)
      if (r.kind == ActivityRecord::Kind::kKernel) spans.emplace_back(r.start_ns, r.end_ns);
    if (spans.size() < 2) return 0;
    std::sort(spans.begin(), spans.end());
    double gaps = 0;
    for (std::size_t i = 1; i < spans.size(); ++i)
      gaps += spans[i].first > spans[i - 1].second ? static_cast<double>(spans[i].first - spans[i - 1].second) : 0.0;
    return gaps * 1e-9 / static_cast<double>(spans.size() - 1);
  }

 private:
  gpu::ActivityCollector& cupti_;
  int warmup_, repeats_;
  uint64_t next_id_ = 1;
};

std::string gpu_name(int index) { return "gpu:" + std::to_string(index); }

}  // namespace

namespace {


// The CUDA devices to calibrate: the options' list, else every visible one.
std::vector<int> calibration_devices(const GpuCalibrationOptions& options) {
  std::string why;
  const int visible = gpu::visible_device_count(&why);
  if (visible == 0) throw InputError(why);
  std::vector<int> devices = options.devices;
  if (devices.empty())
    for (int d = 0; d < visible; ++d) devices.push_back(d);
  for (int d : devices)
    if (d >= visible)
      throw InputError("GpuCalibrationOptions.devices: device " + std::to_string(d) + " is not visible (" +
                       std::to_string(visible) + " CUDA devices)");
  return devices;
}

// Per GPU: the best compute and memory rates its kernels reached, and the gap between two tiny
// kernels launched back to back (its launch overhead).
struct GpuPeaks {
  std::vector<double> flops, bandwidth, launch_gap;
};

GpuPeaks time_gpu_kernels(const GpuCalibrationOptions& options, const std::vector<int>& devices,
                          const std::vector<KernelSignature>& sigs, Timer& timer, Calibration& cal,
                          const CalibrationProgressCallback& progress) {
  const std::size_t nd = devices.size();
  GpuPeaks peaks{std::vector<double>(nd, 0), std::vector<double>(nd, 0), std::vector<double>(nd, 0)};
  const int total = static_cast<int>(nd * sigs.size());
  int done = 0;
  for (std::size_t i = 0; i < nd; ++i) {
    gpu::DeviceContext ctx(devices[i]);
    Stream stream;
    DeviceCalibration dc;
    dc.device = gpu_name(static_cast<int>(i));
    for (const KernelSignature& sig : sigs) {
      gpu::GpuKernel kernel(sig, ctx, options.max_kernel_bytes, stream.s);
      const double t = timer.median_s(stream.s, [&] { kernel.launch(stream.s); });
      dc.kernel_times_s[sig] = t;
      if (sig.cls == KernelClass::kGemm || sig.cls == KernelClass::kConv2D)
        peaks.flops[i] = std::max(peaks.flops[i], kernel_flops(sig) / t);
      if (sig.cls == KernelClass::kElementwise || sig.cls == KernelClass::kCopy)
        peaks.bandwidth[i] = std::max(peaks.bandwidth[i], kernel_bytes(sig) / t);
      detail::report_progress(progress, "kernels", dc.device + " " + to_string(sig), ++done, total);
    }
    gpu::GpuKernel tiny(KernelSignature::elementwise(1, 1), ctx, options.max_kernel_bytes, stream.s);
    peaks.launch_gap[i] = timer.launch_gap_s(stream.s, 100, [&] { tiny.launch(stream.s); });
    cal.devices.push_back(std::move(dc));
  }
  return peaks;
}

// Copies: host ↔ each GPU through pinned memory, and every ordered GPU pair (peer copies when
// peer access is possible, else the runtime stages through the host). Returns which ordered
// pairs have peer access.
std::vector<std::vector<bool>> time_copies(const GpuCalibrationOptions& options, const std::vector<int>& devices,
                                           Timer& timer, Calibration& cal, const CalibrationProgressCallback& progress) {
  const std::size_t nd = devices.size();
  const std::vector<int64_t> sizes = options.copy_bytes.empty() ? default_gpu_copy_sizes() : options.copy_bytes;
  const int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<std::vector<bool>> peer(nd, std::vector<bool>(nd, false));
  const int copy_total = static_cast<int>((2 * nd + nd * (nd - 1)) * sizes.size());
  int done = 0;
  {
    PinnedBuffer host(largest);
    for (std::size_t i = 0; i < nd; ++i) {
      PLACELAB_CUDA_CHECK(cudaSetDevice(devices[i]));
      Stream stream;
      gpu::DeviceBuffer dev(largest);
      CopyCalibration h2d{.src = "cpu:0", .dst = gpu_name(static_cast<int>(i))};
      CopyCalibration d2h{.src = gpu_name(static_cast<int>(i)), .dst = "cpu:0"};
      for (int64_t bytes : sizes) {
        const size_t n = static_cast<size_t>(bytes);
        h2d.samples.push_back({0, static_cast<double>(bytes), timer.median_s(stream.s, [&] {
                                 PLACELAB_CUDA_CHECK(cudaMemcpyAsync(dev.ptr, host.ptr, n, cudaMemcpyHostToDevice, stream.s));
                               })});
        detail::report_progress(progress, "copies", h2d.src + " -> " + h2d.dst + " " + std::to_string(bytes) + " B", ++done, copy_total);
        d2h.samples.push_back({0, static_cast<double>(bytes), timer.median_s(stream.s, [&] {
                                 PLACELAB_CUDA_CHECK(cudaMemcpyAsync(host.ptr, dev.ptr, n, cudaMemcpyDeviceToHost, stream.s));
                               })});
        detail::report_progress(progress, "copies", d2h.src + " -> " + d2h.dst + " " + std::to_string(bytes) + " B", ++done, copy_total);
      }
      h2d.fit = fit_copy(h2d.samples);
      d2h.fit = fit_copy(d2h.samples);
      cal.copies.push_back(std::move(h2d));
      cal.copies.push_back(std::move(d2h));
    }
  }
  for (std::size_t a = 0; a < nd; ++a)
    for (std::size_t b = 0; b < nd; ++b) {
      if (a == b) continue;
      int can = 0;
      PLACELAB_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, devices[a], devices[b]));
      if (can) {
        PLACELAB_CUDA_CHECK(cudaSetDevice(devices[a]));
        const cudaError_t e = cudaDeviceEnablePeerAccess(devices[b], 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();  // enabled earlier: fine
        else PLACELAB_CUDA_CHECK(e);
        peer[a][b] = true;
      }
      PLACELAB_CUDA_CHECK(cudaSetDevice(devices[b]));
      gpu::DeviceBuffer dst(largest);
      PLACELAB_CUDA_CHECK(cudaSetDevice(devices[a]));
      gpu::DeviceBuffer src(largest);
      Stream stream;
      CopyCalibration cc{.src = gpu_name(static_cast<int>(a)), .dst = gpu_name(static_cast<int>(b))};
      for (int64_t bytes : sizes) {
        cc.samples.push_back({0, static_cast<double>(bytes), timer.median_s(stream.s, [&] {
                                PLACELAB_CUDA_CHECK(cudaMemcpyPeerAsync(dst.ptr, devices[b], src.ptr, devices[a],
                                                                        static_cast<size_t>(bytes), stream.s));
                              })});
        detail::report_progress(progress, "copies", cc.src + " -> " + cc.dst + " " + std::to_string(bytes) + " B", ++done, copy_total);
      }
      cc.fit = fit_copy(cc.samples);
      cal.copies.push_back(std::move(cc));
    }
  return peer;
}

// The host device, probed with the CPU backend's kernels (two quick measurements).
Device host_cpu_device() {
  cpu::CpuKernel gemm(KernelSignature::gemm(256, 256, 256));
  cpu::CpuKernel stream(KernelSignature::elementwise(int64_t{1} << 22, 2));
  const double tg = std::max(time_kernel(gemm).median_s, 1e-9), ts = std::max(time_kernel(stream).median_s, 1e-9);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return Device{.name = "cpu:0",
                .kind = DeviceKind::kCpu,
                .model = "host CPU",
                .peak_flops_per_s = kernel_flops(gemm.signature()) / tg * static_cast<double>(std::max(cores, 1L)),
                .memory_bandwidth_Bps = kernel_bytes(stream.signature()) / ts,
                .memory_bytes = pages > 0 && page > 0 ? int64_t{pages} * page : int64_t{8} << 30,
                .streams = static_cast<int>(std::max(cores, 1L)),
                .launch_overhead_s = 0};
}

// The machine the measurements describe: the host CPU and the GPUs, joined at the host's PCIe
// root complex, with a direct link between GPUs that have peer access both ways.
Machine cupti_machine(const GpuCalibrationOptions& options, const Calibration& cal, const std::vector<int>& devices,
                      const GpuPeaks& peaks, const std::vector<std::vector<bool>>& peer) {
  const std::size_t nd = devices.size();
  Machine m;
  m.name = options.machine_name;
  m.description = std::to_string(nd) + " GPU(s) measured by placelab's cupti calibration on " + cal.host + " at " +
                  cal.created;
  m.devices.push_back(host_cpu_device());
  for (std::size_t i = 0; i < nd; ++i) {
    cudaDeviceProp prop{};
    PLACELAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, devices[i]));
    m.devices.push_back(Device{.name = gpu_name(static_cast<int>(i)),
                               .kind = DeviceKind::kGpu,
                               .model = prop.name,
                               .peak_flops_per_s = peaks.flops[i],
                               .memory_bandwidth_Bps = peaks.bandwidth[i],
                               .memory_bytes = static_cast<int64_t>(prop.totalGlobalMem),
                               .streams = 1,
                               .launch_overhead_s = peaks.launch_gap[i]});
  }
  // Host and GPUs meet at the host's PCIe root complex (a switch: devices never relay traffic,
  // so GPUs without peer access reach each other through it). The host side of it is host memory
  // (the CPU probe's bandwidth); each GPU's PCIe link carries its measured H2D / D2H fits.
  m.switches.push_back("pcie_root");
  m.links.push_back(Link{.a = "cpu:0",
                         .b = "pcie_root",
                         .kind = LinkKind::kMemory,
                         .bandwidth_Bps = m.devices[0].memory_bandwidth_Bps,
                         .latency_s = 0});
  for (std::size_t i = 0; i < nd; ++i) {
    const CopyCalibration* up = cal.find_copy("cpu:0", gpu_name(static_cast<int>(i)));
    const CopyCalibration* down = cal.find_copy(gpu_name(static_cast<int>(i)), "cpu:0");
    m.links.push_back(Link{.a = "pcie_root",
                           .b = gpu_name(static_cast<int>(i)),
                           .kind = LinkKind::kPcie,
                           .bandwidth_Bps = up->fit.bandwidth_Bps,
                           .latency_s = up->fit.latency_s,
                           .reverse_bandwidth_Bps = down->fit.bandwidth_Bps,
                           .reverse_latency_s = down->fit.latency_s});
  }
  // A direct GPU link only where both directions have peer access; other pairs route via the host.
  constexpr double kPcieCeilingBps = 32e9;
  for (std::size_t a = 0; a < nd; ++a)
    for (std::size_t b = a + 1; b < nd; ++b) {
      if (!peer[a][b] || !peer[b][a]) continue;
      const CopyCalibration* ab = cal.find_copy(gpu_name(static_cast<int>(a)), gpu_name(static_cast<int>(b)));
      const CopyCalibration* ba = cal.find_copy(gpu_name(static_cast<int>(b)), gpu_name(static_cast<int>(a)));
      m.links.push_back(Link{.a = gpu_name(static_cast<int>(a)),
                             .b = gpu_name(static_cast<int>(b)),
                             .kind = std::max(ab->fit.bandwidth_Bps, ba->fit.bandwidth_Bps) > kPcieCeilingBps
                                         ? LinkKind::kNvlink
                                         : LinkKind::kPcie,
                             .bandwidth_Bps = ab->fit.bandwidth_Bps,
                             .latency_s = ab->fit.latency_s,
                             .reverse_bandwidth_Bps = ba->fit.bandwidth_Bps,
                             .reverse_latency_s = ba->fit.latency_s});
    }
  m.finalize();
  return m;
}

}  // namespace

CalibrationResult calibrate_cupti(const GpuCalibrationOptions& options, const CalibrationProgressCallback& progress) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<KernelSignature> sigs = gpu_calibration_signatures(options);  // validates
  // Always measured, so that the machine's peak_flops and memory_bandwidth_Bps come from a
  // compute-bound and a bandwidth-bound kernel even when only a graph's signatures are asked for.
  for (const KernelSignature& probe : {KernelSignature::gemm(2048, 2048, 2048), KernelSignature::elementwise(int64_t{1} << 24, 2)})
    if (std::find(sigs.begin(), sigs.end(), probe) == sigs.end()) sigs.push_back(probe);
  const std::vector<int> devices = calibration_devices(options);

  CalibrationResult result;
  Calibration& cal = result.calibration;
  detail::stamp(cal, "cupti");
  gpu::ActivityCollector cupti;  // after the device check: CUPTI fails without a driver
  Timer timer(cupti, options.warmup, options.repeats);
  const GpuPeaks peaks = time_gpu_kernels(options, devices, sigs, timer, cal, progress);
  cal.refit(options.fit);
  const std::vector<std::vector<bool>> peer = time_copies(options, devices, timer, cal, progress);
  if (cupti.dropped() > 0)
    throw Error("CUPTI dropped " + std::to_string(cupti.dropped()) + " activity records; the timings are incomplete");
  result.machine = cupti_machine(options, cal, devices, peaks, peer);
  result.pinned = false;  // no CPU threads were pinned: the GPU timings do not depend on it
  result.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace placelab
