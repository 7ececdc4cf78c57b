// The placement algorithms over the softmax-table policy (policy.h), each an Options struct with
// the papers' defaults plus a Learner:
//   ReinforceLearner     — Mirhoseini et al. 2017: minimise E[√T], moving-average baseline that
//                          starts at the failing signal, failing signal for OOM, Adam.
//   PpoLearner           — PPO with adaptive KL penalty (Spotlight / Post Eq. 11).
//   CrossEntropyLearner  — closed-form cross-entropy (Post Eq. 10) mixed with uniform.
//   PostLearner          — Post, Algorithm 1: PPO every K samples, CE every N samples.
// All OOM measurements count as a fixed per-step time (Post: 100 s) or failing signal
// (REINFORCE), never as exceptions. Each has an entry in the registry (registry.h), which builds it
// by name from a scenario's options.
//
//   PostLearner post(SearchSpace{groups, devices}, PostOptions{}, /*seed=*/7);
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "placelab/learners/learner.h"
#include "placelab/learners/policy.h"

namespace placelab {

// The most samples between two updates of the table learners (REINFORCE, PPO, cross-entropy,
// Post): the samples of one update are held in memory, and a learner that never updates within a
// scenario's samples learns nothing (papers: 12 to 60).
inline constexpr int kMaxSamplesPerUpdate = 100'000;

struct ReinforceOptions {
  int samples_per_update = 12;         // K placements per gradient step (Post's 12 workers)
  double learning_rate = 0.1;          // Adam step size on the logits
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double baseline_decay = 0.9;         // B ← decay·B + (1−decay)·√T per sample
  double failing_signal = 10.0;        // √T assigned to OOM placements (√100 s, Post's OOM time)
  // After this fraction of the sample budget, only placements that ran update the policy
  // (Mirhoseini et al.: late failures must not perturb a good policy). 1 disables it.
  double feasible_only_after = 0.5;
  void validate() const;  // throws InputError naming field, value and rule
};

struct PpoOptions {
  int samples_per_update = 12;  // K
  int sga_steps = 10;           // gradient ascent steps on Eq. (11) per update
  double learning_rate = 1.0;   // SGA step size
  double beta_init = 1.0;       // KL penalty coefficient, adapted after each update
  double kl_target = 0.03;      // β halves when KL < target/1.5 and doubles when KL > 1.5·target
  double baseline_decay = 0.9;  // b ← decay·b + (1−decay)·T per sample (moving average of times)
  double oom_time_s = kDefaultOomTimeS;  // per-step time assigned to OOM placements
  void validate() const;
};

struct CrossEntropyOptions {
  int samples_per_update = 60;  // N
  double elite_fraction = 0.1;  // ρ: the best ⌈ρN⌉ placements are the elites
  double epsilon = 0.1;         // uniform mixing after each update
  bool decay_epsilon = true;    // ε falls linearly to 0 over the sample budget
  double oom_time_s = kDefaultOomTimeS;
  void validate() const;
};

struct PostOptions {
  int ppo_every = 12;           // K: PPO update every K samples (unless it is also a CE sample)
  int ce_every = 60;            // N: cross-entropy update every N samples; a multiple of K
  int sga_steps = 10;
  double learning_rate = 1.0;
  double beta_init = 1.0;
  double kl_target = 0.03;
  double baseline_decay = 0.9;
  double elite_fraction = 0.1;  // ρ
  double epsilon = 0.1;         // ε
  bool decay_epsilon = true;
  double oom_time_s = kDefaultOomTimeS;
  void validate() const;
};

// Shared machinery of the table learners: the space, the policy, the RNG, the sample counter and
// the budget. Not used directly.
class TableLearner : public Learner {
 public:
  ~TableLearner() override;
  const SearchSpace& space() const override { return space_; }
  void set_sample_budget(int64_t samples) override;
  int64_t samples_seen() const override { return samples_seen_; }
  std::vector<Placement> propose(std::size_t max_count) override;
  Placement mode() const override;
  const SoftmaxTablePolicy& policy() const { return policy_; }

 protected:
  TableLearner(SearchSpace space, uint64_t seed);
  // The device indices of a group placement (PLACELAB_CHECK that every device is in the space).
  Choice to_choice(const Placement& group_placement) const;
  // Common state as JSON text and back; subclasses add their own fields.
  std::string save_common(const std::string& extra_json) const;
  // Restores the common part and returns the subclass's extra JSON text.
  std::string load_common(const std::string& state);

  SearchSpace space_;
  SoftmaxTablePolicy policy_;
  Rng rng_;
  int64_t budget_ = 0;
  int64_t samples_seen_ = 0;
  std::vector<uint16_t> device_index_;  // DeviceId → index + 1 (0 = not in the space)
};

class ReinforceLearner final : public TableLearner {
 public:
  ReinforceLearner(SearchSpace space, ReinforceOptions options, uint64_t seed);
  std::string name() const override { return "reinforce"; }
  std::size_t samples_until_update() const override;
  void observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) override;
  std::string save_state() const override;
  void load_state(const std::string& state) override;
  double baseline() const { return baseline_; }

 private:
  void update();
  ReinforceOptions options_;
  double baseline_;
  std::vector<Choice> batch_;
  std::vector<double> batch_reward_;    // √T, or the failing signal
  std::vector<uint8_t> batch_ran_;      // 1 when the placement did not OOM
  std::vector<double> adam_m_, adam_v_;
  int64_t adam_t_ = 0;
};

// PPO, CE and Post share one implementation: Post with CE disabled is PPO, with PPO disabled CE.
class JointLearner : public TableLearner {
 public:
  std::size_t samples_until_update() const override;
  void observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) override;
  std::string save_state() const override;
  void load_state(const std::string& state) override;
  double beta() const { return beta_; }
  // ε that the next cross-entropy update will use.
  double current_epsilon() const;
  // KL (mean over groups) measured after the last PPO update; 0 before the first.
  double last_kl() const { return last_kl_; }

  // The union of PPO, CE and Post options; built by the subclasses from their Options.
  struct Config {
    int ppo_every = 0;  // 0 = no PPO
    int ce_every = 0;   // 0 = no CE
    int sga_steps = 10;
    double learning_rate = 1.0, beta_init = 1.0, kl_target = 0.03, baseline_decay = 0.9;
    double elite_fraction = 0.1, epsilon = 0.1;
    bool decay_epsilon = true;
    double oom_time_s = kDefaultOomTimeS;
  };

 protected:
  JointLearner(SearchSpace space, Config config, uint64_t seed);

 private:
  void ppo_update();
  void ce_update();
  Config config_;
  double beta_;
  double baseline_ = 0;
  bool have_baseline_ = false;
  double last_kl_ = 0;
  std::vector<Choice> samples_;  // since the last CE update (or since the last PPO when CE is off)
  std::vector<double> times_;    // their step times, OOM → oom_time_s
  // b when the current PPO batch started; the batch's advantages are b − T (Spotlight: R̄ is the
  // average of previous trials). Absent before any sample: the first batch uses its own mean.
  double batch_baseline_ = 0;
  bool have_batch_baseline_ = false;
};

class PpoLearner final : public JointLearner {
 public:
  PpoLearner(SearchSpace space, PpoOptions options, uint64_t seed);
  std::string name() const override { return "ppo"; }
};

class CrossEntropyLearner final : public JointLearner {
 public:
  CrossEntropyLearner(SearchSpace space, CrossEntropyOptions options, uint64_t seed);
  std::string name() const override { return "cross_entropy"; }
};

class PostLearner final : public JointLearner {
 public:
  PostLearner(SearchSpace space, PostOptions options, uint64_t seed);
  std::string name() const override { return "post"; }
};

}  // namespace placelab
