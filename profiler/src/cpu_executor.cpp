#include "placelab/profiler/cpu_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <latch>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "placelab/core/error.h"
#include "placelab/graph/transfers.h"
#include "placelab/profiler/activity.h"
#include "placelab/profiler/cpu_device.h"
#include "placelab/profiler/executor_buffers.h"

namespace placelab {
namespace {

using Clock = std::chrono::steady_clock;

// Tells the core a spin-wait is going on (frees pipeline resources for a sibling hyperthread).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{8} << 30;
}

// One schedulable unit: an op's kernel, or the copy of a producer's output to another device.
struct Task {
  DeviceId device = 0;
  bool is_copy = false;
  OpId op = 0;              // the op, or the producer whose output is copied
  DeviceId src_device = 0;  // copies: where the producer ran
  int64_t copy_bytes = 0;
  uint32_t deps = 0;        // tasks that must finish first
  std::vector<uint32_t> succ;
};

// Ready tasks of one device, earliest-ready first and ties by task id (ops before copies), the
// order the simulator uses; shared by the device's workers.
struct DeviceQueue {
  struct Entry {
    double ready_s;
    uint32_t task;
    bool operator>(const Entry& o) const { return ready_s != o.ready_s ? ready_s > o.ready_s : task > o.task; }
  };
  std::mutex mu;
  std::condition_variable cv;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  bool stop = false;
  // Whether any task of this run is placed on the device. Only such a device's workers spin: an
  // idle device's spinning workers would take time from a concurrent run on the same cores (the
  // in-situ calibration runs one copy of the graph per device at once).
  bool has_tasks = false;
  // ready.size() and stop, readable without the mutex by spinning workers.
  std::atomic<uint32_t> ready_count{0};
  std::atomic<bool> stopping{false};
};

// The state of one run(): tasks, buffers, queues and workers.
class Run {
 public:
  Run(const OpGraph& graph, const Machine& machine, const CpuExecutorOptions& options, std::span<const DeviceId> placement)
      : graph_(graph), machine_(machine), options_(options), placement_(placement) {
    build_tasks();
  }

  // Bytes of buffers per device, before allocating anything.
  std::vector<double> device_bytes() const {
    std::vector<BufferCopy> copies;
    for (const Task& t : tasks_)
      if (t.is_copy) copies.push_back({t.src_device, t.device, t.copy_bytes});
    return executor_buffer_bytes(graph_, placement_, copies, machine_.num_devices(), options_.max_kernel_bytes,
                                 "CpuExecutorOptions::max_kernel_bytes");
  }

  ExecutionResult execute() {
    ExecutionResult result;
    const std::size_t nd = machine_.num_devices();
    result.device_busy_s.assign(nd, 0);
    result.device_copy_s.assign(nd, 0);
    if (options_.measure_cpu_time) result.device_busy_cpu_s.assign(nd, 0);
    for (const Task& t : tasks_)
      if (t.is_copy) ++result.copies_per_step, result.copy_bytes_per_step += t.copy_bytes;

    std::vector<double> bytes = device_bytes();
    double total = 0;
    for (double b : bytes) total += b;
    const int64_t max_total = options_.max_total_bytes > 0 ? options_.max_total_bytes : physical_memory_bytes() / 2;
    if (total > static_cast<double>(max_total))
      throw InputError("this placement needs " + gigabytes(total) + " of kernel and copy buffers, above the executor's limit of " +
                       gigabytes(static_cast<double>(max_total)) + " (CpuExecutorOptions::max_total_bytes)");
    if (std::optional<std::string> oom = buffers_oom_message(machine_, bytes)) {
      result.oom = true;
      result.oom_message = std::move(*oom);
      return result;
    }

    start_workers();
    setup_done_->wait();
    for (const std::exception_ptr& e : errors_)
      if (e) {
        stop_workers();
        std::rethrow_exception(e);
      }

    const int steps = options_.steps;
    result.op_start_s.assign(graph_.num_ops(), 0);
    result.op_end_s.assign(graph_.num_ops(), 0);
    result.op_time_s.assign(graph_.num_ops(), 0);
    for (int step = 0; step < steps; ++step) {
      double step_s = run_step();
      result.step_times_s.push_back(step_s);
      if (step == 0) continue;
      for (std::size_t i = 0; i < tasks_.size(); ++i) {
        const double d = end_s_[i] - start_s_[i];
        (tasks_[i].is_copy ? result.device_copy_s : result.device_busy_s)[tasks_[i].device] += d;
        if (!tasks_[i].is_copy) result.op_time_s[tasks_[i].op] += d;
        if (options_.measure_cpu_time && !tasks_[i].is_copy) result.device_busy_cpu_s[tasks_[i].device] += cpu_s_[i];
      }
    }
    stop_workers();
    for (std::size_t i = 0; i < tasks_.size(); ++i)
      if (!tasks_[i].is_copy) result.op_start_s[tasks_[i].op] = start_s_[i], result.op_end_s[tasks_[i].op] = end_s_[i];
    const double measured = static_cast<double>(steps - 1);
    for (int s = 1; s < steps; ++s) result.step_time_s += result.step_times_s[static_cast<std::size_t>(s)];
    result.step_time_s /= measured;
    for (double& b : result.device_busy_s) b /= measured;
    for (double& b : result.device_copy_s) b /= measured;
    for (double& b : result.device_busy_cpu_s) b /= measured;
    for (double& t : result.op_time_s) t /= measured;
    result.pinned = all_pinned_.load();
    return result;
  }

  ~Run() { stop_workers(); }

 private:
  void build_tasks() {
    const OpId n = static_cast<OpId>(graph_.num_ops());
    tasks_.resize(n);
    for (OpId op = 0; op < n; ++op) tasks_[op].device = placement_[op], tasks_[op].op = op;
    // What crosses devices follows the project's one rule (graph/transfers.h), as the simulator.
    for_each_transfer(
        graph_, placement_, [&](OpId src, OpId dst) { add_dependency(src, dst); },
        [&](OpId src, DeviceId to, int64_t bytes) {
          const auto id = static_cast<uint32_t>(tasks_.size());
          tasks_.push_back(Task{.device = to, .is_copy = true, .op = src, .src_device = placement_[src], .copy_bytes = bytes});
          add_dependency(src, id);
          return id;
        },
        [&](uint32_t copy, OpId dst) { add_dependency(copy, dst); });
  }

  void add_dependency(uint32_t from, uint32_t to) {
    tasks_[from].succ.push_back(to);
    ++tasks_[to].deps;
  }

  void start_workers() {
    const std::size_t nd = machine_.num_devices();
    const std::size_t nt = tasks_.size();
    queues_ = std::vector<DeviceQueue>(nd);
    for (const Task& t : tasks_) queues_[t.device].has_tasks = true;
    pending_ = std::make_unique<std::atomic<uint32_t>[]>(nt);
    start_s_.assign(nt, 0);
    end_s_.assign(nt, 0);
    cpu_s_.assign(nt, 0);
    kernels_.resize(graph_.num_ops());
    src_buffers_.resize(nt);
    dst_buffers_.resize(nt);
    std::size_t workers = 0;
    for (std::size_t d = 0; d < nd; ++d) workers += static_cast<std::size_t>(machine_.devices[d].streams);
    errors_.assign(workers, nullptr);
    setup_done_ = std::make_unique<std::latch>(static_cast<std::ptrdiff_t>(workers));
    std::size_t w = 0;
    for (std::size_t d = 0; d < nd; ++d)
      for (int s = 0; s < machine_.devices[d].streams; ++s, ++w)
        threads_.emplace_back([this, d, s, w] { worker(static_cast<DeviceId>(d), s == 0, w); });
  }

  void stop_workers() {
    for (DeviceQueue& q : queues_) {
      std::lock_guard lk(q.mu);
      q.stop = true;
      q.stopping.store(true, std::memory_order_release);
      q.cv.notify_all();
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  // Allocates (first touch) the buffers of device `d` on one of its own threads.
  void setup(DeviceId d) {
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
      const Task& t = tasks_[i];
      if (!t.is_copy && t.device == d) kernels_[t.op] = std::make_unique<cpu::CpuKernel>(graph_.op(t.op).kernel, options_.max_kernel_bytes);
      if (t.is_copy && t.device == d) dst_buffers_[i].assign(static_cast<std::size_t>(t.copy_bytes), 0);
      if (t.is_copy && t.src_device == d) src_buffers_[i].assign(static_cast<std::size_t>(t.copy_bytes), 1);
    }
  }

  void worker(DeviceId d, bool first_of_device, std::size_t index) {
    if (!cpu::pin_current_thread(options_.device_cores[d])) all_pinned_ = false;
    try {
      if (first_of_device) setup(d);
    } catch (...) {
      errors_[index] = std::current_exception();
    }
    setup_done_->count_down();
    DeviceQueue& q = queues_[d];
    for (;;) {
      if (options_.spin_s > 0 && q.has_tasks && q.ready_count.load(std::memory_order_acquire) == 0) {
        const auto deadline = Clock::now() + std::chrono::duration<double>(options_.spin_s);
        // sched_yield now and then: when more threads than cores share this core (tests run in
        // parallel), a spinner must not hold it for a whole time slice.
        for (unsigned spins = 1; q.ready_count.load(std::memory_order_acquire) == 0 &&
                                 !q.stopping.load(std::memory_order_acquire) && Clock::now() < deadline;
             ++spins) {
          cpu_relax();
          if (spins % 256 == 0) sched_yield();
        }
      }
      uint32_t t = 0;
      {
        std::unique_lock lk(q.mu);
        q.cv.wait(lk, [&] { return q.stop || !q.ready.empty(); });
        if (q.ready.empty()) return;
        t = q.ready.top().task;
        q.ready.pop();
        q.ready_count.store(static_cast<uint32_t>(q.ready.size()), std::memory_order_release);
      }
      const Task& task = tasks_[t];
      const auto s = Clock::now();
      if (task.is_copy) {
        if (task.copy_bytes > 0) std::memcpy(dst_buffers_[t].data(), src_buffers_[t].data(), static_cast<std::size_t>(task.copy_bytes));
      } else if (options_.measure_cpu_time) {
        const double c = thread_cpu_s();
        kernels_[task.op]->run();
        cpu_s_[t] = thread_cpu_s() - c;
      } else {
        kernels_[task.op]->run();
      }
      const auto e = Clock::now();
      start_s_[t] = std::chrono::duration<double>(s - step_start_).count();
      end_s_[t] = std::chrono::duration<double>(e - step_start_).count();
      for (uint32_t next : task.succ)
        if (pending_[next].fetch_sub(1, std::memory_order_acq_rel) == 1) push(next, end_s_[t]);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lk(done_mu_);
        done_ = true;
        done_cv_.notify_one();
      }
    }
  }

  void push(uint32_t task, double ready_s) {
    DeviceQueue& q = queues_[tasks_[task].device];
    {
      std::lock_guard lk(q.mu);
      q.ready.push({ready_s, task});
      q.ready_count.store(static_cast<uint32_t>(q.ready.size()), std::memory_order_release);
    }
    q.cv.notify_one();
  }

  // Runs one step and returns its duration: from seeding the ready queues to the last task's end.
  double run_step() {
    if (tasks_.empty()) return 0;
    for (std::size_t i = 0; i < tasks_.size(); ++i) pending_[i].store(tasks_[i].deps, std::memory_order_relaxed);
    remaining_.store(static_cast<uint32_t>(tasks_.size()), std::memory_order_relaxed);
    {
      std::lock_guard lk(done_mu_);
      done_ = false;
    }
    // Workers read step_start_ only after taking a queue mutex that this thread releases below.
    step_start_ = Clock::now();
    for (std::size_t d = 0; d < queues_.size(); ++d) {
      DeviceQueue& q = queues_[d];
      std::lock_guard lk(q.mu);
      for (std::size_t i = 0; i < tasks_.size(); ++i)
        if (tasks_[i].deps == 0 && tasks_[i].device == d) q.ready.push({0.0, static_cast<uint32_t>(i)});
      q.ready_count.store(static_cast<uint32_t>(q.ready.size()), std::memory_order_release);
      q.cv.notify_all();
    }
    std::unique_lock lk(done_mu_);
    done_cv_.wait(lk, [&] { return done_; });
    return *std::max_element(end_s_.begin(), end_s_.end());
  }

  const OpGraph& graph_;
  const Machine& machine_;
  const CpuExecutorOptions& options_;
  std::span<const DeviceId> placement_;
  std::vector<Task> tasks_;  // ops first (task id = op id), then copies

  std::vector<DeviceQueue> queues_;
  std::unique_ptr<std::atomic<uint32_t>[]> pending_;
  std::atomic<uint32_t> remaining_{0};
  std::vector<double> start_s_, end_s_, cpu_s_;  // by task; cpu_s_ only with measure_cpu_time
  Clock::time_point step_start_;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;

  std::vector<std::unique_ptr<cpu::CpuKernel>> kernels_;
  std::vector<std::vector<char>> src_buffers_, dst_buffers_;  // by task id; copies only
  std::vector<std::thread> threads_;
  std::vector<std::exception_ptr> errors_;  // by worker
  std::unique_ptr<std::latch> setup_done_;
  std::atomic<bool> all_pinned_{true};
};

}  // namespace

void check_measured_steps(int64_t steps, const std::string& what) {
  if (steps < 2 || steps > kMaxMeasuredSteps)
    throw InputError(what + " = " + std::to_string(steps) + ": must be in [2, " + std::to_string(kMaxMeasuredSteps) +
                     "] (the first step is warm-up)");
}

void CpuExecutorOptions::validate() const {
  check_measured_steps(steps, "CpuExecutorOptions.steps");
  if (max_kernel_bytes <= 0)
    throw InputError("CpuExecutorOptions.max_kernel_bytes = " + std::to_string(max_kernel_bytes) + ": must be > 0");
  if (!(spin_s >= 0 && spin_s <= 1))
    throw InputError("CpuExecutorOptions.spin_s = " + std::to_string(spin_s) + ": must be in [0, 1] seconds");
  if (max_total_bytes < 0)
    throw InputError("CpuExecutorOptions.max_total_bytes = " + std::to_string(max_total_bytes) + ": must be >= 0 (0 = half the memory)");
  for (std::size_t d = 0; d < device_cores.size(); ++d) {
    if (device_cores[d].empty())
      throw InputError("CpuExecutorOptions.device_cores[" + std::to_string(d) + "]: must list at least one core");
    for (int c : device_cores[d])
      if (c < 0) throw InputError("CpuExecutorOptions.device_cores[" + std::to_string(d) + "] = " + std::to_string(c) + ": must be >= 0");
  }
}

CpuExecutor::CpuExecutor(const OpGraph& graph, const Machine& machine, CpuExecutorOptions options)
    : graph_(&graph), machine_(&machine), options_(std::move(options)) {
  options_.validate();
  for (const Device& d : machine.devices)
    if (d.kind != DeviceKind::kCpu)
      throw InputError("machine " + machine.name + ": device " + d.name + " is a " + std::string(device_kind_name(d.kind)) +
                       "; the cpu executor runs only machines whose devices are all CPUs");
  if (options_.device_cores.empty()) {
    options_.device_cores = cpu::default_device_cores(static_cast<int>(machine.num_devices()));
  } else if (options_.device_cores.size() != machine.num_devices()) {
    throw InputError("CpuExecutorOptions.device_cores has " + std::to_string(options_.device_cores.size()) +
                     " core sets: must have one per machine device (" + std::to_string(machine.num_devices()) + ")");
  }
}

ExecutionResult CpuExecutor::run(std::span<const DeviceId> placement) const {
  check_placement(placement, graph_->num_ops(), machine_->num_devices(), "placement");
  Run run(*graph_, *machine_, options_, placement);
  return run.execute();
}

CpuExecutorEnvironment::CpuExecutorEnvironment(const OpGraph& graph, const Machine& machine, CpuExecutorOptions options)
    : executor_(graph, machine, std::move(options)) {}

std::vector<Measurement> CpuExecutorEnvironment::evaluate(std::span<const Placement> placements) {
  std::vector<Measurement> out;
  out.reserve(placements.size());
  for (const Placement& p : placements) {
    const ActivityMeter meter;
    last_ = executor_.run(p);
    const MachineActivity activity = meter.stop();
    // summary.json's verification records say when a measurement was taken among busy neighbours.
    out.push_back({.step_time_s = last_.step_time_s,
                   .oom = last_.oom,
                   .source = activity.reliable() ? std::string("cpu") : "cpu, UNRELIABLE: " + activity.describe()});
  }
  return out;
}

}  // namespace placelab
