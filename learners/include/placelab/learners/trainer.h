// The trainer: runs a Learner against an Environment until a sample budget is spent, keeps the best
// placement, records the learning curve, verifies the best placement on a second Environment (real
// hardware) every N samples, and checkpoints atomically every M samples so an interrupted run
// resumes to exactly the result an uninterrupted one would have reached. No console I/O: progress
// goes to a TrainerObserver.
//
//   PostLearner post(SearchSpace{grouping.num_groups(), gpu_devices(machine)}, {}, seed);
//   TrainerOptions options;  options.sample_budget = 2400;
//   options.checkpoint_every = 240;  options.checkpoint_path = "results/x/checkpoint.json";
//   options.resume = true;
//   TrainSummary summary = train(post, grouping, sim_env, options);
//   summary.best_step_time_s, summary.best_placement, summary.curve ...
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "placelab/graph/placement.h"
#include "placelab/learners/grouping.h"
#include "placelab/learners/learner.h"
#include "placelab/sim/environment.h"

namespace placelab {

struct TrainerOptions {
  int64_t sample_budget = 2400;   // placements to draw in total (Post: 2,400)
  int64_t batch_size = 12;        // most placements per Environment::evaluate call (Post: 12 workers)
  int64_t verify_every = 0;       // measure the best placement on the verify environment every N samples; 0 = never
  int64_t checkpoint_every = 0;   // write a checkpoint every M samples and at the end; 0 = never
  std::filesystem::path checkpoint_path;  // required when checkpoint_every > 0
  bool resume = false;            // start from checkpoint_path when that file exists
  // Throws InputError naming the field, value and rule.
  void validate() const;
};

// One sample of the learning curve.
struct CurvePoint {
  int64_t sample = 0;         // 1-based index of the sample
  double step_time_s = 0;     // as measured; meaningless when oom
  bool oom = false;
  double best_s = std::numeric_limits<double>::infinity();  // best step time so far; inf until one ran
  uint32_t groups = 0;        // learned groups holding units (hierarchical, eagle); 0 otherwise
};

// The best placement measured on the verify environment next to what the training environment said.
struct VerifyRecord {
  int64_t sample = 0;        // samples drawn when the verification ran
  double predicted_s = 0;    // the best step time in the training environment (simulated)
  double measured_s = 0;     // the verify environment's step time; meaningless when measured_oom
  bool measured_oom = false;
  std::string source;        // Measurement::source of the verify environment
  // The verify environment's own prediction (Measurement::predicted_s): the simulator with the
  // kernels re-timed in situ while measuring, when it makes one.
  std::optional<double> in_situ_predicted_s;
};

struct TrainerProgress {
  int64_t samples = 0;       // drawn so far
  int64_t budget = 0;
  double best_s = std::numeric_limits<double>::infinity();
  double batch_mean_s = 0;   // mean step time of the batch's placements that ran (0 if none)
  int64_t batch_oom = 0;     // placements of the batch that did not fit
};

// Receives progress; every hook has an empty default.
class TrainerObserver {
 public:
  virtual ~TrainerObserver() = default;
  virtual void on_batch(const TrainerProgress& /*progress*/) {}
  virtual void on_verify(const VerifyRecord& /*record*/) {}
  virtual void on_checkpoint(int64_t /*samples*/, const std::filesystem::path& /*path*/) {}
  // Polled after each batch (after any checkpoint); true stops the run there with status kStopped,
  // after a checkpoint of that point when checkpointing is on.
  virtual bool stop_requested() { return false; }
};

struct TrainSummary {
  enum class Status { kFinished, kStopped, kNoFeasiblePlacement };
  Status status = Status::kFinished;
  std::string message;
  std::string learner;
  int64_t samples = 0;
  double best_step_time_s = std::numeric_limits<double>::infinity();  // inf when nothing ran
  int64_t best_sample = 0;          // 1-based sample that found the best; 0 when nothing ran
  Placement best_group_placement;   // empty when nothing ran
  Placement best_placement;         // the same, expanded to ops
  // For learners that learn their groups: the best placement's grouping (search-space group →
  // learned group, Learner::proposed_grouping); empty otherwise.
  std::vector<uint32_t> best_learned_grouping;
  std::vector<CurvePoint> curve;    // one point per sample, in order (the resumed part included)
  std::vector<VerifyRecord> verifications;
  int64_t resumed_from = 0;         // samples restored from a checkpoint; 0 for a fresh run
  double wall_time_s = 0;           // time spent in this call (not part of the reproducible result)
};
std::string_view status_name(TrainSummary::Status status);  // "finished", "stopped", "no_feasible_placement"

// Runs `learner` on `env` as described above. `grouping` expands the learner's group placements
// (grouping.num_groups() must equal learner.space().num_groups). `verify` may be null (then
// verify_every must be 0). Throws InputError for bad options or an unreadable checkpoint, and Error
// when an environment returns the wrong number of measurements or a non-finite time.
TrainSummary train(Learner& learner, const Grouping& grouping, Environment& env, const TrainerOptions& options,
                   Environment* verify = nullptr, TrainerObserver* observer = nullptr);

// Where a checkpoint's learning curve lives: beside it, one JSON line per sample, appended at each
// checkpoint ("x.checkpoint.json" -> "x.checkpoint.curve.jsonl"); the checkpoint counts the lines
// that belong to it. Rewriting the whole curve each time made `checkpoint_every: 1` quadratic.
std::filesystem::path checkpoint_curve_path(const std::filesystem::path& checkpoint_path);

}  // namespace placelab
