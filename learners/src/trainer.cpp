#include "placelab/learners/trainer.h"

#include "placelab/core/files.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <system_error>

#include "placelab/core/error.h"
#include "state_json.h"

namespace placelab {

void TrainerOptions::validate() const {
  if (sample_budget < 1)
    throw InputError("trainer.sample_budget = " + std::to_string(sample_budget) + ": must be >= 1");
  if (batch_size < 1) throw InputError("trainer.batch_size = " + std::to_string(batch_size) + ": must be >= 1");
  if (verify_every < 0)
    throw InputError("trainer.verify_every = " + std::to_string(verify_every) + ": must be >= 0 (0 = never)");
  if (checkpoint_every < 0)
    throw InputError("trainer.checkpoint_every = " + std::to_string(checkpoint_every) + ": must be >= 0 (0 = never)");
  if ((checkpoint_every > 0 || resume) && checkpoint_path.empty())
    throw InputError("trainer.checkpoint_path = \"\": must be set when checkpoint_every > 0 or resume is on");
}

std::filesystem::path checkpoint_curve_path(const std::filesystem::path& checkpoint_path) {
  std::filesystem::path p = checkpoint_path;
  return p.replace_extension(".curve.jsonl");
}

std::string_view status_name(TrainSummary::Status status) {
  switch (status) {
    case TrainSummary::Status::kFinished: return "finished";
    case TrainSummary::Status::kStopped: return "stopped";
    case TrainSummary::Status::kNoFeasiblePlacement: return "no_feasible_placement";
  }
  return "unknown";
}

namespace {

// The identity of a run a checkpoint belongs to; resuming with anything else is an input error.
nlohmann::json run_identity(const Learner& learner, const Grouping& grouping, const TrainerOptions& options) {
  nlohmann::json j;
  j["learner"] = learner.name();
  j["num_ops"] = grouping.num_ops();
  j["num_groups"] = grouping.num_groups();
  j["devices"] = learner.space().devices;
  j["sample_budget"] = options.sample_budget;
  return j;
}

nlohmann::json double_or_null(double x) { return std::isfinite(x) ? nlohmann::json(detail::bits(x)) : nlohmann::json(); }
double from_double_or_null(const nlohmann::json& j) {
  return j.is_null() ? std::numeric_limits<double>::infinity() : detail::unbits(j);
}

std::string save_checkpoint(const Learner& learner, const Grouping& grouping, const TrainerOptions& options,
                            const TrainSummary& s) {
  nlohmann::json j;
  j["format"] = "placelab-checkpoint-2";
  j["run"] = run_identity(learner, grouping, options);
  j["learner_state"] = nlohmann::json::parse(learner.save_state());
  j["samples"] = s.samples;
  j["best_step_time_s"] = double_or_null(s.best_step_time_s);
  j["best_sample"] = s.best_sample;
  j["best_group_placement"] = s.best_group_placement;
  j["best_learned_grouping"] = s.best_learned_grouping;
  j["curve_points"] = s.curve.size();  // the first lines of checkpoint_curve_path
  nlohmann::json ver = nlohmann::json::array();
  for (const VerifyRecord& v : s.verifications)
    ver.push_back({v.sample, detail::bits(v.predicted_s), detail::bits(v.measured_s), v.measured_oom, v.source,
                   detail::bits(v.in_situ_predicted_s.value_or(0.0))});  // 0: none
  j["verifications"] = std::move(ver);
  return j.dump();
}

// Curve points [begin, end) as checkpoint_curve_path's lines.
std::string curve_lines(const TrainSummary& s, std::size_t begin) {
  std::string out;
  for (std::size_t i = begin; i < s.curve.size(); ++i) {
    const CurvePoint& c = s.curve[i];
    out += nlohmann::json::array({c.sample, detail::bits(c.step_time_s), c.oom, double_or_null(c.best_s), c.groups}).dump();
    out += '\n';
  }
  return out;
}

CurvePoint curve_point(const nlohmann::json& c) {
  return {c.at(0).get<int64_t>(), detail::unbits(c.at(1)), c.at(2).get<bool>(), from_double_or_null(c.at(3)),
          c.size() > 4 ? c.at(4).get<uint32_t>() : 0u};
}

// The first `points` lines of the curve file (lines after them are from a checkpoint that was
// being written when the process ended, and are ignored).
void load_curve(const std::filesystem::path& path, int64_t points, TrainSummary& s) {
  const std::string text = read_text_file(path);
  std::size_t at = 0;
  for (int64_t i = 0; i < points; ++i) {
    const std::size_t end = text.find('\n', at);
    if (end == std::string::npos)
      throw InputError(path.string() + ": " + std::to_string(i) + " complete lines: the checkpoint counts " +
                       std::to_string(points));
    const std::string origin = path.string() + ":" + std::to_string(i + 1);
    try {
      s.curve.push_back(curve_point(detail::parse_state(text.substr(at, end - at), origin.c_str())));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(origin + ": " + e.what());
    }
    at = end + 1;
  }
}

void load_checkpoint(const std::string& text, const std::string& origin, Learner& learner, const Grouping& grouping,
                     const TrainerOptions& options, TrainSummary& s) {
  const nlohmann::json j = detail::parse_state(text, origin.c_str());
  try {
    // Format 1 held the curve itself; 2 counts the lines of checkpoint_curve_path.
    const nlohmann::json& format = j.at("format");
    if (format != "placelab-checkpoint-1" && format != "placelab-checkpoint-2")
      throw InputError(origin + ": format = " + format.dump() + ": must be \"placelab-checkpoint-2\" (or -1)");
    if (j.at("run") != run_identity(learner, grouping, options))
      throw InputError(origin + ": run = " + j.at("run").dump() +
                       ": must match this run (learner, graph size, groups, devices, sample budget)");
    learner.load_state(j.at("learner_state").dump());
    s.samples = j.at("samples").get<int64_t>();
    s.best_step_time_s = from_double_or_null(j.at("best_step_time_s"));
    s.best_sample = j.at("best_sample").get<int64_t>();
    s.best_group_placement = j.at("best_group_placement").get<Placement>();
    s.best_placement = s.best_group_placement.empty() ? Placement{} : grouping.expand(s.best_group_placement);
    // Checkpoints written before learned groupings have neither the grouping nor the curve's groups.
    s.best_learned_grouping = j.value("best_learned_grouping", std::vector<uint32_t>{});
    s.curve.clear();
    if (format == "placelab-checkpoint-1") {
      for (const auto& c : j.at("curve")) s.curve.push_back(curve_point(c));
    } else {
      load_curve(checkpoint_curve_path(options.checkpoint_path), j.at("curve_points").get<int64_t>(), s);
    }
    s.verifications.clear();
    for (const auto& v : j.at("verifications")) {
      // Older checkpoints have no in-situ prediction; 0 is none.
      const double in_situ = v.size() > 5 ? detail::unbits(v.at(5)) : 0.0;
      s.verifications.push_back({v.at(0).get<int64_t>(), detail::unbits(v.at(1)), detail::unbits(v.at(2)),
                                 v.at(3).get<bool>(), v.at(4).get<std::string>(),
                                 in_situ != 0 ? std::optional<double>(in_situ) : std::nullopt});
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(origin + ": " + e.what());
  }
  if (s.samples != learner.samples_seen() || static_cast<int64_t>(s.curve.size()) != s.samples)
    throw InputError(origin + ": samples = " + std::to_string(s.samples) + ": must equal the learner's (" +
                     std::to_string(learner.samples_seen()) + ") and the curve's length");
}

// Whether the count crossed a multiple of `every` when going from `before` to `after`.
bool crossed(int64_t before, int64_t after, int64_t every) { return every > 0 && before / every != after / every; }

// An environment's answer for `placements` placements: one measurement each, a finite step time
// or an OOM; anything else is the environment's bug.
void check_measurements(const Environment& env, std::span<const Measurement> ms, std::size_t placements) {
  if (ms.size() != placements)
    throw Error("environment \"" + env.name() + "\" returned " + std::to_string(ms.size()) + " measurements for " +
                std::to_string(placements) + " placements");
  for (const Measurement& m : ms)
    if (!m.oom && !(std::isfinite(m.step_time_s) && m.step_time_s >= 0))
      throw Error("environment \"" + env.name() + "\" returned step time " + std::to_string(m.step_time_s));
}

// The number of groups a learned grouping uses (0 when the learner learns none); `used` is scratch.
uint32_t non_empty_groups(const std::vector<uint32_t>& learned, std::vector<uint8_t>& used) {
  uint32_t non_empty = 0;
  if (!learned.empty()) {
    used.assign(*std::max_element(learned.begin(), learned.end()) + std::size_t{1}, 0);
    for (uint32_t g : learned)
      if (!used[g]) used[g] = 1, ++non_empty;
  }
  return non_empty;
}

// One batch into the summary: the samples counted, a new best kept, the curve extended; the
// batch's mean step and OOM count into `progress`.
void record_batch(TrainSummary& s, const std::vector<Placement>& groups, const std::vector<Placement>& ops,
                  const std::vector<std::vector<uint32_t>>& learned, std::span<const Measurement> ms,
                  std::vector<uint8_t>& used, TrainerProgress& progress) {
  double sum = 0;
  int64_t ran = 0;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    ++s.samples;
    if (!ms[i].oom) {
      sum += ms[i].step_time_s;
      ++ran;
      if (ms[i].step_time_s < s.best_step_time_s) {
        s.best_step_time_s = ms[i].step_time_s;
        s.best_sample = s.samples;
        s.best_group_placement = groups[i];
        s.best_placement = ops[i];
        s.best_learned_grouping = learned[i];
      }
    }
    s.curve.push_back({s.samples, ms[i].step_time_s, ms[i].oom, s.best_step_time_s, non_empty_groups(learned[i], used)});
  }
  progress.batch_mean_s = ran > 0 ? sum / static_cast<double>(ran) : 0.0;
  progress.batch_oom = static_cast<int64_t>(ms.size()) - ran;
}

// The best placement so far measured on the verify environment, beside its prediction.
void verify_best(TrainSummary& s, Environment& verify, TrainerObserver* observer) {
  const std::vector<Measurement> vm = verify.evaluate(std::span<const Placement>(&s.best_placement, 1));
  if (vm.size() != 1)
    throw Error("verify environment \"" + verify.name() + "\" returned " + std::to_string(vm.size()) +
                " measurements for 1 placement");
  s.verifications.push_back({s.samples, s.best_step_time_s, vm[0].step_time_s, vm[0].oom, vm[0].source, vm[0].predicted_s});
  if (observer) observer->on_verify(s.verifications.back());
}

}  // namespace

TrainSummary train(Learner& learner, const Grouping& grouping, Environment& env, const TrainerOptions& options,
                   Environment* verify, TrainerObserver* observer) {
  options.validate();
  if (options.verify_every > 0 && verify == nullptr)
    throw InputError("trainer.verify_every = " + std::to_string(options.verify_every) +
                     ": needs a verify environment (none was given)");
  if (grouping.num_groups() != learner.space().num_groups)
    throw InputError("trainer: grouping has " + std::to_string(grouping.num_groups()) + " groups: must equal the learner's " +
                     std::to_string(learner.space().num_groups));
  const auto started = std::chrono::steady_clock::now();
  TrainSummary s;
  s.learner = learner.name();
  learner.set_sample_budget(options.sample_budget);
  if (options.resume && std::filesystem::exists(options.checkpoint_path)) {
    load_checkpoint(read_text_file(options.checkpoint_path), options.checkpoint_path.string(), learner, grouping, options, s);
    s.resumed_from = s.samples;
  }

  // The curve file's lines known to be this run's: none until the first checkpoint of this call
  // writes them all (dropping lines a stopped process appended after its last checkpoint); later
  // checkpoints append only the new points, so a checkpoint costs the learner's state, not the
  // curve's length.
  std::optional<std::size_t> curve_on_disk;
  const std::filesystem::path curve_path =
      options.checkpoint_every > 0 ? checkpoint_curve_path(options.checkpoint_path) : std::filesystem::path();
  auto checkpoint = [&] {
    if (curve_on_disk)
      append_file_durably(curve_path, curve_lines(s, *curve_on_disk));
    else
      write_file_atomically(curve_path, curve_lines(s, 0));
    curve_on_disk = s.curve.size();
    write_file_atomically(options.checkpoint_path, save_checkpoint(learner, grouping, options, s));
    if (observer) observer->on_checkpoint(s.samples, options.checkpoint_path);
  };

  // A stop asked for in the middle of a learner's long work (a neural update) ends it there; the
  // learner's half-updated state is dropped and the last checkpoint holds the run. Cleared on
  // every way out, since the observer may not outlive this call.
  struct ClearStopCheck {
    Learner& learner;
    ~ClearStopCheck() { learner.set_stop_check({}); }
  } clear_stop_check{learner};
  if (observer) learner.set_stop_check([observer] { return observer->stop_requested(); });

  std::vector<Placement> ops;
  std::vector<std::vector<uint32_t>> learned;
  std::vector<uint8_t> used;
  auto stopped_in_the_learner = [&] {
    s.status = TrainSummary::Status::kStopped;
    s.message = "stopped during the learner's work on samples " + std::to_string(s.samples + 1) + " on, after " +
                std::to_string(s.samples) + " of " + std::to_string(options.sample_budget) +
                " samples; a resumed run continues from the last checkpoint";
    s.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return s;
  };
  while (s.samples < options.sample_budget) {
    const auto want = static_cast<std::size_t>(std::min(options.batch_size, options.sample_budget - s.samples));
    std::vector<Placement> groups;
    try {
      groups = learner.propose(want);
    } catch (const LearnerStopped&) {
      return stopped_in_the_learner();
    }
    ops.clear();
    for (const Placement& g : groups) ops.push_back(grouping.expand(g));
    // Learned groupings are valid until observe: the number of non-empty groups of each, and the
    // grouping itself of a new best, are read first.
    learned.assign(groups.size(), {});
    for (std::size_t i = 0; i < groups.size(); ++i) {
      const std::span<const uint32_t> lg = learner.proposed_grouping(i);
      learned[i].assign(lg.begin(), lg.end());
    }
    const std::vector<Measurement> ms = env.evaluate(ops);
    check_measurements(env, ms, ops.size());
    try {
      learner.observe(groups, ms);
    } catch (const LearnerStopped&) {
      return stopped_in_the_learner();
    }

    const int64_t before = s.samples;
    TrainerProgress progress;
    record_batch(s, groups, ops, learned, ms, used, progress);
    PLACELAB_CHECK(s.samples == learner.samples_seen()) << "trainer at " << s.samples << " samples, learner at "
                                                        << learner.samples_seen();

    if (crossed(before, s.samples, options.verify_every) && !s.best_placement.empty()) verify_best(s, *verify, observer);
    const bool done = s.samples >= options.sample_budget;
    if (options.checkpoint_every > 0 && (done || crossed(before, s.samples, options.checkpoint_every))) checkpoint();
    if (observer) {
      progress.samples = s.samples;
      progress.budget = options.sample_budget;
      progress.best_s = s.best_step_time_s;
      observer->on_batch(progress);
      if (!done && observer->stop_requested()) {
        // A requested stop (Ctrl-C) saves where it is, so a resumed run continues from this sample;
        // a killed process leaves only the last periodic checkpoint.
        if (options.checkpoint_every > 0 && !crossed(before, s.samples, options.checkpoint_every)) checkpoint();
        s.status = TrainSummary::Status::kStopped;
        s.message = "stopped by the observer after " + std::to_string(s.samples) + " of " +
                    std::to_string(options.sample_budget) + " samples";
        s.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        return s;
      }
    }
  }
  if (s.best_placement.empty()) {
    s.status = TrainSummary::Status::kNoFeasiblePlacement;
    s.message = "none of the " + std::to_string(s.samples) + " sampled placements fit in memory";
  } else {
    s.status = TrainSummary::Status::kFinished;
    s.message = "best step time " + std::to_string(s.best_step_time_s) + " s at sample " + std::to_string(s.best_sample);
  }
  s.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return s;
}

}  // namespace placelab
