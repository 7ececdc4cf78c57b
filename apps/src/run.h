// Running a scenario: baselines and learners over seeds against the simulator (with optional
// verification on hardware), and the outputs a user reads — summary.json, curve.csv,
// best_placement.json, timeline.json, report.md and PNG plots under the output folder.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "placelab/hwmodels/machine_source.h"
#include "placelab/sim/environment.h"
#include "placelab/sim/simulator.h"
#include "scenario.h"

namespace placelab::cli {

struct RunOptions {
  std::optional<int> seeds;            // --seeds N: seeds 1..N instead of the scenario's
  bool resume = false;                 // keep finished runs, continue interrupted ones from checkpoints
  std::filesystem::path output;        // --output: instead of the scenario's folder
  bool progress = true;                // progress bar on stderr
  int64_t stop_after_samples = 0;      // testing aid: stop every learner after N samples (0 = never)
  // One seed's learner runs alone, as a distributed sweep hands them out: its run records are
  // kept or written (as with --resume), other seeds' files are left alone and no summary is
  // written (the scenario's last run, with every seed, writes it). Runs of different seeds of one
  // folder may run at once; a whole run of the folder may not.
  std::optional<uint64_t> only_seed;
  // Where the learners' samples and the verifications are evaluated. Unset: here, by a one-thread
  // SimEnvironment and the scenario's verify backend (make_verify_environment); `placelab run`
  // under mpirun spreads them over ranks (distributed.h). The simulator outlives what is made.
  std::function<std::unique_ptr<Environment>(const Simulator&)> sample_environment;
  std::function<std::unique_ptr<Environment>()> verify_environment;
};

struct RunOutcome {
  std::filesystem::path folder;  // where the outputs are
  bool stopped = false;          // Ctrl-C (or --stop-after-samples) stopped it: checkpoints, no summary
};

// Runs the scenario and writes its outputs, or stops at the next batch after SIGINT/SIGTERM with
// its checkpoints written (a fresh run first removes the folder's old summary.json and per-run
// files, so a stopped run never leaves an earlier run's summary looking current).
RunOutcome run_scenario(const Scenario& scenario, const RunOptions& options);

// An output folder's lock, held while a run or a sweep writes it: two writers of one folder would
// interleave their files and clear each other's. A whole run (or sweep) holds `.lock` alone; the
// one-seed runs of a distributed sweep share it, each holding its seed's `.lock-seed<N>` alone
// (waiting for it: a rank given up for dead may still be stopping that seed's earlier run).
// flock() is released by the kernel when the process ends, however it ends; the file keeps the
// holder's pid for the second writer's message, which ends with `hint` ("give this run another
// --output"). The lock file is opened without following a link (InputError when it is one).
class OutputLock {
 public:
  OutputLock(const std::filesystem::path& folder, std::optional<uint64_t> only_seed, std::string hint);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  void take(const std::filesystem::path& path, int mode, int& fd, bool wait = false);
  std::filesystem::path folder_;
  std::string hint_;
  int fd_ = -1, seed_fd_ = -1;
};

// The scenario's verification on hardware (`verify:`), or null when it has none. Throws InputError
// (with the scenario's line) when the machine cannot take it.
std::unique_ptr<Environment> make_verify_environment(const Scenario& s, const OpGraph& g, const MachineSource& ms);

// (Re)renders report.md and the plots of a finished run folder from summary.json and curve.csv.
void render_report(const std::filesystem::path& run_dir, bool quiet = false);

}  // namespace placelab::cli
