#include "placelab/profiler/activity.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace placelab {

std::string MachineActivity::describe() const {
  if (!known) return "the machine's activity is unknown (/proc/stat unreadable)";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "other processes used %.0f %% of the %d CPUs' time and steal %.0f %% while it ran (limits %.0f %%, "
                "%.0f %%)",
                100 * others, cpus, 100 * steal, 100 * kMaxOthers, 100 * kMaxSteal);
  return buf;
}

ActivityMeter::ActivityMeter() : start_(sample()) {}

// The first line of /proc/stat: "cpu user nice system idle iowait irq softirq steal guest
// guest_nice", in clock ticks summed over the CPUs (guest time is inside user already).
ActivityMeter::Sample ActivityMeter::sample() {
  Sample s;
  s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    s.own_cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                  1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  std::ifstream in("/proc/stat");
  std::string line, label;
  if (!std::getline(in, line)) return s;
  std::istringstream fields(line);
  uint64_t v[8] = {};
  fields >> label;
  for (uint64_t& x : v) fields >> x;
  if (!fields || label != "cpu") return s;
  for (uint64_t x : v) s.total += x;
  s.idle = v[3] + v[4];
  s.steal = v[7];
  s.ok = true;
  return s;
}

MachineActivity ActivityMeter::stop() const {
  const Sample end = sample();
  MachineActivity a;
  a.wall_s = end.wall_s - start_.wall_s;
  a.cpus = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  if (!start_.ok || !end.ok || end.total <= start_.total) return a;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double total_s = static_cast<double>(end.total - start_.total) / ticks;
  const double idle_s = static_cast<double>(end.idle - start_.idle) / ticks;
  const double steal_s = static_cast<double>(end.steal - start_.steal) / ticks;
  const double own_s = end.own_cpu_s - start_.own_cpu_s;
  a.known = true;
  a.steal = std::clamp(steal_s / total_s, 0.0, 1.0);
  a.others = std::clamp((total_s - idle_s - steal_s - own_s) / total_s, 0.0, 1.0);
  return a;
}

}  // namespace placelab
