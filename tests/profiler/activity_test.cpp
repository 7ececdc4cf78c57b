// ActivityMeter: other processes' CPU time is seen (one spinning process per CPU: most of the
// machine's time is theirs, so the measurement is unreliable). That our own threads' time is not
// counted is checked on a quiet machine by accuracy_test (serial): verify's executor fills the CPUs.
#include "placelab/profiler/activity.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace placelab {
namespace {

void spin_for(std::chrono::milliseconds ms) {
  const auto end = std::chrono::steady_clock::now() + ms;
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

TEST(ActivityMeter, OtherProcessesMakeAMeasurementUnreliable) {
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  std::vector<pid_t> spinners;
  for (unsigned i = 0; i < cpus; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      spin_for(std::chrono::milliseconds(5000));
      ::_exit(0);
    }
    spinners.push_back(pid);
  }
  const ActivityMeter meter;
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const MachineActivity a = meter.stop();
  for (pid_t pid : spinners) ::kill(pid, SIGKILL);
  for (pid_t pid : spinners) ::waitpid(pid, nullptr, 0);
  if (!a.known) GTEST_SKIP() << "/proc/stat is not readable here";
  EXPECT_GT(a.others, 0.5) << a.describe();
  EXPECT_FALSE(a.reliable()) << a.describe();
  EXPECT_NE(a.describe().find("other processes used"), std::string::npos);
}

}  // namespace
}  // namespace placelab
