// `placelab run`, `report` and `sweep`: scenario runs and their reports.
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "distributed.h"
#include "inputs.h"
#include "placelab/core/error.h"
#include "placelab/graph/io.h"
#include "run.h"
#include "scenario.h"
#include "sweep.h"

namespace placelab::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void print_file(const fs::path& p) {
  std::ifstream in(p);
  std::cout << in.rdbuf();
}

}  // namespace

// `placelab check`: everything `run` would refuse, without running — the scenario's keys and
// learners' options (read_scenario), its model or graph (built or read) and its machine (loaded).
// Every file is checked; errors go to standard error and the exit status is 2 if any failed.
void check_scenarios(const std::vector<std::string>& files) {
  std::size_t failed = 0;
  for (const std::string& f : files) {
    try {
      const Scenario s = read_scenario(f);
      const GraphSource graph = load_graph_source(s.graph.string(), s.model);
      const auto machine = load_machine_source(s.machine);
      std::cout << fmt::format("ok  {}: {} ({} ops) on {}, {} learner(s), {} baseline(s), {} seed(s)\n", f, graph.label,
                               graph.graph.num_ops(), machine->machine.name, s.learners.size(), s.baselines.size(),
                               s.seeds.size());
    } catch (const InputError& e) {
      // Errors of the model or machine a file names come without the file: say which one.
      ++failed;
      const std::string what = e.what();
      std::cerr << "placelab: error: " << (what.starts_with(f) ? "" : f + ": ") << what << "\n";
    }
  }
  std::cout.flush();
  if (failed > 0)
    throw InputError(std::to_string(failed) + " of " + std::to_string(files.size()) + " scenario files failed the check");
}

void add_run_commands(CLI::App& app) {
  struct RunArgs {
    std::string scenario, output;
    int seeds = 0;
    bool resume = false, quiet = false, baselines_only = false;
    int64_t stop_after = 0;
    uint64_t only_seed = 0;
    int verify_rank = 0;
  };
  auto ra = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand("run", "Run a scenario: baselines and learners, with report.md, curves and plots");
  run->add_option("scenario", ra->scenario, "Scenario YAML file (docs/scenarios.md)")->required();
  run->add_option("--seeds", ra->seeds, "Run seeds 1..N instead of the scenario's seeds")
      ->check(CLI::Range(1, static_cast<int>(kMaxSeeds)));
  run->add_flag("--resume", ra->resume, "Keep finished runs and continue interrupted ones from their checkpoints");
  run->add_option("--output,-o", ra->output, "Write results here instead of the scenario's output folder");
  run->add_flag("--quiet,-q", ra->quiet, "No progress display and no report on standard output");
  run->add_option("--stop-after-samples", ra->stop_after,
                  "Stop every learner after N samples as if interrupted (to test --resume)")
      ->group("");
  run->add_option("--only-seed", ra->only_seed,
                  "Run this seed's learners alone and write no summary (the unit a distributed sweep hands out)")
      ->check(CLI::Range(uint64_t{1}, std::numeric_limits<uint64_t>::max()))
      ->group("");
  run->add_flag("--baselines-only", ra->baselines_only,
                "Run the baselines alone, none of the scenario's learners: every baseline and the lower bound in "
                "seconds where the learners take hours (report.md names the learners left out)");
  run->add_option("--verify-rank", ra->verify_rank,
                  "Under mpirun: the rank whose node runs the scenario's verifications (docs/distributed.md)")
      ->capture_default_str();
  run->footer(
      "Examples:\n  placelab run scenarios/quickstart.yaml\n"
      "  placelab run scenarios/post-table1-inception-4gpu.yaml --seeds 3\n"
      "  placelab run scenarios/eagle-table4-bert.yaml --seeds 1 --baselines-only   # a first look in seconds\n"
      "  placelab run scenarios/x.yaml --resume        # after Ctrl-C or a crash\n"
      "  mpirun -n 8 placelab run scenarios/x.yaml     # each batch of samples simulated on 8 ranks\n"
      "Outputs: summary.json, curve.csv, best_placement.json (best_grouping.json), timeline.json, report.md, *.png");
  run->callback([ra] {
    Scenario s = read_scenario(ra->scenario);
    if (ra->baselines_only && ra->only_seed != 0)
      throw InputError("--baselines-only runs no learner and --only-seed one seed's learners alone: give one of them");
    if (ra->baselines_only) {
      for (const LearnerSpec& l : s.learners) s.skipped_learners.push_back(l.config.name);
      s.learners.clear();
    }
    RunOptions o;
    if (ra->seeds != 0) o.seeds = ra->seeds;
    o.resume = ra->resume;
    o.output = ra->output;
    o.progress = !ra->quiet;
    o.stop_after_samples = ra->stop_after;
    if (ra->only_seed != 0) o.only_seed = ra->only_seed;
    if (under_mpi_launcher() && mpi_world().size > 1) {
      const RunOutcome distributed = run_scenario_distributed(s, o, ra->verify_rank);
      if (mpi_world().rank != 0) return;  // rank 0 reports
      if (distributed.stopped) throw Stopped{};
      if (ra->stop_after > 0 || ra->only_seed != 0 || ra->quiet) return;
      std::cout << "\n";
      print_file(distributed.folder / "report.md");
      std::cout << "\nresults in " << distributed.folder.string() << "/\n";
      return;
    }
    const RunOutcome outcome = run_scenario(s, o);
    if (outcome.stopped) throw Stopped{};
    const fs::path& out = outcome.folder;
    if (ra->stop_after > 0 || ra->only_seed != 0) return;
    if (!ra->quiet) {
      std::cout << "\n";
      print_file(out / "report.md");
      std::cout << "\nresults in " << out.string() << "/\n";
    }
  });

  auto files = std::make_shared<std::vector<std::string>>();
  auto* check = app.add_subcommand("check", "Check scenario files without running them: keys, options, model and machine");
  check->add_option("scenarios", *files, "Scenario files")->required();
  check->footer("Example:\n  placelab check scenarios/*.yaml\n"
                "Reads each file as `run` would, builds its model and loads its machine; prints one line per file, "
                "every error with its file and line, and exits 2 if any file fails.");
  check->callback([files] { check_scenarios(*files); });

  auto dir = std::make_shared<std::string>();
  auto* report = app.add_subcommand("report", "Re-render report.md and the plots of a finished run folder");
  report->add_option("run_folder", *dir, "e.g. results/post-table1-inception-4gpu")->required();
  report->callback([dir] {
    render_report(*dir);
    print_file(fs::path(*dir) / "report.md");
  });

  struct SweepArgs {
    std::vector<std::string> files;
    int seeds = 0, jobs = 1;
    std::string name = "sweep";
    double rank_timeout_s = 60;
  };
  auto sa = std::make_shared<SweepArgs>();
  auto* sweep = app.add_subcommand("sweep", "Run many scenarios in parallel worker processes; one summary table");
  sweep->add_option("scenarios", sa->files, "Scenario files")->required();
  sweep->add_option("--seeds", sa->seeds, "Seeds 1..N for every scenario")->check(CLI::Range(1, static_cast<int>(kMaxSeeds)));
  sweep->add_option("--jobs,-j", sa->jobs, "Scenarios run at once")->capture_default_str()->check(CLI::Range(1, 256));
  sweep->add_option("--name", sa->name, "Writes results/sweep-<name>/summary.md and .csv")->capture_default_str();
  sweep->add_option("--rank-timeout", sa->rank_timeout_s,
                    "Under mpirun: seconds a rank holding runs may stay silent before its runs go to other ranks")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  sweep->footer("Examples:\n  placelab sweep scenarios/post-table1-*.yaml --seeds 3 --jobs 2\n"
                "  mpirun -n 64 placelab sweep scenarios/post-table1-*.yaml --seeds 10   # scenario x seed runs on 64 ranks\n"
                "Finished scenarios are skipped, interrupted ones resume: re-run the same command after a stop.");
  sweep->callback([sa] {
    if (!std::isfinite(sa->rank_timeout_s))  // CLI11's range lets NaN through
      throw InputError("--rank-timeout " + std::to_string(sa->rank_timeout_s) + ": must be a number of seconds in [1, 86400]");
    const std::optional<int> seeds = sa->seeds ? std::optional<int>(sa->seeds) : std::nullopt;
    if (under_mpi_launcher())
      run_sweep_distributed({sa->files, seeds, sa->jobs, sa->name, sa->rank_timeout_s});
    else
      run_sweep(sa->files, seeds, sa->jobs, sa->name);
  });
}

}  // namespace placelab::cli
