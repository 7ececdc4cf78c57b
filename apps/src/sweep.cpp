#include "sweep.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "distributed.h"
#include "placelab/core/error.h"
#include "placelab/graph/io.h"
#include "run.h"

extern char** environ;

namespace placelab::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The variables by which an MPI launcher tells a process it is a rank (OpenMPI, PMIx, Slurm's PMI).
bool is_launcher_variable(std::string_view var) {
  return var.starts_with("OMPI_") || var.starts_with("PMIX_") || var.starts_with("PMI_");
}

}  // namespace

bool under_mpi_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

pid_t spawn_placelab(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv_s = {"/proc/self/exe"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  // Built before fork: the child only calls async-signal-safe functions until exec.
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e)
    if (!is_launcher_variable(*e)) envp.push_back(*e);
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("sweep: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // A killed sweep or rank must not leave runs behind that hold their folders' locks.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(kStoppedExitStatus);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    // Nothing of the parent's but the standard streams: an MPI rank's sockets to its launcher,
    // held on by a child, keep the job from ending when that rank dies.
    close_range(3, ~0U, 0);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

ChildEnd child_end(int status) {
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 0) return ChildEnd::kFinished;
    return WEXITSTATUS(status) == kStoppedExitStatus ? ChildEnd::kStopped : ChildEnd::kFailed;
  }
  if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM)) return ChildEnd::kStopped;
  return ChildEnd::kKilled;
}

namespace {
volatile std::sig_atomic_t g_sweep_stop = 0;
extern "C" void on_sweep_stop(int) { g_sweep_stop = 1; }
}  // namespace

void catch_sweep_stop_signals() {
  struct sigaction sa = {};
  sa.sa_handler = on_sweep_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool sweep_stop_requested() { return g_sweep_stop != 0; }

void run_sweep(const std::vector<std::string>& files, std::optional<int> seeds, int jobs, const std::string& name) {
  if (jobs < 1) throw InputError("--jobs " + std::to_string(jobs) + ": must be >= 1");
  const std::vector<Scenario> scenarios = read_sweep({files.begin(), files.end()}, name);  // all validated first
  const fs::path dir = fs::path("results") / ("sweep-" + name);
  fs::create_directories(dir / "logs");
  // A second sweep of the same name would truncate this one's logs and rewrite its tables.
  const OutputLock lock(dir, std::nullopt, "give this sweep another --name");

  std::size_t next = 0, running = 0, failed = 0, stopped_runs = 0;
  std::map<pid_t, std::size_t> children;
  catch_sweep_stop_signals();
  bool forwarded = false;
  while (next < scenarios.size() || running > 0) {
    while (!sweep_stop_requested() && running < static_cast<std::size_t>(jobs) && next < scenarios.size()) {
      const Scenario& s = scenarios[next];
      if (scenario_finished(s, sweep_seeds(s, seeds))) {
        fmt::print("{:<40} already finished, skipped\n", s.name);
        std::fflush(stdout);  // progress lines reach a log or pipe as they happen
      } else {
        const fs::path log = dir / "logs" / (s.name + ".log");
        fmt::print("{:<40} started (log: {})\n", s.name, log.string());
        std::fflush(stdout);
        std::vector<std::string> args = {"run", files[next], "--resume", "--quiet"};
        if (seeds) args.insert(args.end(), {"--seeds", std::to_string(*seeds)});
        children[spawn_placelab(args, log)] = next;
        ++running;
      }
      ++next;
    }
    if (running == 0) break;
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (sweep_stop_requested() && !forwarded) {
      // Ctrl-C in a terminal reaches the workers too; `kill` of the sweep alone does not.
      for (const auto& child : children) kill(child.first, SIGINT);
      forwarded = true;
    }
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    auto it = children.find(pid);
    if (it == children.end()) continue;
    --running;
    const ChildEnd end = child_end(status);
    failed += end == ChildEnd::kFailed || end == ChildEnd::kKilled;
    stopped_runs += end == ChildEnd::kStopped;
    fmt::print("{:<40} {}\n", scenarios[it->second].name,
               end == ChildEnd::kFinished  ? "finished"
               : end == ChildEnd::kStopped ? "stopped (re-run the sweep to resume it)"
                                           : "FAILED (see its log)");
    std::fflush(stdout);
    children.erase(it);
  }

  write_sweep_tables(dir, name, scenarios);
  if (failed) throw Error(std::to_string(failed) + " scenario run(s) failed; their logs are in " + (dir / "logs").string());
  if (sweep_stop_requested() || stopped_runs) {
    std::fflush(stdout);  // the table first, then why it is partial
    fmt::print(stderr, "sweep stopped: {} scenario(s) stopped, {} not started; the same command resumes it\n",
               stopped_runs, scenarios.size() - next);
    throw Stopped{};
  }
}

}  // namespace placelab::cli
