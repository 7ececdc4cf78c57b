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

// Runs the scenario and writes its outputs. Returns the output folder.
std::filesystem::path run_scenario(const Scenario& scenario, const RunOptions& options);

// (Re)renders report.md and the plots of a finished run folder from summary.json and curve.csv.
void render_report(const std::filesystem::path& run_dir, bool quiet = false);

}  // namespace placelab::cli
