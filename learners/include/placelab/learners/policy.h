// The softmax-table policy of Post (Gao et al., NeurIPS 2018): one independent softmax over D
// devices per group, f(d_m = j) = softmax(u_m)_j, logits initialised to 0 (uniform). Sampling,
// log-probabilities and every gradient the algorithms need are closed form, so this file also
// holds the two update rules that act on the table directly: the PPO objective with KL penalty
// (Post Eq. 11) with its gradient, and the closed-form cross-entropy solution (Post Eq. 10).
//
//   SoftmaxTablePolicy policy(num_groups, num_devices);
//   Rng rng(seed);
//   std::vector<uint16_t> choice(num_groups);
//   policy.sample(rng, choice);                 // choice[m] = device index of group m
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "placelab/learners/random.h"

namespace placelab {

// A device choice per group: index into the learner's device list (not a DeviceId).
using Choice = std::vector<uint16_t>;

class SoftmaxTablePolicy {
 public:
  SoftmaxTablePolicy() = default;
  // num_groups ≥ 1, 1 ≤ num_devices ≤ 65535 (PLACELAB_CHECK). Logits start at 0.
  SoftmaxTablePolicy(std::size_t num_groups, std::size_t num_devices);

  std::size_t num_groups() const { return num_groups_; }
  std::size_t num_devices() const { return num_devices_; }
  // Row-major G × D logits u[m * D + j].
  std::span<const double> logits() const { return logits_; }
  std::span<double> mutable_logits() { return logits_; }
  std::span<const double> logits(std::size_t group) const;

  // softmax(u_m), written to out (size D). Stable for any logits (max subtracted).
  void probabilities(std::size_t group, std::span<double> out) const;
  // All groups: out has G × D entries.
  void probabilities(std::span<double> out) const;
  std::vector<double> probabilities() const;
  // Sets u_m = log p (p ≥ 0, normalised here) so that softmax(u_m) = p. Probabilities below
  // `floor` are raised to it first, because a zero would need an infinite logit.
  void set_probabilities(std::size_t group, std::span<const double> p, double floor = 1e-12);

  // Draws one device per group by inverse CDF with uniform01(rng); `out` has G entries.
  void sample(Rng& rng, std::span<uint16_t> out) const;
  // The same draw from a precomputed probability table (G × D, from probabilities()), so a batch
  // of samples computes the softmax once. Gives exactly what sample() gives for that table.
  static void sample(std::span<const double> probs, std::size_t num_devices, Rng& rng, std::span<uint16_t> out);
  // The most probable device per group (lowest index on ties).
  Choice mode() const;
  // log f(choice) = Σ_m log softmax(u_m)_{choice_m}.
  double log_prob(std::span<const uint16_t> choice) const;
  // ∂ log f(choice) / ∂u, added to grad (G × D): for group m, e_{choice_m} − softmax(u_m).
  void add_log_prob_gradient(std::span<const uint16_t> choice, double scale, std::span<double> grad) const;

  // Bit-exact text form ("G D" then the logits' IEEE bit patterns) and its inverse; from_string
  // throws InputError on malformed text.
  std::string to_string() const;
  static SoftmaxTablePolicy from_string(const std::string& text);

 private:
  std::size_t num_groups_ = 0, num_devices_ = 0;
  std::vector<double> logits_;
};

// PPO with a KL penalty, Post Eq. (11), for a table policy. `old_probs` (G × D) is the policy that
// sampled `choices` (K placements); `advantages[n]` = b − T(d⁽ⁿ⁾) in seconds. The objective at the
// current logits of `policy` is
//   J(u) = 1/K Σ_n Σ_m f(d⁽ⁿ⁾_m | u_m) / f_old(d⁽ⁿ⁾_m) · A_n − β Σ_m KL(f_old,m ‖ f(·|u_m)),
// and its gradient (G × D) is written to `grad` when non-empty:
//   ∂J/∂u_mk = 1/K Σ_n A_n r_nm (δ_{k,d_m} − q_mk) − β (q_mk − p_mk),  r_nm = q_m(d_m)/p_m(d_m).
double ppo_objective(const SoftmaxTablePolicy& policy, std::span<const double> old_probs,
                     std::span<const Choice> choices, std::span<const double> advantages, double beta,
                     std::span<double> grad);

// The same objective with the batch condensed once for the several SGA steps of an update: the
// sum over samples collapses to S_mj = 1/K Σ_{n: d⁽ⁿ⁾_m = j} A_n, so a step costs O(G·D) whatever K.
struct PpoBatch {
  std::size_t num_devices = 0;
  std::vector<double> old_probs;     // G × D
  std::vector<double> weight;        // S, G × D
  double old_neg_entropy = 0;        // Σ p log p of old_probs (the KL's constant part)
};
PpoBatch make_ppo_batch(std::span<const double> old_probs, std::size_t num_devices, std::span<const Choice> choices,
                        std::span<const double> advantages);
double ppo_objective(const SoftmaxTablePolicy& policy, const PpoBatch& batch, double beta, std::span<double> grad);

// Mean over groups of KL(p_m ‖ q_m) between two G × D probability tables: the per-state KL that
// PPO's β adaptation compares with its target.
double mean_kl(std::span<const double> p, std::span<const double> q, std::size_t num_devices);

// Post Eq. (10): the probability of device j for group m is the frequency of j at m among the
// elite choices. Returns G × D probabilities; `elites` must be non-empty.
std::vector<double> cross_entropy_solution(std::span<const Choice> elites, std::size_t num_groups,
                                           std::size_t num_devices);

}  // namespace placelab
