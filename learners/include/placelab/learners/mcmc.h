// Markov-chain Monte Carlo over placements, the search FlexFlow (Jia, Zaharia, Aiken, SysML 2019,
// §6 "Execution Optimizer") runs with its simulator as the cost: from a start placement, propose
// moving one group to another device, and accept by the Metropolis rule — always when the step
// gets no slower, else with probability exp(−β · (T_new − T_current) / T_current). The relative
// difference makes β independent of the model's scale (FlexFlow's β is in absolute cost units).
// One sample per update: a chain is sequential.
//
//   McmcLearner mcmc(SearchSpace{groups, gpus}, McmcOptions{}, /*seed=*/1);
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "placelab/learners/learner.h"
#include "placelab/learners/random.h"

namespace placelab {

struct McmcOptions {
  // "first": every group on the search space's first device (one GPU when the space is the
  // GPUs); "random": each group on a uniform device; "best_baseline": the best of the run's
  // baselines (LearnerContext::best_baseline), FlexFlow's start from an expert or list schedule.
  std::string start = "first";
  double beta = 20.0;         // acceptance sharpness: a 5 % slower step is accepted with e^-1
  double oom_time_s = kDefaultOomTimeS;  // step time counted for an OOM placement (Post: 100 s)
  void validate() const;      // throws InputError naming field, value and rule
};

class McmcLearner final : public Learner {
 public:
  // `start` (one device of the space per group) is required with options.start = "best_baseline".
  McmcLearner(SearchSpace space, McmcOptions options, uint64_t seed, std::optional<Placement> start = std::nullopt);
  std::string name() const override { return "mcmc"; }
  const SearchSpace& space() const override { return space_; }
  void set_sample_budget(int64_t samples) override;
  int64_t samples_seen() const override { return samples_seen_; }
  std::size_t samples_until_update() const override { return 1; }
  std::vector<Placement> propose(std::size_t max_count) override;
  void observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) override;
  // The chain's current placement (the start until the first sample is observed).
  Placement mode() const override { return current_; }
  std::string save_state() const override;
  void load_state(const std::string& state) override;

  double current_time_s() const { return current_time_s_; }
  int64_t accepted() const { return accepted_; }

 private:
  SearchSpace space_;
  McmcOptions options_;
  Rng rng_;
  int64_t budget_ = 0;
  int64_t samples_seen_ = 0;
  int64_t accepted_ = 0;
  Placement current_;             // DeviceIds per group
  double current_time_s_ = 0;     // its step time (OOM → oom_time_s); valid once started_
  bool started_ = false;          // the start placement has been measured
};

}  // namespace placelab
