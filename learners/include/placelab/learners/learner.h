// The Learner interface: an algorithm that proposes group placements and learns from their
// measured step times. The Trainer (trainer.h) drives it: propose → evaluate in an Environment →
// observe, until the sample budget is spent. Learners are seeded and deterministic, and their whole
// state (policy, optimiser moments, baselines, buffered samples, RNG) round-trips through
// save_state/load_state bit-exactly, which is what makes checkpoint + resume exact.
//
//   PostLearner post(SearchSpace{grouping.num_groups(), gpus}, PostOptions{}, /*seed=*/1);
//   post.set_sample_budget(2400);
//   while (post.samples_seen() < 2400) {
//     auto group_placements = post.propose(12);
//     ... expand with the grouping, evaluate, collect measurements ...
//     post.observe(group_placements, measurements);
//   }
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "placelab/graph/placement.h"
#include "placelab/sim/environment.h"

namespace placelab {

// The step time a learner counts for a placement that does not fit (OOM), unless its options say
// otherwise: Post's 100 s (Gao et al. 2018, and the seq2seq placer of the same authors), far above
// any step of the zoo, so that every learner ranks an OOM below every placement that runs.
inline constexpr double kDefaultOomTimeS = 100.0;

// What a learner places: `num_groups` groups, each on one of `devices` (machine device ids,
// distinct). A learner's choices are indices into `devices`; its placements are DeviceIds.
struct SearchSpace {
  std::size_t num_groups = 0;
  std::vector<DeviceId> devices;
  // Throws InputError naming the field, value and rule (num_groups ≥ 1; 1..65535 distinct devices).
  void validate() const;
};

// Thrown out of a learner's propose or observe when its stop check (Learner::set_stop_check)
// answered true in the middle of the work: the learner's state is then part-way through an update
// and only good for discarding; the last checkpoint holds the run.
struct LearnerStopped : std::exception {
  const char* what() const noexcept override { return "the learner was stopped in the middle of its work"; }
};

class Learner {
 public:
  virtual ~Learner() = default;

  // A question the learner asks between the steps of long work (a neural update over a large
  // network: hours at the largest settings) and answers true to by throwing LearnerStopped, so a
  // stop does not wait for the update. Empty: never stop. The trainer sets it from its observer.
  // Learners whose work is short between batches ignore it.
  virtual void set_stop_check(std::function<bool()> /*check*/) {}

  // The learner's registry name (registry.h): "post", "ppo", "cross_entropy", "reinforce", ...
  virtual std::string name() const = 0;
  virtual const SearchSpace& space() const = 0;

  // The total number of samples the run will draw; schedules that decay over the run (Post's ε)
  // use it. Call before the first propose; it is part of the saved state. Must be ≥ 1.
  virtual void set_sample_budget(int64_t samples) = 0;
  // Samples drawn and observed so far.
  virtual int64_t samples_seen() const = 0;
  // How many more samples the learner takes before its next policy update (≥ 1). propose never
  // returns more, so every placement of one update's batch comes from the same policy, whatever
  // batch size the caller asks for: results do not depend on the trainer's batch size.
  virtual std::size_t samples_until_update() const = 0;

  // Draws min(max_count, samples_until_update()) group placements (one DeviceId per group) from the
  // current policy. max_count ≥ 1.
  virtual std::vector<Placement> propose(std::size_t max_count) = 0;
  // Reports the measurements of placements drawn by the last propose, in order (sizes equal, at
  // most samples_until_update(); PLACELAB_CHECK otherwise). Updates the policy when a batch is full.
  virtual void observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) = 0;

  // The most probable group placement under the current policy.
  virtual Placement mode() const = 0;

  // For learners that learn their own groups of the search space's groups (hierarchical, eagle):
  // the grouping (search-space group → learned group) behind placement i of the last propose,
  // valid until observe. Empty for learners that place the given groups as they are.
  virtual std::span<const uint32_t> proposed_grouping(std::size_t /*i*/) const { return {}; }

  // The learner's whole state as JSON text; load_state restores it exactly into a learner built
  // with the same space and options (throws InputError when the text does not match).
  virtual std::string save_state() const = 0;
  virtual void load_state(const std::string& state) = 0;
};

}  // namespace placelab
