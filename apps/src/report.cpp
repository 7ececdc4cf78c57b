// report.md and the plots of a run folder, rendered from summary.json (so `placelab report` can
// redo them without re-running anything).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "child_process.h"
#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/core/keys.h"
#include "placelab/core/units.h"
#include "placelab/learners/registry.h"
#include "run.h"

namespace placelab::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string seconds_cell(const json& res) {
  if (!res.contains("mean_s")) {
    for (const json& r : res["runs"])
      if (r.contains("error")) return "n/a";
    return "OOM";
  }
  std::string cell = fmt::format("{:.4f}", res["mean_s"].get<double>());
  if (res["runs"].size() > 1) cell += fmt::format(" ± {:.4f}", res["std_s"].get<double>());
  int ok = res["seeds_ok"].get<int>();
  if (ok < static_cast<int>(res["runs"].size())) cell += fmt::format(" ({} of {} fit)", ok, res["runs"].size());
  return cell;
}

// Why a baseline has no number: OOM on which device by how much, or the error; else what the
// baseline noted about its first run (exact: the solver's status, bound and gap).
std::string note_cell(const json& res) {
  std::string note;
  for (const json& r : res["runs"]) {
    if (r.contains("error")) return r["error"].get<std::string>();
    if (r.value("oom", false) && r.contains("oom_device"))
      return fmt::format("OOM: {} over by {}", r["oom_device"].get<std::string>(),
                         format_bytes(r["oom_excess_bytes"].get<int64_t>()));
    if (note.empty() && r.contains("note")) note = r["note"].get<std::string>();
  }
  return note;
}

// The name of the report's "vs policy gradient" reference ("" when there is none).
std::string policy_gradient_reference(const json& results, const json& figures) {
  for (const bool from_results : {true, false})
    for (const LearnerEntry& e : learner_registry()) {
      if (!e.policy_gradient) continue;
      if (!from_results && figures.contains(e.name)) return e.name;
      if (from_results)
        for (const json& r : results)
          if (r["name"] == e.name && r["kind"] == "learner") return e.name;
    }
  return "";
}

fs::path plot_script() {
  if (const char* env = std::getenv("PLACELAB_PLOT_SCRIPT")) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  fs::path installed = exe.parent_path().parent_path() / "share" / "placelab" / "plot_run.py";
  if (!ec && fs::exists(installed)) return installed;
  return fs::path(PLACELAB_SOURCE_DIR) / "apps" / "plots" / "plot_run.py";
}

// summary.json of a run folder, checked to be one.
json read_summary(const fs::path& dir) {
  const fs::path summary_path = dir / "summary.json";
  std::error_code ec;
  if (!fs::exists(summary_path, ec)) throw InputError(summary_path.string() + ": cannot read (is this a placelab run folder?)");
  const std::string text = read_text_file(summary_path);
  json s;
  try {
    s = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(summary_path.string() + ": not valid JSON: " + e.what());
  }
  if (s.value("format", "") != "placelab-run-1")
    throw InputError(summary_path.string() + ": format = " + s.value("format", "(none)") + ": must be placelab-run-1");
  return s;
}

// The title, description and the settings table: model, machine, grouping, budget.
void settings_section(std::ostream& md, json& s) {
  md << "# " << s["scenario"].get<std::string>() << "\n\n";
  if (!s["description"].get<std::string>().empty()) md << s["description"].get<std::string>() << "\n\n";
  md << "| setting | value |\n|---|---|\n";
  md << "| model | `" << s["model"].get<std::string>() << "` (" << s["ops"] << " ops";
  if (s.contains("parameters")) md << ", " << s["parameters"] << " parameters";
  md << ") |\n";
  md << "| machine | " << s["machine"].get<std::string>() << " (cost model: " << s["cost_model"].get<std::string>()
     << ") |\n";
  // The groups the learners placed, from their runs: a METIS grouping can come back with fewer
  // groups than the scenario asked for, and differs between seeds.
  // Runs since the module grouping say the scenario grouping's size per seed themselves.
  int64_t fewest_groups = 0, most_groups = 0;
  const auto count = [&](int64_t n) {
    fewest_groups = fewest_groups == 0 ? n : std::min(fewest_groups, n);
    most_groups = std::max(most_groups, n);
  };
  if (const json sizes = s.value("grouping_groups", json::array()); !sizes.empty())
    for (const json& n : sizes) count(n.get<int64_t>());
  else
    for (const json& r : s["results"])
      for (const json& run : r.value("runs", json::array()))
        if (run.contains("groups")) count(run["groups"].get<int64_t>());
  md << "| grouping | " << s["grouping"].get<std::string>();
  if (most_groups > 0)
    md << ", " << (fewest_groups == most_groups ? std::to_string(most_groups)
                                                : std::to_string(fewest_groups) + "–" + std::to_string(most_groups))
       << " groups";
  md << "; learners place on " << s["devices"].get<std::string>() << " devices";
  if (const auto names = s.value("learner_devices", std::vector<std::string>{}); !names.empty())
    md << " (" << names.size() << ": " << join_names(names) << ")";
  md << " |\n";
  md << "| budget | ";
  if (const auto skipped = s.value("skipped_learners", std::vector<std::string>{}); !skipped.empty()) {
    md << "baselines only (`placelab run --baselines-only`): the scenario's learners (" << join_names(skipped)
       << ") did not run";
  } else {
    md << s["samples"] << " samples per learner and seed, batches of " << s["batch"];
  }
  md << ", seeds " << s["seeds"].dump() << " |\n\n";
}

// Every baseline and learner against policy gradient, the lower bound and the paper's figures.
// Under grouping "module" every placement above keeps each PyTorch module on one device, so it can
// run; what the same searches and baselines give placing single ops, which PyTorch cannot run, is
// said beside it: the cost of executability.
void executability_note(std::ostream& md, json& s) {
  std::string rows;
  for (const json& r : s["results"]) {
    if (r["kind"] != "baseline") continue;
    double op_level = INFINITY, whole = INFINITY;
    for (const json& run : r["runs"]) {
      if (run.contains("op_level_step_time_s") && run["op_level_step_time_s"].is_number())
        op_level = std::min(op_level, run["op_level_step_time_s"].get<double>());
      if (run.contains("step_time_s") && !run.value("oom", false)) whole = std::min(whole, run["step_time_s"].get<double>());
    }
    if (std::isfinite(op_level))
      rows += fmt::format("| {} | {:.4f} | {} |\n", r["name"].get<std::string>(), op_level,
                          std::isfinite(whole) ? fmt::format("{:.4f}", whole) : std::string("OOM"));
  }
  bool op_level_learners = false;
  for (const json& r : s["results"]) op_level_learners = op_level_learners || r["kind"] == "op-level";
  if (rows.empty() && !op_level_learners) return;
  md << "\nEvery placement above keeps each PyTorch module on one device (grouping `module`), so "
        "`placelab.torch.place` can run it. Rows of kind `op-level` are the same learners placing single ops, "
        "which PyTorch cannot run: the gap to them is what executability costs (docs/pytorch.md).\n";
  if (!rows.empty())
    md << "\nBaselines placing single ops, before they were projected onto modules (each on the device most of "
          "its ops are on):\n\n| baseline | op-level s (cannot run) | projected onto modules s |\n|---|---|---|\n"
       << rows;
}

void step_time_section(std::ostream& md, json& s) {
  // Policy gradient is the reference the papers measure reductions against: the first learner, in
  // registry order, marked as policy gradient that this run has results for (else that the paper
  // has a figure for, so the paper's column still compares).
  const json paper = s.value("paper", json::object());
  const json figures = paper.value("figures", json::object());
  const std::string reference = policy_gradient_reference(s["results"], figures);
  std::optional<double> pg;
  for (const json& r : s["results"])
    if (r["name"] == reference && r["kind"] == "learner" && r.contains("mean_s")) pg = r["mean_s"].get<double>();
  std::optional<double> paper_pg;
  if (figures.contains(reference) && figures[reference].is_number()) paper_pg = figures[reference].get<double>();

  md << "## Step time (seconds per training step, simulated)\n\n";
  // Runs written before the lower bound existed have none: no column then.
  const bool bounded = s.contains("lower_bound");
  md << "| placement | kind | ours: mean ± std over seeds | best seed |" << (bounded ? " best vs bound |" : "")
     << " vs policy gradient | paper | paper vs PG | note |\n";
  md << "|---|---|---|---|" << (bounded ? "---|" : "") << "---|---|---|---|\n";
  for (const json& r : s["results"]) {
    const std::string name = r["name"];
    std::string best = r.contains("best_s") ? fmt::format("{:.4f}", r["best_s"].get<double>()) : "";
    std::string red;
    if (pg && r.contains("mean_s") && name != reference)
      red = fmt::format("{:+.1f} %", 100 * (r["mean_s"].get<double>() - *pg) / *pg);
    std::string pap, pap_red;
    if (figures.contains(name)) {
      const json& f = figures[name];
      pap = f.is_string() ? f.get<std::string>() : fmt::format("{:.3f}", f.get<double>());
      if (paper_pg && f.is_number() && name != reference)
        pap_red = fmt::format("{:+.1f} %", 100 * (f.get<double>() - *paper_pg) / *paper_pg);
    }
    std::string gap;
    if (bounded && r.contains("best_gap_to_bound")) gap = fmt::format("{:+.1f} %", 100 * r["best_gap_to_bound"].get<double>());
    md << "| " << name << " | " << r["kind"].get<std::string>() << " | " << seconds_cell(r) << " | " << best << " | "
       << (bounded ? gap + " | " : "") << red << " | " << pap << " | " << pap_red << " | " << note_cell(r) << " |\n";
  }
  executability_note(md, s);
  if (bounded) {
    const json& b = s["lower_bound"];
    md << "\nNo placement of this graph on this machine can take less than **"
       << fmt::format("{:.4f}", b["step_s"].get<double>()) << " s/step**: the longer of the critical path with every op "
       << "on its fastest device and free transfers (" << fmt::format("{:.4f}", b["critical_path_s"].get<double>())
       << " s) and all ops' fastest times shared perfectly over the " << b["slots"] << " full-speed slots ("
       << fmt::format("{:.4f}", b["work_s"].get<double>()) << " s). \"best vs bound\" is each best seed's distance "
       << "above it (docs/simulator.md, \"Lower bounds\").";
    if (!b["memory_feasible"].get<bool>())
      md << " The variables and optimizer slots alone (" << format_bytes(b["persistent_bytes"].get<int64_t>())
         << ") exceed the devices' memory (" << format_bytes(b["memory_bytes"].get<int64_t>()) << "): every placement is OOM.";
    md << "\n";
  }
  if (!paper.empty() && !paper.value("source", "").empty())
    md << "\nPaper figures: " << paper["source"].get<std::string>() << ".\n";
  if (!paper.value("notes", "").empty())
    md << "\n### Where the simulation differs from the paper\n\n" << paper["notes"].get<std::string>() << "\n";
}

// The best placement found and, from hierarchical and eagle, its learned grouping's largest groups
// (all of them, every op's, in best_grouping.json).
void best_section(std::ostream& md, json& s) {
  if (!s.contains("best")) return;
  md << "\nBest placement found: **" << s["best"]["name"].get<std::string>() << "** (seed " << s["best"]["seed"]
     << ") at " << fmt::format("{:.4f}", s["best"]["step_time_s"].get<double>())
     << " s/step — `best_placement.json`, its simulated step in `timeline.json` (open in https://ui.perfetto.dev).\n";
  if (!s["best"].contains("learned_grouping")) return;
  const json& lg = s["best"]["learned_grouping"];
  md << "\nIts learned grouping: " << lg["non_empty"].get<std::size_t>()
     << " non-empty groups (`best_grouping.json` has every op's). The largest:\n\n"
     << "| group (deepest scope of 80 % of its ops) | ops | GFLOP | device |\n|---|---|---|---|\n";
  std::size_t shown = 0;
  for (const json& g : lg["groups"]) {
    if (shown++ == 12) break;
    md << "| " << g["name"].get<std::string>() << " | " << g["ops"].get<std::size_t>() << " | "
       << fmt::format("{:.2f}", g["gflops"].get<double>()) << " | " << g["device"].get<std::string>() << " |\n";
  }
}

// The verification records: simulated against measured, and with `verify: {in_situ: true}` the
// prediction with the kernels re-timed during the measurement (two more columns).
void verification_section(std::ostream& md, json& s) {
  if (s["verifications"].empty()) return;
  bool in_situ = false;
  for (const json& v : s["verifications"]) in_situ = in_situ || v.contains("in_situ_predicted_s");
  const auto error = [](const json& predicted, const json& measured) {
    return measured.is_null() || predicted.is_null()
               ? std::string()
               : fmt::format("{:+.1f} %", 100 * (predicted.get<double>() - measured.get<double>()) / measured.get<double>());
  };
  md << "\n## Verification on hardware (best placement so far, simulated vs measured)\n\n";
  md << "| learner | seed | sample | simulated s | measured s | error |"
     << (in_situ ? " simulated, kernels re-timed in situ | error |" : "") << " measured by |\n|---|---|---|---|---|---|"
     << (in_situ ? "---|---|" : "") << "---|\n";
  for (const json& v : s["verifications"]) {
    std::string meas = v["measured_s"].is_null() ? "OOM" : fmt::format("{:.4f}", v["measured_s"].get<double>());
    md << "| " << v["algorithm"].get<std::string>() << " | " << v["seed"] << " | " << v["sample"] << " | "
       << fmt::format("{:.4f}", v["predicted_s"].get<double>()) << " | " << meas << " | "
       << error(v["predicted_s"], v["measured_s"]) << " | ";
    if (in_situ) {
      const json p = v.value("in_situ_predicted_s", json(nullptr));
      md << (p.is_null() ? "" : fmt::format("{:.4f}", p.get<double>())) << " | " << error(p, v["measured_s"]) << " | ";
    }
    md << v["source"].get<std::string>() << " |\n";
  }
  if (in_situ)
    md << "\nThe first prediction uses the machine file's kernel times, as training did; the second re-times "
          "the graph's kernels in situ around each measurement (`verify: {in_situ: true}`), so their gap is "
          "the machine's drift since calibration rather than the cost model's error.\n";
}

// Runs the plot script on the run folder, its output on stderr (or nowhere when quiet), with
// matplotlib's file backend; its exit status, or -1 when it could not start.
int run_plot_script(const fs::path& script, const fs::path& dir, bool quiet) {
  return run_child({python_interpreter(), script.string(), dir.string()}, {"MPLBACKEND=Agg"}, quiet);
}

// The plots, made by the plot script: a missing matplotlib is reported, never fatal (the numbers
// above are the result).
void plots_section(std::ostream& md, const fs::path& dir, bool quiet) {
  const fs::path script = plot_script();
  const int rc = fs::exists(script) ? run_plot_script(script, dir, quiet) : -1;
  md << "\n## Plots\n\n";
  if (rc == 0) {
    if (fs::exists(dir / "learning_curves.png")) md << "![learning curves](learning_curves.png)\n\n";
    if (fs::exists(dir / "timeline.png")) md << "![timeline of the best placement](timeline.png)\n";
    return;
  }
  md << "Plots were not made (" << (fs::exists(script) ? "the plot script failed" : "plot script not found at " + script.string())
     << "); install python3-matplotlib and run `placelab report " << dir.string() << "`.\n";
  if (!quiet) fmt::print(stderr, "warning: plots not made; see {}\n", (dir / "report.md").string());
}

}  // namespace

void render_report(const fs::path& dir, bool quiet) {
  json s = read_summary(dir);  // not const: a missing key reads as null, then fails to convert (an error, not UB)
  std::ostringstream md;
  try {
    settings_section(md, s);
    step_time_section(md, s);
    best_section(md, s);
    verification_section(md, s);
  } catch (const json::exception& e) {
    // A summary.json edited by hand, damaged, or written by another version: the file, not a crash.
    throw InputError((dir / "summary.json").string() + ": not a run summary placelab can read (" + e.what() + ")");
  }
  plots_section(md, dir, quiet);
  write_file_atomically(dir / "report.md", md.str());
}

}  // namespace placelab::cli
