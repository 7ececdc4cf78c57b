// Running a scenario: baselines and learners over seeds against the simulator (with optional
// verification on hardware), and the outputs a user reads — summary.json, curve.csv,
// best_placement.json, timeline.json, report.md and PNG plots under the output folder.
#pragma once

#include <filesystem>
#include <optional>

#include "scenario.h"

namespace placelab::cli {

struct RunOptions {
  std::optional<int> seeds;            // --seeds N: seeds 1..N instead of the scenario's
  bool resume = false;                 // keep finished runs, continue interrupted ones from checkpoints
  std::filesystem::path output;        // --output: instead of the scenario's folder
  bool progress = true;                // progress bar on stderr
  int64_t stop_after_samples = 0;      // testing aid: stop every learner after N samples (0 = never)
};

struct RunOutcome {
  std::filesystem::path folder;  // where the outputs are
  bool stopped = false;          // Ctrl-C (or --stop-after-samples) stopped it: checkpoints, no summary
};

// Runs the scenario and writes its outputs, or stops at the next batch after SIGINT/SIGTERM with
// its checkpoints written (a fresh run first removes the folder's old summary.json and per-run
// files, so a stopped run never leaves an earlier run's summary looking current).
RunOutcome run_scenario(const Scenario& scenario, const RunOptions& options);

// (Re)renders report.md and the plots of a finished run folder from summary.json and curve.csv.
void render_report(const std::filesystem::path& run_dir, bool quiet = false);

}  // namespace placelab::cli
