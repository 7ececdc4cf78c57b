// What a local sweep (worker processes on this machine) and a distributed one (MPI ranks,
// distributed.h) share: how a scenario run is started as its own process, when a scenario counts
// as finished, and the one summary table both write.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "scenario.h"

namespace placelab::cli {

// Starts `placelab <args…>` (this executable) as a child process whose standard output and error
// go to `log`. The child stops (SIGTERM, so it checkpoints) when its parent dies, and does not see
// the MPI launcher's environment: it is a plain local run. Throws Error when fork fails.
pid_t spawn_placelab(const std::vector<std::string>& args, const std::filesystem::path& log);

// The seeds a sweep runs a scenario with: 1..N for `--seeds N`, else the scenario's own.
std::vector<uint64_t> sweep_seeds(const Scenario& s, std::optional<int> seeds);

// True when the scenario's summary.json was written by a finished run of the scenario as it is
// now, with these seeds (its fingerprint matches): a sweep skips it.
bool scenario_finished(const Scenario& s, const std::vector<uint64_t>& seeds);

// One table over the scenarios' summaries (rows: scenarios, columns: every algorithm seen), as
// results/sweep-<name>/summary.md and .csv; prints it and the files' names.
void write_sweep_tables(const std::filesystem::path& dir, const std::string& name, const std::vector<Scenario>& scenarios);

// How a child run ended, as the sweep reports it.
enum class ChildEnd { kFinished, kStopped, kFailed, kKilled };
ChildEnd child_end(int wait_status);  // kKilled: ended by a signal other than the stop signals

// SIGINT/SIGTERM in a sweep, local or distributed: start no more runs, pass the signal on to the
// running ones (which stop at their next batch with a checkpoint) and wait for them. Installed
// without SA_RESTART, so that a waitpid returns (EINTR) and the stop reaches the runs at once.
void catch_sweep_stop_signals();
bool sweep_stop_requested();

// `placelab sweep` on this machine: up to `jobs` scenario runs at once in child processes.
void run_sweep(const std::vector<std::string>& files, std::optional<int> seeds, int jobs, const std::string& name);

}  // namespace placelab::cli
