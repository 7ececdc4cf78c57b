// `placelab run`, `report` and `sweep`: scenario runs and their reports.
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "inputs.h"
#include "placelab/graph/error.h"
#include "placelab/graph/io.h"
#include "run.h"
#include "scenario.h"

namespace placelab::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void print_file(const fs::path& p) {
  std::ifstream in(p);
  std::cout << in.rdbuf();
}

// One child `placelab run` of a sweep; its output goes to a log file.
pid_t spawn_run(const std::string& scenario, const std::optional<int>& seeds, const fs::path& log) {
  std::vector<std::string> args = {"/proc/self/exe", "run", scenario, "--resume", "--quiet"};
  if (seeds) args.insert(args.end(), {"--seeds", std::to_string(*seeds)});
  pid_t pid = fork();
  if (pid < 0) throw Error("sweep: fork failed");
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Set by SIGINT/SIGTERM in a sweep: start no more scenarios, pass the signal on to the running
// workers (which stop at their next batch with a checkpoint) and wait for them.
volatile std::sig_atomic_t g_sweep_stop = 0;
extern "C" void on_sweep_stop(int) { g_sweep_stop = 1; }

// Without SA_RESTART, so that waitpid returns (EINTR) and the stop reaches the workers at once.
void catch_stop_signals() {
  struct sigaction sa = {};
  sa.sa_handler = on_sweep_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::string cell(const json& res) {
  if (!res.contains("mean_s")) return res.value("oom", false) ? "OOM" : "n/a";
  std::string c = fmt::format("{:.4f}", res["mean_s"].get<double>());
  if (res["runs"].size() > 1) c += fmt::format(" ± {:.4f}", res["std_s"].get<double>());
  return c;
}

void run_sweep(const std::vector<std::string>& files, std::optional<int> seeds, int jobs, const std::string& name) {
  if (jobs < 1) throw InputError("--jobs " + std::to_string(jobs) + ": must be >= 1");
  std::vector<Scenario> scenarios;
  for (const auto& f : files) scenarios.push_back(read_scenario(f));  // all validated before anything runs
  const fs::path dir = fs::path("results") / ("sweep-" + name);
  fs::create_directories(dir / "logs");

  std::vector<uint64_t> want;
  if (seeds)
    for (int i = 1; i <= *seeds; ++i) want.push_back(static_cast<uint64_t>(i));
  std::size_t next = 0, running = 0, failed = 0, stopped_runs = 0;
  std::map<pid_t, std::size_t> children;
  catch_stop_signals();
  bool forwarded = false;
  while (next < scenarios.size() || running > 0) {
    while (!g_sweep_stop && running < static_cast<std::size_t>(jobs) && next < scenarios.size()) {
      const Scenario& s = scenarios[next];
      const fs::path summary = s.output / "summary.json";
      bool done = false;
      if (fs::exists(summary)) {
        std::ifstream in(summary);
        json j = json::parse(in, nullptr, false);
        // Finished with these seeds by this scenario as it is now (an edited one runs again, with
        // --resume keeping each run whose own fingerprint still matches).
        done = !j.is_discarded() && j.is_object() &&
               j.value("fingerprint", std::string()) ==
                   summary_fingerprint(scenario_fingerprint(s), s, want.empty() ? s.seeds : want);
      }
      if (done) {
        fmt::print("{:<40} already finished, skipped\n", s.name);
        std::fflush(stdout);  // progress lines reach a log or pipe as they happen
      } else {
        fmt::print("{:<40} started (log: {})\n", s.name, (dir / "logs" / (s.name + ".log")).string());
        std::fflush(stdout);
        children[spawn_run(files[next], seeds, dir / "logs" / (s.name + ".log"))] = next;
        ++running;
      }
      ++next;
    }
    if (running == 0) break;
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (g_sweep_stop && !forwarded) {
      // Ctrl-C in a terminal reaches the workers too; `kill` of the sweep alone does not.
      for (const auto& child : children) kill(child.first, SIGINT);
      forwarded = true;
    }
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    auto it = children.find(pid);
    if (it == children.end()) continue;
    --running;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const bool stopped = WIFEXITED(status) && WEXITSTATUS(status) == kStoppedExitStatus;
    failed += !ok && !stopped;
    stopped_runs += stopped;
    fmt::print("{:<40} {}\n", scenarios[it->second].name,
               ok ? "finished" : stopped ? "stopped (re-run the sweep to resume it)" : "FAILED (see its log)");
    std::fflush(stdout);
    children.erase(it);
  }

  // One table over every scenario: rows are scenarios, columns the algorithms seen anywhere.
  std::vector<std::string> columns;
  std::vector<std::pair<std::string, json>> summaries;
  for (const Scenario& s : scenarios) {
    std::ifstream in(s.output / "summary.json");
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded()) continue;
    for (const json& r : j["results"])
      if (std::find(columns.begin(), columns.end(), r["name"]) == columns.end()) columns.push_back(r["name"]);
    summaries.emplace_back(s.name, j);
  }
  std::ostringstream md, csv;
  md << "# Sweep " << name << "\n\nSeconds per step (simulated), mean ± std over seeds.\n\n| scenario | model | machine |";
  csv << "scenario,model,machine";
  for (const auto& c : columns) md << " " << c << " |", csv << "," << c << "_mean_s," << c << "_std_s";
  md << "\n|---|---|---|";
  for (std::size_t i = 0; i < columns.size(); ++i) md << "---|";
  md << "\n";
  csv << "\n";
  for (const auto& [sname, j] : summaries) {
    md << "| " << sname << " | `" << j["model"].get<std::string>() << "` | " << j["machine"].get<std::string>() << " |";
    csv << sname << ",\"" << j["model"].get<std::string>() << "\"," << j["machine"].get<std::string>();
    for (const auto& c : columns) {
      const json* res = nullptr;
      for (const json& r : j["results"])
        if (r["name"] == c) res = &r;
      md << " " << (res ? cell(*res) : "") << " |";
      csv << "," << (res && res->contains("mean_s") ? fmt::format("{:.9g}", (*res)["mean_s"].get<double>()) : "") << ","
          << (res && res->contains("std_s") ? fmt::format("{:.9g}", (*res)["std_s"].get<double>()) : "");
    }
    md << "\n";
    csv << "\n";
  }
  write_file_atomically(dir / "summary.md", md.str());
  write_file_atomically(dir / "summary.csv", csv.str());
  std::cout << "\n" << md.str() << "\nwritten: " << (dir / "summary.md").string() << ", " << (dir / "summary.csv").string()
            << "\n";
  if (failed) throw Error(std::to_string(failed) + " scenario run(s) failed; their logs are in " + (dir / "logs").string());
  if (g_sweep_stop || stopped_runs) {
    std::fflush(stdout);  // the table first, then why it is partial
    fmt::print(stderr, "sweep stopped: {} scenario(s) stopped, {} not started; the same command resumes it\n",
               stopped_runs, scenarios.size() - next);
    throw Stopped{};
  }
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
    bool resume = false, quiet = false;
    int64_t stop_after = 0;
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
  run->footer(
      "Examples:\n  placelab run scenarios/quickstart.yaml\n"
      "  placelab run scenarios/post-table1-inception-4gpu.yaml --seeds 3\n"
      "  placelab run scenarios/x.yaml --resume        # after Ctrl-C or a crash\n"
      "Outputs: summary.json, curve.csv, best_placement.json (best_grouping.json), timeline.json, report.md, *.png");
  run->callback([ra] {
    Scenario s = read_scenario(ra->scenario);
    RunOptions o;
    if (ra->seeds != 0) o.seeds = ra->seeds;
    o.resume = ra->resume;
    o.output = ra->output;
    o.progress = !ra->quiet;
    o.stop_after_samples = ra->stop_after;
    const RunOutcome outcome = run_scenario(s, o);
    if (outcome.stopped) throw Stopped{};
    const fs::path& out = outcome.folder;
    if (ra->stop_after > 0) return;
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
  };
  auto sa = std::make_shared<SweepArgs>();
  auto* sweep = app.add_subcommand("sweep", "Run many scenarios in parallel worker processes; one summary table");
  sweep->add_option("scenarios", sa->files, "Scenario files")->required();
  sweep->add_option("--seeds", sa->seeds, "Seeds 1..N for every scenario")->check(CLI::Range(1, static_cast<int>(kMaxSeeds)));
  sweep->add_option("--jobs,-j", sa->jobs, "Scenarios run at once")->capture_default_str()->check(CLI::Range(1, 256));
  sweep->add_option("--name", sa->name, "Writes results/sweep-<name>/summary.md and .csv")->capture_default_str();
  sweep->footer("Example:\n  placelab sweep scenarios/post-table1-*.yaml --seeds 3 --jobs 2\n"
                "Finished scenarios are skipped, interrupted ones resume: re-run the same command after a stop.");
  sweep->callback([sa] { run_sweep(sa->files, sa->seeds ? std::optional<int>(sa->seeds) : std::nullopt, sa->jobs, sa->name); });
}

}  // namespace placelab::cli
