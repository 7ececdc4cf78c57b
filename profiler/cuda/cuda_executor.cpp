#include "placelab/profiler/cuda_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>

#include "gpu_kernel.h"
#include "placelab/core/error.h"
#include "placelab/graph/transfers.h"
#include "placelab/profiler/cpu_kernels.h"
#include "placelab/profiler/executor_buffers.h"
#include "placelab/profiler/gpu_check.h"

namespace placelab {
namespace {

using Clock = std::chrono::steady_clock;

struct Event {
  cudaEvent_t e = nullptr;
  explicit Event(bool timing) {
    PLACELAB_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() {
    if (e) cudaEventDestroy(e);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

struct Stream {
  int device = 0;
  cudaStream_t s = nullptr;
  explicit Stream(int dev) : device(dev) {
    PLACELAB_CUDA_CHECK(cudaSetDevice(dev));
    PLACELAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  ~Stream() {
    if (s) {
      cudaSetDevice(device);
      cudaStreamDestroy(s);
    }
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

struct PinnedBuffer {
  void* ptr = nullptr;
  explicit PinnedBuffer(int64_t bytes) {
    PLACELAB_CUDA_CHECK(cudaMallocHost(&ptr, static_cast<size_t>(std::max<int64_t>(bytes, 1))));
  }
  ~PinnedBuffer() {
    if (ptr) cudaFreeHost(ptr);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
};

// A CPU op run as a host function in stream order: its kernel, and the host-clock times of its
// last run relative to the host start of the step.
struct HostOp {
  cpu::CpuKernel* kernel = nullptr;
  const Clock::time_point* step_start = nullptr;
  double start_s = 0, end_s = 0, busy_s = 0;  // busy_s accumulates over the timed steps
  bool timed = false;
  std::atomic<bool>* failed = nullptr;
};

void CUDART_CB run_host_op(void* data) {
  auto* h = static_cast<HostOp*>(data);
  const auto t0 = Clock::now();
  // A host function must not throw into the CUDA runtime: record the failure instead.
  try {
    h->kernel->run();
  } catch (...) {
    *h->failed = true;
  }
  const auto t1 = Clock::now();
  h->start_s = std::chrono::duration<double>(t0 - *h->step_start).count();
  h->end_s = std::chrono::duration<double>(t1 - *h->step_start).count();
  if (h->timed) h->busy_s += std::chrono::duration<double>(t1 - t0).count();
}

void CUDART_CB mark_step_start(void* data) { *static_cast<Clock::time_point*>(data) = Clock::now(); }

// One copy of a step: one per (producer, destination device), sized by the producer's largest
// data edge.
struct Copy {
  OpId producer;
  DeviceId src, dst;
  int64_t bytes;
};

// A copy's buffers: the source end on the producer's device (pinned host memory for a CPU), the
// destination end on the consumer's device; and its timing events.
struct CopyBuffers {
  std::unique_ptr<gpu::DeviceBuffer> src_dev, dst_dev;
  std::unique_ptr<PinnedBuffer> src_host, dst_host;
  std::unique_ptr<Event> begin, end;
};

// The step's copies, and per op what it waits for: producers on its device (op ids), or copy ids
// + n. What crosses devices follows the project's one rule (graph/transfers.h), as the simulator.
std::vector<Copy> plan_copies(const OpGraph& g, std::span<const DeviceId> placement,
                              std::vector<std::vector<uint32_t>>& inputs_of) {
  const std::size_t n = g.num_ops();
  std::vector<Copy> copies;
  inputs_of.assign(n, {});
  for_each_transfer(
      g, placement, [&](OpId src, OpId dst) { inputs_of[dst].push_back(src); },
      [&](OpId src, DeviceId to, int64_t bytes) {
        copies.push_back({src, placement[src], to, bytes});
        return static_cast<uint32_t>(copies.size() - 1);
      },
      [&](uint32_t copy, OpId dst) { inputs_of[dst].push_back(static_cast<uint32_t>(n) + copy); });
  return copies;
}

// Peer access between every pair of GPUs that exchange tensors, where the hardware allows it;
// otherwise cudaMemcpyPeerAsync stages through the host itself.
void enable_peer_access(const std::vector<Copy>& copies, const std::vector<int>& cuda_of_device) {
  for (const Copy& c : copies)
    if (cuda_of_device[c.src] >= 0 && cuda_of_device[c.dst] >= 0 && cuda_of_device[c.src] != cuda_of_device[c.dst]) {
      int can = 0;
      PLACELAB_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, cuda_of_device[c.src], cuda_of_device[c.dst]));
      if (!can) continue;
      PLACELAB_CUDA_CHECK(cudaSetDevice(cuda_of_device[c.src]));
      const cudaError_t e = cudaDeviceEnablePeerAccess(cuda_of_device[c.dst], 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else PLACELAB_CUDA_CHECK(e);
    }
}

// One copy's bytes, enqueued on `cs` (a stream of device memory's own device) by the API its two
// ends call for.
void enqueue_copy(const Copy& c, const CopyBuffers& b, cudaStream_t cs, const std::vector<int>& cuda_of_device) {
  const size_t nbytes = static_cast<size_t>(c.bytes);
  if (nbytes == 0) return;
  if (b.src_dev && b.dst_dev)
    PLACELAB_CUDA_CHECK(cudaMemcpyPeerAsync(b.dst_dev->ptr, cuda_of_device[c.dst], b.src_dev->ptr, cuda_of_device[c.src],
                                            nbytes, cs));
  else if (b.src_dev)
    PLACELAB_CUDA_CHECK(cudaMemcpyAsync(b.dst_host->ptr, b.src_dev->ptr, nbytes, cudaMemcpyDeviceToHost, cs));
  else if (b.dst_dev)
    PLACELAB_CUDA_CHECK(cudaMemcpyAsync(b.dst_dev->ptr, b.src_host->ptr, nbytes, cudaMemcpyHostToDevice, cs));
  else
    PLACELAB_CUDA_CHECK(cudaMemcpyAsync(b.dst_host->ptr, b.src_host->ptr, nbytes, cudaMemcpyHostToHost, cs));
}

using Streams = std::vector<std::unique_ptr<Stream>>;

// A copy runs on the copy stream of its GPU end — the sender's when the sender is a GPU (so it
// overlaps the sender's next kernels), else the receiver's — so that device memory is always
// copied by a stream of its own device.
const Stream& copy_stream(const Copy& c, const std::vector<int>& cuda_of_device, const Streams& send) {
  return cuda_of_device[c.src] >= 0 || cuda_of_device[c.dst] < 0 ? *send[c.src] : *send[c.dst];
}

std::vector<CopyBuffers> make_copy_buffers(const std::vector<Copy>& copies, const std::vector<int>& cuda_of_device,
                                           const Streams& send) {
  std::vector<CopyBuffers> cbuf(copies.size());
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const Copy& c = copies[i];
    if (cuda_of_device[c.src] >= 0) {
      PLACELAB_CUDA_CHECK(cudaSetDevice(cuda_of_device[c.src]));
      cbuf[i].src_dev = std::make_unique<gpu::DeviceBuffer>(std::max<int64_t>(c.bytes, 1));
    } else {
      cbuf[i].src_host = std::make_unique<PinnedBuffer>(c.bytes);
    }
    if (cuda_of_device[c.dst] >= 0) {
      PLACELAB_CUDA_CHECK(cudaSetDevice(cuda_of_device[c.dst]));
      cbuf[i].dst_dev = std::make_unique<gpu::DeviceBuffer>(std::max<int64_t>(c.bytes, 1));
    } else {
      cbuf[i].dst_host = std::make_unique<PinnedBuffer>(c.bytes);
    }
    PLACELAB_CUDA_CHECK(cudaSetDevice(copy_stream(c, cuda_of_device, send).device));
    cbuf[i].begin = std::make_unique<Event>(true);
    cbuf[i].end = std::make_unique<Event>(true);
  }
  return cbuf;
}

// Every op's kernel and timing events, built once and reused every step: a GPU kernel on its
// device's compute stream, or a CPU kernel run as a host function.
struct OpKernels {
  std::vector<std::unique_ptr<gpu::GpuKernel>> gpu;
  std::vector<std::unique_ptr<cpu::CpuKernel>> cpu;
  std::vector<HostOp> host;
  std::vector<std::unique_ptr<Event>> begin, end;

  OpKernels(const OpGraph& g, std::span<const DeviceId> placement, const std::vector<int>& cuda_of_device,
            int clock_device, int64_t max_kernel_bytes, const std::vector<std::unique_ptr<gpu::DeviceContext>>& ctx,
            const Streams& compute, std::vector<Clock::time_point>& host_step_start, std::atomic<bool>& host_failed)
      : gpu(g.num_ops()), cpu(g.num_ops()), host(g.num_ops()), begin(g.num_ops()), end(g.num_ops()) {
    for (OpId op = 0; op < g.num_ops(); ++op) {
      const DeviceId d = placement[op];
      const KernelSignature& sig = g.op(op).kernel;
      if (cuda_of_device[d] >= 0) {
        PLACELAB_CUDA_CHECK(cudaSetDevice(cuda_of_device[d]));
        gpu[op] = std::make_unique<gpu::GpuKernel>(sig, *ctx[d], max_kernel_bytes, compute[d]->s);
      } else {
        cpu[op] = std::make_unique<cpu::CpuKernel>(sig, max_kernel_bytes);
        host[op] = HostOp{cpu[op].get(), &host_step_start[d], 0, 0, 0, false, &host_failed};
        PLACELAB_CUDA_CHECK(cudaSetDevice(clock_device));
      }
      begin[op] = std::make_unique<Event>(true);
      end[op] = std::make_unique<Event>(true);
    }
  }
};

// Every stream starts the step together: it waits for the step's start event, recorded on the
// clock device; a CPU device's stream also marks the host clock's start.
void start_step(const Event& step_begin, const Streams& compute, const Streams& send,
                const std::vector<std::unique_ptr<Event>>& device_begin, const std::vector<int>& cuda_of_device,
                int clock_device, std::vector<Clock::time_point>& host_step_start) {
  PLACELAB_CUDA_CHECK(cudaSetDevice(clock_device));
  PLACELAB_CUDA_CHECK(cudaEventRecord(step_begin.e, compute[0]->s));
  for (std::size_t d = 0; d < compute.size(); ++d) {
    PLACELAB_CUDA_CHECK(cudaSetDevice(compute[d]->device));
    PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(compute[d]->s, step_begin.e, 0));
    PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(send[d]->s, step_begin.e, 0));
    PLACELAB_CUDA_CHECK(cudaEventRecord(device_begin[d]->e, compute[d]->s));
    if (cuda_of_device[d] < 0) PLACELAB_CUDA_CHECK(cudaLaunchHostFunc(compute[d]->s, mark_step_start, &host_step_start[d]));
  }
}

// A copy sent once its producer's kernel (`produced`) has run, on its copy stream, between its
// timing events.
void send_copy(const Copy& c, const CopyBuffers& b, const Event& produced, const std::vector<int>& cuda_of_device,
               const Streams& send) {
  const Stream& stream = copy_stream(c, cuda_of_device, send);
  cudaStream_t cs = stream.s;
  PLACELAB_CUDA_CHECK(cudaSetDevice(stream.device));
  PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(cs, produced.e, 0));
  PLACELAB_CUDA_CHECK(cudaEventRecord(b.begin->e, cs));
  enqueue_copy(c, b, cs, cuda_of_device);
  PLACELAB_CUDA_CHECK(cudaEventRecord(b.end->e, cs));
}

double elapsed_s(const Event& a, const Event& b) {
  float ms = 0;
  PLACELAB_CUDA_CHECK(cudaEventElapsedTime(&ms, a.e, b.e));
  return static_cast<double>(ms) * 1e-3;
}

// Means over the timed steps (every step after the first) of the step and of each device's busy
// and copy times.
void average_timed_steps(ExecutionResult& result, int steps) {
  const double timed_steps = static_cast<double>(steps - 1);
  double sum = 0;
  for (std::size_t i = 1; i < result.step_times_s.size(); ++i) sum += result.step_times_s[i];
  result.step_time_s = sum / timed_steps;
  for (double& b : result.device_busy_s) b /= timed_steps;
  for (double& b : result.device_copy_s) b /= timed_steps;
}

}  // namespace

void CudaExecutorOptions::validate() const {
  if (steps < 2) throw InputError("CudaExecutorOptions.steps = " + std::to_string(steps) + ": must be >= 2");
  std::set<int> seen;
  for (std::size_t i = 0; i < cuda_devices.size(); ++i) {
    const std::string f = "CudaExecutorOptions.cuda_devices[" + std::to_string(i) + "] = " + std::to_string(cuda_devices[i]);
    if (cuda_devices[i] < 0) throw InputError(f + ": must be >= 0");
    if (!seen.insert(cuda_devices[i]).second) throw InputError(f + ": listed twice");
  }
  if (max_kernel_bytes <= 0)
    throw InputError("CudaExecutorOptions.max_kernel_bytes = " + std::to_string(max_kernel_bytes) + ": must be > 0");
}

std::vector<int> cuda_device_map(const Machine& machine, const CudaExecutorOptions& options) {
  options.validate();
  std::vector<int> map(machine.num_devices(), -1);
  int k = 0;
  for (std::size_t d = 0; d < machine.num_devices(); ++d)
    if (machine.devices[d].kind == DeviceKind::kGpu) {
      if (!options.cuda_devices.empty() && k >= static_cast<int>(options.cuda_devices.size()))
        break;  // reported below with the counts
      map[d] = options.cuda_devices.empty() ? k : options.cuda_devices[static_cast<std::size_t>(k)];
      ++k;
    }
  int gpus = 0;
  for (const Device& d : machine.devices) gpus += d.kind == DeviceKind::kGpu;
  if (gpus == 0) throw InputError("machine " + machine.name + " has no GPU device: use the cpu executor");
  if (!options.cuda_devices.empty() && static_cast<int>(options.cuda_devices.size()) != gpus)
    throw InputError("CudaExecutorOptions.cuda_devices lists " + std::to_string(options.cuda_devices.size()) +
                     " CUDA devices for the " + std::to_string(gpus) + " GPU devices of machine " + machine.name);
  return map;
}

CudaExecutor::CudaExecutor(const OpGraph& graph, const Machine& machine, CudaExecutorOptions options)
    : graph_(&graph), machine_(&machine), options_(std::move(options)) {
  cuda_of_device_ = cuda_device_map(machine, options_);
  std::string why;
  const int visible = gpu::visible_device_count(&why);
  if (visible == 0) throw InputError(why);
  for (std::size_t d = 0; d < cuda_of_device_.size(); ++d)
    if (cuda_of_device_[d] >= visible)
      throw InputError("machine device " + machine.devices[d].name + " maps to CUDA device " +
                       std::to_string(cuda_of_device_[d]) + ", but only " + std::to_string(visible) + " are visible");
}

ExecutionResult CudaExecutor::run(std::span<const DeviceId> placement) const {
  const OpGraph& g = *graph_;
  const Machine& m = *machine_;
  check_placement(placement, g.num_ops(), m.num_devices(), "placement");
  const std::size_t nd = m.num_devices(), n = g.num_ops();
  auto is_gpu = [&](DeviceId d) { return cuda_of_device_[d] >= 0; };
  int clock_device = -1;  // the first GPU: the step clock and the host-function streams live there
  for (int c : cuda_of_device_)
    if (c >= 0 && clock_device < 0) clock_device = c;

  std::vector<std::vector<uint32_t>> inputs_of;  // per op: producers on its device, or copy ids + n
  const std::vector<Copy> copies = plan_copies(g, placement, inputs_of);

  ExecutionResult result;
  result.device_busy_s.assign(nd, 0);
  result.device_copy_s.assign(nd, 0);
  result.copies_per_step = static_cast<int64_t>(copies.size());
  for (const Copy& c : copies) result.copy_bytes_per_step += c.bytes;

  // Memory per device before allocating: the CPU executor's rule (executor_buffers.h).
  std::vector<BufferCopy> buffer_copies;
  for (const Copy& c : copies) buffer_copies.push_back({c.src, c.dst, c.bytes});
  const std::vector<double> bytes =
      executor_buffer_bytes(g, placement, buffer_copies, nd, options_.max_kernel_bytes, "CudaExecutorOptions::max_kernel_bytes");
  if (std::optional<std::string> oom = buffers_oom_message(m, bytes)) {
    result.oom = true;
    result.oom_message = std::move(*oom);
    return result;
  }

  enable_peer_access(copies, cuda_of_device_);

  // Streams: one compute stream per device (CPU devices: a stream on the clock device whose host
  // functions run the CPU kernels), one copy stream per device for the copies it sends.
  Streams compute(nd), send(nd);
  std::vector<std::unique_ptr<gpu::DeviceContext>> ctx(nd);
  for (std::size_t d = 0; d < nd; ++d) {
    const int dev = is_gpu(static_cast<DeviceId>(d)) ? cuda_of_device_[d] : clock_device;
    if (is_gpu(static_cast<DeviceId>(d))) ctx[d] = std::make_unique<gpu::DeviceContext>(dev);
    compute[d] = std::make_unique<Stream>(dev);
    send[d] = std::make_unique<Stream>(dev);
  }

  // Kernels and their timing events, built once and reused every step.
  std::atomic<bool> host_failed{false};
  std::vector<Clock::time_point> host_step_start(nd);
  OpKernels kernels(g, placement, cuda_of_device_, clock_device, options_.max_kernel_bytes, ctx, compute, host_step_start,
                    host_failed);
  std::vector<HostOp>& host_ops = kernels.host;
  const std::vector<std::unique_ptr<Event>>& op_begin = kernels.begin;
  const std::vector<std::unique_ptr<Event>>& op_end = kernels.end;
  std::vector<CopyBuffers> cbuf = make_copy_buffers(copies, cuda_of_device_, send);
  for (std::size_t d = 0; d < nd; ++d) PLACELAB_CUDA_CHECK(cudaStreamSynchronize(compute[d]->s));  // buffer fills

  PLACELAB_CUDA_CHECK(cudaSetDevice(clock_device));
  Event step_begin(true), step_end(true);
  std::vector<std::unique_ptr<Event>> device_begin(nd);
  for (std::size_t d = 0; d < nd; ++d) {
    PLACELAB_CUDA_CHECK(cudaSetDevice(is_gpu(static_cast<DeviceId>(d)) ? cuda_of_device_[d] : clock_device));
    device_begin[d] = std::make_unique<Event>(true);
  }
  const std::vector<OpId> order = g.topological_order();
  std::vector<std::vector<uint32_t>> sends(n);
  for (uint32_t i = 0; i < copies.size(); ++i) sends[copies[i].producer].push_back(i);

  for (int step = 0; step < options_.steps; ++step) {
    const bool timed = step > 0;
    for (HostOp& h : host_ops) h.timed = timed;
    start_step(step_begin, compute, send, device_begin, cuda_of_device_, clock_device, host_step_start);
    for (OpId op : order) {
      const DeviceId d = placement[op];
      cudaStream_t s = compute[d]->s;
      PLACELAB_CUDA_CHECK(cudaSetDevice(compute[d]->device));
      for (uint32_t in : inputs_of[op]) {
        const cudaEvent_t e = in < n ? op_end[in]->e : cbuf[in - n].end->e;
        const DeviceId from = in < n ? placement[in] : copies[in - n].dst;
        if (from != d || in >= n) PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(s, e, 0));
      }
      PLACELAB_CUDA_CHECK(cudaEventRecord(op_begin[op]->e, s));
      if (is_gpu(d)) kernels.gpu[op]->launch(s);
      else PLACELAB_CUDA_CHECK(cudaLaunchHostFunc(s, run_host_op, &host_ops[op]));
      PLACELAB_CUDA_CHECK(cudaEventRecord(op_end[op]->e, s));

      for (uint32_t i : sends[op]) send_copy(copies[i], cbuf[i], *op_end[op], cuda_of_device_, send);
    }
    // The step ends when every op and copy has finished.
    PLACELAB_CUDA_CHECK(cudaSetDevice(clock_device));
    for (OpId op = 0; op < n; ++op) PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(compute[0]->s, op_end[op]->e, 0));
    for (const CopyBuffers& b : cbuf) PLACELAB_CUDA_CHECK(cudaStreamWaitEvent(compute[0]->s, b.end->e, 0));
    PLACELAB_CUDA_CHECK(cudaEventRecord(step_end.e, compute[0]->s));
    PLACELAB_CUDA_CHECK(cudaEventSynchronize(step_end.e));
    if (host_failed) throw Error("a CPU op's kernel failed inside a CUDA host function");

    const double step_s = elapsed_s(step_begin, step_end);
    result.step_times_s.push_back(step_s);
    const bool last = step + 1 == options_.steps;
    if (last) result.op_start_s.assign(n, 0), result.op_end_s.assign(n, 0);
    for (OpId op = 0; op < n; ++op) {
      const DeviceId d = placement[op];
      if (!is_gpu(d)) {
        if (last) result.op_start_s[op] = host_ops[op].start_s, result.op_end_s[op] = host_ops[op].end_s;
        continue;
      }
      if (timed) result.device_busy_s[d] += elapsed_s(*op_begin[op], *op_end[op]);
      if (last) {
        result.op_start_s[op] = elapsed_s(*device_begin[d], *op_begin[op]);
        result.op_end_s[op] = elapsed_s(*device_begin[d], *op_end[op]);
      }
    }
    if (timed)
      for (std::size_t i = 0; i < copies.size(); ++i) result.device_copy_s[copies[i].dst] += elapsed_s(*cbuf[i].begin, *cbuf[i].end);
  }
  for (OpId op = 0; op < n; ++op)
    if (!is_gpu(placement[op])) result.device_busy_s[placement[op]] += host_ops[op].busy_s;
  average_timed_steps(result, options_.steps);
  result.pinned = false;  // no worker threads are pinned: GPU streams do the work
  return result;
}

CudaExecutorEnvironment::CudaExecutorEnvironment(const OpGraph& graph, const Machine& machine, CudaExecutorOptions options)
    : executor_(graph, machine, std::move(options)) {}

std::vector<Measurement> CudaExecutorEnvironment::evaluate(std::span<const Placement> placements) {
  std::vector<Measurement> out;
  out.reserve(placements.size());
  for (const Placement& p : placements) {
    last_ = executor_.run(p);
    out.push_back(Measurement{.step_time_s = last_.step_time_s, .oom = last_.oom, .source = "cuda"});
  }
  return out;
}

}  // namespace placelab
