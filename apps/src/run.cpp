#include "run.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "inputs.h"
#include "sweep.h"
#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/graph/io.h"
#include "placelab/learners/baselines.h"
#include "placelab/learners/grouper.h"
#include "placelab/learners/grouping.h"
#include "placelab/learners/problem.h"
#include "placelab/learners/registry.h"
#include "placelab/learners/trainer.h"
#include "placelab/profiler/cpu_executor.h"
#include "placelab/profiler/verify.h"
#include "placelab/sim/bounds.h"
#include "placelab/sim/sim_environment.h"
#include "placelab/sim/simulator.h"
#include "placelab/sim/trace.h"
#include "progress.h"
#include "torch_backend.h"

namespace placelab::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Grouping make_scenario_grouping(const Scenario& s, const OpGraph& g, uint64_t seed) {
  GroupingOptions options;
  options.num_groups = s.metis_groups;
  options.seed = static_cast<int>(seed % 1000000);
  options.module_depth = s.module_depth;
  return make_grouping(g, s.grouping, options);
}

// The learned grouping of the best placement (hierarchical, eagle), ops and all: its non-empty
// groups, largest first, each named by the deepest scope holding 80 % of its ops (problem.h) with
// its op count, FLOPs and device. `learned` maps the scenario's groups (`units`) to learned groups.
json learned_grouping_json(const OpGraph& g, const Grouping& units, const Placement& placement,
                           std::span<const uint32_t> learned, const Machine& machine) {
  const Grouping ops = compose_grouping(units, learned);
  const PlacementProblem p = describe_problem(g, ops);
  const std::vector<std::vector<OpId>> members = ops.members();
  json groups = json::array();
  std::vector<std::size_t> order(ops.num_groups());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p.group_size[a] > p.group_size[b]; });
  for (std::size_t k : order)
    groups.push_back({{"name", p.group_names[k]},
                      {"ops", p.group_size[k]},
                      {"gflops", p.group_flops[k] / 1e9},
                      {"device", machine.devices[placement[members[k].front()]].name}});
  return {{"non_empty", ops.num_groups()}, {"groups", groups}, {"group_of_op", ops.group_of_op()}};
}

// A finished run's record kept by --resume, or why it cannot be: unreadable, not JSON, another
// seed's, or not of the shape this version writes (every field the outputs read is checked here,
// so a damaged file is run again rather than failing later).
std::optional<json> kept_run_record(const fs::path& file, uint64_t seed, const std::string& fingerprint, std::string& why) {
  json r;
  try {
    r = json::parse(read_text_file(file));
  } catch (const std::exception& e) {
    why = e.what();
    return std::nullopt;
  }
  const auto is_time = [](const json& x) { return x.is_null() || x.is_number(); };
  const auto fail = [&](const char* what) {
    why = what;
    return std::nullopt;
  };
  if (!r.is_object() || !r.contains("seed") || !r["seed"].is_number_unsigned() || r["seed"].get<uint64_t>() != seed)
    return fail("not this seed's record");
  if (!r.contains("fingerprint") || !r["fingerprint"].is_string())
    return fail("written without a fingerprint, by an older placelab");
  if (r["fingerprint"] != fingerprint) return fail("made by another scenario, or by this one before an edit");
  for (const char* key : {"status", "message"})
    if (!r.contains(key) || !r[key].is_string()) return fail("no status");
  for (const char* key : {"samples", "groups", "best_sample"})
    if (!r.contains(key) || !r[key].is_number_integer()) return fail("no sample counts");
  if (!r.contains("best_s") || !is_time(r["best_s"]) || !r.contains("best_placement") || !r["best_placement"].is_array())
    return fail("no best placement");
  if (!r.contains("curve") || !r["curve"].is_array()) return fail("no curve");
  for (const json& c : r["curve"])
    if (!c.is_array() || c.size() < 3 || !c[0].is_number_integer() || !is_time(c[1]) || !is_time(c[2]) ||
        (c.size() > 3 && !c[3].is_null() && !c[3].is_number_unsigned()))
      return fail("a malformed curve row");
  if (!r.contains("verifications") || !r["verifications"].is_array()) return fail("no verifications");
  for (const json& v : r["verifications"])
    if (!v.is_object() || !v.contains("sample") || !v["sample"].is_number_integer() || !v.contains("predicted_s") ||
        !v["predicted_s"].is_number() || !v.contains("measured_s") || !is_time(v["measured_s"]) || !v.contains("source") ||
        !v["source"].is_string() || (v.contains("in_situ_predicted_s") && !v["in_situ_predicted_s"].is_number()))
      return fail("a malformed verification");
  return r;
}

// Set by SIGINT/SIGTERM: the trainer stops at the next batch and the run can be resumed.
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) { g_interrupted = 1; }

// Reports training progress on a ProgressBar; stops on Ctrl-C or after a sample limit (for tests).
class ProgressObserver : public TrainerObserver {
 public:
  ProgressObserver(ProgressBar& bar, int64_t stop_after) : bar_(bar), stop_after_(stop_after) {}
  void on_batch(const TrainerProgress& p) override {
    bar_.update(p.samples, p.best_s);
    samples_ = p.samples;
  }
  bool stop_requested() override { return g_interrupted != 0 || (stop_after_ > 0 && samples_ >= stop_after_); }

 private:
  ProgressBar& bar_;
  int64_t stop_after_;
  int64_t samples_ = 0;
};

json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

// Mean and sample standard deviation of the finite values; nullopt when there are none.
struct Stats {
  double mean = 0, std = 0, best = 0;
  int n = 0;
};
std::optional<Stats> stats_of(const std::vector<double>& xs) {
  std::vector<double> v;
  for (double x : xs)
    if (std::isfinite(x)) v.push_back(x);
  if (v.empty()) return std::nullopt;
  Stats s;
  s.n = static_cast<int>(v.size());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / s.n;
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.std = s.n > 1 ? std::sqrt(ss / (s.n - 1)) : 0;
  s.best = *std::min_element(v.begin(), v.end());
  return s;
}

}  // namespace

std::unique_ptr<Environment> make_verify_environment(const Scenario& s, const OpGraph& g, const MachineSource& ms) {
  if (s.verify.backend == "torch")
    return make_torch_verify_environment(g, ms.machine, {.model = s.verify.torch_model,
                                                         .args = split_words(s.verify.torch_args),
                                                         .steps = s.verify.steps});
  if (s.verify.backend != "cpu") return nullptr;
  const Machine& machine = ms.machine;
  CpuExecutorOptions eo;
  eo.steps = s.verify.steps;
  if (ms.calibration) {
    CalibratedMachine cm{machine, *ms.calibration};
    eo.device_cores = device_cores(cm);
  }
  if (s.verify.in_situ) {
    if (!ms.calibration || eo.device_cores.empty())
      throw InputError(s.file.string() + ":" + std::to_string(s.verify.line) + ": verify.in_situ: machine " + s.machine +
                       " has no device cores; give a machine file written by `placelab calibrate --backend cpu`");
    return std::make_unique<InSituVerifyEnvironment>(g, machine, *ms.calibration, eo, s.verify.rounds);
  }
  return std::make_unique<CpuExecutorEnvironment>(g, machine, eo);
}

namespace {

// The seeds a run covers: the scenario's, 1..N under --seeds N, or the one seed a sweep hands out.
std::vector<uint64_t> seeds_to_run(const Scenario& s, const RunOptions& opt) {
  if (opt.only_seed) return {*opt.only_seed};
  return sweep_seeds(s, opt.seeds);
}

// A finished training run as its run record (runs/<learner>-seed<N>.json): what summary.json,
// curve.csv and --resume read back.
json run_record(const TrainSummary& t, uint64_t seed, const std::string& fingerprint, std::size_t groups) {
  json r = {{"seed", seed},
            {"fingerprint", fingerprint},
            {"status", status_name(t.status)},
            {"message", t.message},
            {"samples", t.samples},
            {"groups", groups},
            {"best_s", number_or_null(t.best_step_time_s)},
            {"best_sample", t.best_sample},
            {"best_placement", t.best_placement}};
  if (!t.best_learned_grouping.empty()) {
    r["best_grouping"] = t.best_learned_grouping;
    r["learned_groups"] = t.curve.empty() ? 0u : t.curve[static_cast<std::size_t>(t.best_sample - 1)].groups;
  }
  json curve_rows = json::array();
  for (const CurvePoint& c : t.curve)
    curve_rows.push_back({c.sample, c.oom ? json(nullptr) : json(c.step_time_s), number_or_null(c.best_s),
                          c.groups > 0 ? json(c.groups) : json(nullptr)});
  r["curve"] = curve_rows;
  json ver = json::array();
  for (const VerifyRecord& v : t.verifications) {
    ver.push_back({{"sample", v.sample},
                   {"predicted_s", v.predicted_s},
                   {"measured_s", v.measured_oom ? json(nullptr) : json(v.measured_s)},
                   {"source", v.source}});
    if (v.in_situ_predicted_s) ver.back()["in_situ_predicted_s"] = *v.in_situ_predicted_s;
  }
  r["verifications"] = ver;
  return r;
}

// One scenario's run once its output folder is locked: the graph, machine and simulator its steps
// share, and what they gather for the outputs — the results per algorithm, curve.csv's rows, the
// verifications and the best placement found.
class ScenarioRunner {
 public:
  ScenarioRunner(const Scenario& s, const RunOptions& opt, std::vector<uint64_t> seeds, fs::path out, bool resume);
  // Baselines, then every learner's seeds; false when a learner was stopped (its checkpoint holds it).
  bool run();
  // summary.json (with the aggregates over seeds and the lower bound), curve.csv and the best
  // placement's files.
  void write_outputs();

 private:
  const Grouping& grouping_of(uint64_t seed);
  // Whether every placement must keep each group on one device: grouping "module", whose groups
  // are PyTorch modules, which PyTorch cannot split (docs/pytorch.md).
  bool keeps_groups_whole() const { return s_.grouping == "module"; }
  void consider(double t, const std::string& name, uint64_t seed, const Placement& p, std::vector<uint32_t> learned = {});
  bool run_baselines();  // false: stopped by a signal
  // One learner's record for one seed: kept from an earlier run on --resume, or trained now;
  // nullopt when training was stopped.
  // `op_level`: the learner's twin that places single ops (grouping none), run beside a module
  // grouping to show what executability costs.
  std::optional<json> learner_record(const LearnerSpec& ls, uint64_t seed, bool op_level);
  // `tag` (<learner>-seed<N>) names the run in messages and in its files' names.
  std::optional<json> train_seed(const LearnerSpec& ls, uint64_t seed, bool op_level, const std::string& tag,
                                 const std::string& fingerprint, const fs::path& checkpoint_path, const fs::path& run_file);
  // The curve rows, verifications and best of a learner's record; its brief (no curve or
  // placement) goes to summary.json's runs.
  void gather(const LearnerSpec& ls, uint64_t seed, const json& r, json& runs);
  void aggregate_over_seeds();
  json summary() const;

  Scenario s_;  // a copy: its grouping is decided once the graph is read (default_grouping)
  const RunOptions& opt_;
  const std::vector<uint64_t> seeds_;
  const fs::path out_;
  const bool resume_;
  GraphSource src_;
  std::unique_ptr<MachineSource> ms_;
  Simulator sim_;  // one thread: the sweep runs scenarios side by side instead
  std::unique_ptr<Environment> sample_env_, verify_env_;
  SearchSpace space_;
  // What determines the learners' results, read and hashed once (a graph file's content among it).
  std::string scenario_print_;

  json results_ = json::array(), verifications_ = json::array();
  std::string curve_ =
      "algorithm,seed,sample,step_time_s,oom,best_s,verify_predicted_s,verify_measured_s,verify_in_situ_predicted_s,"
      "groups\n";
  struct Best {
    double time = INFINITY;
    std::string name;
    uint64_t seed = 0;
    Placement placement;
    std::vector<uint32_t> learned_grouping;  // scenario group → learned group, for hierarchical and eagle
  } best_;
  // The baselines that fit, per seed: starts for search learners (LearnerContext::best_baseline).
  std::map<uint64_t, std::vector<Placement>> baseline_placements_;
  std::map<uint64_t, std::vector<Placement>> op_level_baselines_;  // the same before projection (op-level twins' starts)
  // The scenario's grouping of each seed, made once: baselines that place groups (exact) and every
  // learner of that seed use it.
  std::map<uint64_t, Grouping> groupings_;
};

ScenarioRunner::ScenarioRunner(const Scenario& s, const RunOptions& opt, std::vector<uint64_t> seeds, fs::path out,
                               bool resume)
    : s_(s),
      opt_(opt),
      seeds_(std::move(seeds)),
      out_(std::move(out)),
      resume_(resume),
      src_(load_graph_source(s.graph.string(), s.model)),
      ms_(load_machine_source(s.machine)),
      sim_(src_.graph, *ms_->cost) {
  const Machine& machine = ms_->machine;
  if (s_.grouping.empty()) s_.grouping = default_grouping(src_.graph);
  if (s_.module_depth != 0 && s_.grouping != "module")
    throw InputError(s.file.string() + ": module_depth: only with `grouping: module` (the graph names no module)");
  sample_env_ = opt.sample_environment ? opt.sample_environment(sim_) : std::make_unique<SimEnvironment>(sim_, 1);
  verify_env_ = opt.verify_environment ? opt.verify_environment() : make_verify_environment(s, src_.graph, *ms_);
  space_.devices = learner_devices(s, machine);
  if (opt.progress)
    fmt::print(stderr, "{}: {} ({} ops) on {} [{}], {} seed{}, {} samples per learner\n", s.name, src_.label,
               src_.graph.num_ops(), machine.name, ms_->cost->describe(), seeds_.size(), seeds_.size() == 1 ? "" : "s",
               s.samples);
}

const Grouping& ScenarioRunner::grouping_of(uint64_t seed) {
  auto it = groupings_.find(seed);
  if (it == groupings_.end()) it = groupings_.emplace(seed, make_scenario_grouping(s_, src_.graph, seed)).first;
  return it->second;
}

void ScenarioRunner::consider(double t, const std::string& name, uint64_t seed, const Placement& p,
                              std::vector<uint32_t> learned) {
  if (std::isfinite(t) && t < best_.time) best_ = {t, name, seed, p, std::move(learned)};
}

bool ScenarioRunner::run() {
  if (!run_baselines()) return false;
  scenario_print_ = scenario_fingerprint(s_);
  for (const LearnerSpec& ls : s_.learners) {
    json runs = json::array();
    for (uint64_t seed : seeds_) {
      const std::optional<json> r = learner_record(ls, seed, false);
      if (!r) return false;
      gather(ls, seed, *r, runs);
    }
    results_.push_back({{"name", ls.config.name}, {"kind", "learner"}, {"runs", runs}});
  }
  // What each learner finds placing single ops, which PyTorch cannot run: the cost of executability
  // (reported, never the best placement).
  if (keeps_groups_whole() && s_.op_level)
    for (const LearnerSpec& ls : s_.learners) {
      json runs = json::array();
      for (uint64_t seed : seeds_) {
        std::optional<json> r = learner_record(ls, seed, true);
        if (!r) return false;
        r->erase("curve");
        r->erase("best_placement");
        r->erase("best_grouping");
        r->erase("verifications");
        runs.push_back(*r);
      }
      results_.push_back({{"name", ls.config.name + " (op-level)"}, {"kind", "op-level"}, {"runs", runs}});
    }
  return true;
}

// Baselines: simulated once per seed (the randomised ones differ by seed). Under a grouping whose
// groups must stay whole (PyTorch modules) each is projected onto the groups — each on the device
// most of its ops are on — so that what it reports can run; its op-level step is kept beside it.
bool ScenarioRunner::run_baselines() {
  const Machine& machine = ms_->machine;
  std::vector<DeviceId> all_devices(machine.num_devices());
  std::iota(all_devices.begin(), all_devices.end(), DeviceId{0});
  for (const std::string& b : s_.baselines) {
    json runs = json::array();
    for (uint64_t seed : seeds_) {
      // Baselines keep no checkpoint (a resumed run computes them again), so a stop may come
      // between any two: an exact solve or a grouping per seed adds up over a thousand seeds.
      if (g_interrupted) {
        fmt::print(stderr, "stopped during the baselines ({} at seed {}); continue with --resume\n", b, seed);
        return false;
      }
      json r = {{"seed", seed}};
      try {
        std::string note;
        const Grouping& grouping = grouping_of(seed);
        Placement p = resolve_placement(b, src_, *ms_, seed, &grouping, &note);
        if (!note.empty()) r["note"] = note;
        bool projected = false;
        if (keeps_groups_whole()) {
          Placement whole = grouping.expand(grouping.majority(p, all_devices));
          // CPU-only ops stay where the baseline put them: the simulator keeps them on a CPU anyway,
          // and placelab.torch.place runs the input pipeline on the host whatever the model's device.
          for (OpId op = 0; op < src_.graph.num_ops(); ++op)
            if (src_.graph.op(op).cpu_only) whole[op] = p[op];
          if (whole != p) {
            const SimResult op_level = sim_.simulate(p);
            r["op_level_step_time_s"] = op_level.oom ? json(nullptr) : json(op_level.step_time_s);
            if (!op_level.oom) op_level_baselines_[seed].push_back(p);
            p = std::move(whole);
            projected = true;
          }
        }
        SimResult res = sim_.simulate(p);
        r["step_time_s"] = res.step_time_s;
        r["oom"] = res.oom;
        if (res.oom) {
          r["oom_device"] = machine.devices[res.oom_device].name;
          r["oom_excess_bytes"] = res.oom_excess_bytes;
        } else {
          consider(res.step_time_s, b, seed, p);
          if (!projected) op_level_baselines_[seed].push_back(p);
          baseline_placements_[seed].push_back(p);
        }
      } catch (const InputError& e) {
        r["error"] = e.what();  // e.g. expert on a graph file: reported, not fatal
      }
      runs.push_back(r);
    }
    results_.push_back({{"name", b}, {"kind", "baseline"}, {"runs", runs}});
  }
  return true;
}

std::optional<json> ScenarioRunner::learner_record(const LearnerSpec& ls, uint64_t seed, bool op_level) {
  const std::string tag = fmt::format("{}{}-seed{}", ls.config.name, op_level ? "-oplevel" : "", seed);
  const fs::path run_file = out_ / "runs" / (tag + ".json");
  const std::string fingerprint = run_fingerprint(scenario_print_ + (op_level ? "|op-level" : ""), ls, seed);
  // The checkpoint's name carries the run's fingerprint: one left by another scenario, or by
  // this one before an edit, is not resumed from but removed, with a message.
  const fs::path checkpoint_path = out_ / "runs" / (tag + "." + fingerprint + ".checkpoint.json");
  for (const auto& e : fs::directory_iterator(out_ / "runs")) {
    const std::string file = e.path().filename().string();
    const bool ours = e.path() == checkpoint_path || e.path() == checkpoint_curve_path(checkpoint_path);
    if (file.starts_with(tag + ".") && (file.ends_with(".checkpoint.json") || file.ends_with(".checkpoint.curve.jsonl")) &&
        !ours) {
      fmt::print(stderr, "{}: a checkpoint of another scenario, or of this one before an edit: removed\n",
                 e.path().string());
      fs::remove(e.path());
    }
  }
  if (resume_ && fs::exists(run_file)) {
    std::string why;
    if (std::optional<json> kept = kept_run_record(run_file, seed, fingerprint, why)) {
      if (opt_.progress) fmt::print(stderr, "{:<22} already finished, kept\n", tag);
      return kept;
    }
    // Said whether or not progress is shown: a result is being recomputed.
    fmt::print(stderr, "{}: not a usable run record ({}): running {} again\n", run_file.string(), why, tag);
  }
  return train_seed(ls, seed, op_level, tag, fingerprint, checkpoint_path, run_file);
}

std::optional<json> ScenarioRunner::train_seed(const LearnerSpec& ls, uint64_t seed, bool op_level,
                                               const std::string& tag, const std::string& fingerprint,
                                               const fs::path& checkpoint_path, const fs::path& run_file) {
  const OpGraph& g = src_.graph;
  const Grouping per_op = op_level ? Grouping::identity(g.num_ops()) : Grouping();
  const Grouping& grouping = op_level ? per_op : grouping_of(seed);
  const LearnerEntry* entry = find_learner(ls.config.name);
  // A learner that places ops keeps the groups whole where they must be (PyTorch modules).
  LearnerConfig config = ls.config;
  if (entry && entry->places_ops && keeps_groups_whole() && !op_level)
    for (const auto& [key, value] : entry->whole_groups) {
      auto [it, added] = config.values.emplace(key, value);
      if (!added && it->second != value)
        throw InputError(s_.file.string() + ":" + std::to_string(ls.line) + ": learners." + ls.config.name + "." + key +
                         " = " + option_value_text(it->second) + ": would split modules, which PyTorch cannot run "
                         "(grouping: " + s_.grouping + "); use grouping: none for the op-level search");
    }
  // What the learner places: the scenario's groups, or single ops for a learner that refines
  // them (critpath: the groups are moves it makes whole, beside moves of single ops).
  const Grouping trained = entry && entry->places_ops ? Grouping::identity(g.num_ops()) : grouping;
  space_.num_groups = trained.num_groups();
  // Neural learners read the graph through the grouping; the table learners need only its size.
  std::optional<PlacementProblem> problem;
  if (entry && entry->needs_problem) problem = describe_problem(g, grouping);
  std::unique_ptr<Learner> learner;
  try {
    LearnerContext context{space_, seed, problem ? &*problem : nullptr};
    // The start a search learner gets: the baseline that is fastest once projected onto the
    // groups it places (each group on the device most of its ops are on) — an op-level list
    // schedule can lose much of its speed in that projection.
    double best_start = INFINITY;
    for (const Placement& p : (op_level ? op_level_baselines_ : baseline_placements_)[seed]) {
      Placement start = trained.majority(p, space_.devices);
      const SimResult res = sim_.simulate(trained.expand(start));
      if (!res.oom && res.step_time_s < best_start) {
        best_start = res.step_time_s;
        context.best_baseline = std::move(start);
      }
    }
    context.graph = &g;
    context.simulator = &sim_;
    context.grouping = &grouping;
    learner = make_learner(config, context);
  } catch (const InputError& e) {
    throw InputError(s_.file.string() + ":" + std::to_string(ls.line) + ": learners." + ls.config.name + ": " + e.what());
  }
  TrainerOptions to;
  to.sample_budget = s_.samples;
  to.batch_size = s_.batch;
  to.verify_every = verify_env_ && !op_level ? s_.verify.every : 0;
  to.checkpoint_every = s_.checkpoint_every;
  to.checkpoint_path = checkpoint_path;
  to.resume = resume_;
  ProgressBar bar(tag, s_.samples, opt_.progress);
  ProgressObserver obs(bar, opt_.stop_after_samples);
  const TrainSummary t = train(*learner, trained, *sample_env_, to, verify_env_.get(), &obs);
  bar.finish(t.samples, t.best_step_time_s);
  if (t.resumed_from > 0 && opt_.progress)
    fmt::print(stderr, "{:<22} resumed from its checkpoint at sample {}\n", tag, t.resumed_from);
  if (t.status == TrainSummary::Status::kStopped) {
    fmt::print(stderr, "{}: stopped after {} samples; continue with --resume\n", tag, t.samples);
    return std::nullopt;  // interrupted: no summary; the checkpoint holds the state
  }
  json r = run_record(t, seed, fingerprint, trained.num_groups());
  write_file_atomically(run_file, r.dump());
  fs::remove(checkpoint_path);
  fs::remove(checkpoint_curve_path(checkpoint_path));
  return r;
}

void ScenarioRunner::gather(const LearnerSpec& ls, uint64_t seed, const json& r, json& runs) {
  std::map<int64_t, const json*> verify_at;
  for (const json& v : r["verifications"]) {
    verify_at[v["sample"].get<int64_t>()] = &v;
    verifications_.push_back({{"algorithm", ls.config.name}, {"seed", seed}, {"sample", v["sample"]},
                              {"predicted_s", v["predicted_s"]}, {"measured_s", v["measured_s"]},
                              {"source", v["source"]}});
    if (v.contains("in_situ_predicted_s")) verifications_.back()["in_situ_predicted_s"] = v["in_situ_predicted_s"];
  }
  for (const json& c : r["curve"]) {
    int64_t sample = c[0].get<int64_t>();
    std::string vp, vm, vi;
    if (auto it = verify_at.find(sample); it != verify_at.end()) {
      const json& v = *it->second;
      vp = fmt::format("{:.9g}", v["predicted_s"].get<double>());
      vm = v["measured_s"].is_null() ? "oom" : fmt::format("{:.9g}", v["measured_s"].get<double>());
      if (v.contains("in_situ_predicted_s")) vi = fmt::format("{:.9g}", v["in_situ_predicted_s"].get<double>());
    }
    // Runs saved before learned groupings have three columns a row.
    const std::string groups = c.size() > 3 && !c[3].is_null() ? std::to_string(c[3].get<uint32_t>()) : "";
    curve_ += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", ls.config.name, seed, sample,
                          c[1].is_null() ? "" : fmt::format("{:.9g}", c[1].get<double>()), c[1].is_null() ? 1 : 0,
                          c[2].is_null() ? "" : fmt::format("{:.9g}", c[2].get<double>()), vp, vm, vi, groups);
  }
  if (!r["best_s"].is_null())
    consider(r["best_s"].get<double>(), ls.config.name, seed, r["best_placement"].get<Placement>(),
             r.value("best_grouping", std::vector<uint32_t>{}));
  json brief = r;
  brief.erase("curve");
  brief.erase("best_placement");
  brief.erase("best_grouping");
  runs.push_back(brief);
}

// Mean, spread and best per algorithm over its seeds, and each best's gap to the lower bound.
void ScenarioRunner::aggregate_over_seeds() {
  for (json& res : results_) {
    std::vector<double> xs;
    bool all_oom = true;
    for (const json& r : res["runs"]) {
      const char* key = res["kind"] == "baseline" ? "step_time_s" : "best_s";
      bool ran = r.contains(key) && !r[key].is_null() && !(r.contains("oom") && r["oom"].get<bool>());
      xs.push_back(ran ? r[key].get<double>() : INFINITY);
      all_oom = all_oom && !ran;
    }
    if (auto st = stats_of(xs)) {
      res["mean_s"] = st->mean;
      res["std_s"] = st->std;
      res["best_s"] = st->best;
      res["seeds_ok"] = st->n;
    }
    res["oom"] = all_oom;
  }
}

json ScenarioRunner::summary() const {
  const Machine& machine = ms_->machine;
  json summary;
  summary["format"] = "placelab-run-1";
  summary["scenario"] = s_.name;
  summary["description"] = s_.description;
  summary["model"] = src_.label;
  summary["ops"] = src_.graph.num_ops();
  if (src_.parameters) summary["parameters"] = *src_.parameters;
  summary["grouping"] = s_.grouping;
  // The scenario grouping's size per seed (a learner that places ops reports the ops as its groups).
  json sizes = json::array();
  for (const auto& [seed, grouping] : groupings_) sizes.push_back(grouping.num_groups());
  summary["grouping_groups"] = sizes;
  summary["machine"] = machine.name;
  summary["cost_model"] = ms_->cost->describe();
  summary["devices"] = s_.devices;
  json learner_devices = json::array();  // the learners' action space, by name
  for (DeviceId d : space_.devices) learner_devices.push_back(machine.devices[d].name);
  summary["learner_devices"] = std::move(learner_devices);
  summary["samples"] = s_.samples;
  summary["batch"] = s_.batch;
  summary["seeds"] = seeds_;
  if (!s_.skipped_learners.empty()) summary["skipped_learners"] = s_.skipped_learners;
  summary["fingerprint"] = summary_fingerprint(scenario_print_, s_, seeds_);
  summary["results"] = results_;
  summary["verifications"] = verifications_;
  if (std::isfinite(best_.time)) summary["best"] = {{"name", best_.name}, {"seed", best_.seed}, {"step_time_s", best_.time}};
  if (!s_.paper.empty() || !s_.paper_source.empty() || !s_.paper_notes.empty()) {
    json p;
    p["source"] = s_.paper_source;
    if (!s_.paper_notes.empty()) p["notes"] = s_.paper_notes;
    for (const auto& [k, f] : s_.paper) p["figures"][k] = f.oom ? json("OOM") : json(f.step_time_s);
    summary["paper"] = p;
  }
  return summary;
}

void ScenarioRunner::write_outputs() {
  aggregate_over_seeds();
  // The bound every result is measured against: over all the machine's devices, since baselines
  // may use devices the learners may not (single_cpu with devices: gpus).
  const StepLowerBound bound = step_lower_bound(src_.graph, sim_);
  for (json& res : results_)
    if (res.contains("best_s")) res["best_gap_to_bound"] = res["best_s"].get<double>() / bound.step_s - 1;
  json out = summary();
  out["lower_bound"] = {{"step_s", bound.step_s},
                        {"critical_path_s", bound.critical_path_s},
                        {"work_s", bound.work_s},
                        {"slots", bound.slots},
                        {"persistent_bytes", bound.persistent_bytes},
                        {"memory_bytes", bound.memory_bytes},
                        {"memory_feasible", bound.memory_feasible}};
  const Machine& machine = ms_->machine;
  const OpGraph& g = src_.graph;
  if (!best_.learned_grouping.empty()) {
    // best_grouping.json has every op's learned group; summary.json the groups, largest first.
    json lg = learned_grouping_json(g, grouping_of(best_.seed), best_.placement, best_.learned_grouping, machine);
    write_file_atomically(out_ / "best_grouping.json",
                          json{{"learner", best_.name}, {"seed", best_.seed}, {"grouping", lg}}.dump() + "\n");
    lg.erase("group_of_op");
    out["best"]["learned_grouping"] = lg;
  }
  write_file_atomically(out_ / "curve.csv", curve_);
  if (!best_.placement.empty()) {
    std::vector<std::string> names;
    for (const Device& d : machine.devices) names.push_back(d.name);
    std::ostringstream pj;
    write_placement_json(g, best_.placement, names, pj);
    write_file_atomically(out_ / "best_placement.json", pj.str());
    SimResult tl = sim_.simulate(best_.placement, {.record_timeline = true});
    std::ostringstream trace;
    write_chrome_trace(tl, g, machine, trace);
    write_file_atomically(out_ / "timeline.json", trace.str());
  }
  write_file_atomically(out_ / "summary.json", out.dump(2) + "\n");
}

}  // namespace

OutputLock::OutputLock(const fs::path& folder, std::optional<uint64_t> only_seed, std::string hint)
    : folder_(folder), hint_(std::move(hint)) {
  take(folder / ".lock", only_seed ? LOCK_SH : LOCK_EX, fd_);
  if (only_seed) take(folder / (".lock-seed" + std::to_string(*only_seed)), LOCK_EX, seed_fd_, /*wait=*/true);
}

OutputLock::~OutputLock() {
  if (seed_fd_ >= 0) ::close(seed_fd_);
  ::close(fd_);
}

void OutputLock::take(const fs::path& path, int mode, int& fd, bool wait) {
  // O_NOFOLLOW: a lock file that is a link would have this run truncate and write whatever it points at.
  fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    throw InputError(path.string() + ": cannot open the run's lock file: " +
                     (errno == ELOOP ? std::string("it is a symbolic link (remove it)") : std::strerror(errno)));
  if (::flock(fd, mode | (wait ? 0 : LOCK_NB)) != 0) {
    const int err = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
    ::close(fd);
    fd = -1;
    if (err == EWOULDBLOCK)
      throw InputError(folder_.string() + ": another placelab run" +
                       (n > 0 ? std::string(" (process ") + std::string(pid, static_cast<std::size_t>(n)) + ")" : std::string()) +
                       " is writing its results here; wait for it, or " + hint_);
    throw InputError(path.string() + ": cannot lock: " + std::strerror(err));
  }
  if (mode == LOCK_SH) return;  // shared: the file names the whole run's holder only
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    // The lock holds without the pid; a second run's message just cannot name the process.
  }
}

RunOutcome run_scenario(const Scenario& s, const RunOptions& opt) {
  std::vector<uint64_t> seeds = seeds_to_run(s, opt);
  const bool resume = opt.resume || opt.only_seed.has_value();
  const fs::path out = opt.output.empty() ? s.output : opt.output;
  std::error_code made;
  fs::create_directories(out / "runs", made);
  if (made) throw InputError(out.string() + ": cannot create the output folder: " + made.message());
  // runs/ is emptied and written through: a link there would have a fresh run delete, and every run
  // write, files outside the output folder.
  if (fs::is_symlink(out / "runs", made) || !fs::is_directory(fs::symlink_status(out / "runs", made)))
    throw InputError((out / "runs").string() + ": not a folder of this output but a link or a file (remove it)");
  const OutputLock lock(out, opt.only_seed, "give this run another --output");
  if (!resume) {
    // A fresh run must not mix with an earlier run's per-seed results or checkpoints.
    for (const auto& e : fs::directory_iterator(out / "runs")) fs::remove(e.path());
    fs::remove(out / "summary.json");
  }
  g_interrupted = 0;  // a process may run several scenarios (the Python module): start each unstopped
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);

  ScenarioRunner runner(s, opt, std::move(seeds), out, resume);
  if (!runner.run()) return {out, true};
  if (opt.only_seed) return {out, false};  // the seed's records are written; the summary is the last run's
  runner.write_outputs();
  render_report(out, !opt.progress);
  return {out, false};
}

}  // namespace placelab::cli
