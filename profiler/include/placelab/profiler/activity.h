// Whether a measurement ran on a quiet machine. Timings taken while other processes or the
// hypervisor take the CPUs measure the neighbours as much as the placement (a loaded 2-core VM:
// verify's median error 34–41 %, Spearman −1.0 to 0.24), so `verify` and CPU calibration read
// /proc/stat and their own CPU time around the measurement and say when it is not to be trusted.
//
//   ActivityMeter meter;            // before measuring
//   ... run the executor ...
//   MachineActivity a = meter.stop();
//   if (!a.reliable()) fmt::print("{}\n", a.describe());
#pragma once

#include <cstdint>
#include <string>

namespace placelab {

// What the CPUs did while a measurement ran, as fractions of all CPUs' time.
struct MachineActivity {
  double wall_s = 0;
  int cpus = 0;
  double others = 0;  // time other processes ran (all CPUs' busy time less ours and steal)
  double steal = 0;   // time the hypervisor gave the CPUs to other guests
  bool known = false; // false where /proc/stat cannot be read: nothing is claimed either way

  // Quiet enough to trust: others at most 25 % of the CPUs' time and steal at most 10 %.
  static constexpr double kMaxOthers = 0.25, kMaxSteal = 0.10;
  bool reliable() const { return !known || (others <= kMaxOthers && steal <= kMaxSteal); }
  // "other processes used 63 % of the 2 CPUs' time and steal 0 % while it ran (limits 25 %, 10 %)".
  std::string describe() const;
};

// Starts at construction; stop() says what happened since. Cheap: two reads of /proc/stat.
class ActivityMeter {
 public:
  ActivityMeter();
  MachineActivity stop() const;

 private:
  struct Sample {
    bool ok = false;
    uint64_t total = 0, idle = 0, steal = 0;  // clock ticks, all CPUs
    double own_cpu_s = 0, wall_s = 0;
  };
  static Sample sample();
  Sample start_;
};

}  // namespace placelab
