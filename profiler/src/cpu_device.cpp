#include "placelab/profiler/cpu_device.h"

#include <algorithm>
#include <exception>
#include <string>
#include <thread>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "placelab/core/error.h"

namespace placelab::cpu {

std::vector<int> available_cores() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  if (cores.empty()) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (int c = 0; c < std::max(1L, n); ++c) cores.push_back(c);
  }
  return cores;
}

std::vector<std::vector<int>> split_cores(std::span<const int> cores, int cores_per_device, int max_devices) {
  if (cores_per_device < 1)
    throw InputError("cores_per_device = " + std::to_string(cores_per_device) + ": must be >= 1");
  std::vector<std::vector<int>> out;
  for (std::size_t i = 0; i + static_cast<std::size_t>(cores_per_device) <= cores.size();
       i += static_cast<std::size_t>(cores_per_device)) {
    if (max_devices > 0 && static_cast<int>(out.size()) == max_devices) break;
    out.emplace_back(cores.begin() + static_cast<std::ptrdiff_t>(i),
                     cores.begin() + static_cast<std::ptrdiff_t>(i) + cores_per_device);
  }
  if (out.empty())
    throw InputError("cores_per_device = " + std::to_string(cores_per_device) + ": only " +
                     std::to_string(cores.size()) + " cores are available to this process");
  return out;
}

std::vector<std::vector<int>> default_device_cores(int num_devices) {
  PLACELAB_CHECK(num_devices >= 1) << num_devices;
  std::vector<int> cores = available_cores();
  const std::size_t n = static_cast<std::size_t>(num_devices), m = cores.size();
  std::vector<std::vector<int>> out(n);
  for (std::size_t d = 0; d < n; ++d) {
    if (m >= n) {
      for (std::size_t i = d * m / n; i < (d + 1) * m / n; ++i) out[d].push_back(cores[i]);
    } else {
      out[d].push_back(cores[d % m]);
    }
  }
  return out;
}

bool pin_current_thread(std::span<const int> cores) {
  if (cores.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

void run_pinned(std::span<const int> cores, const std::function<void()>& fn) {
  std::exception_ptr error;
  std::thread t([&] {
    pin_current_thread(cores);
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace placelab::cpu
