#include "placelab/learners/policy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

#include "placelab/core/error.h"

namespace placelab {

SoftmaxTablePolicy::SoftmaxTablePolicy(std::size_t num_groups, std::size_t num_devices)
    : num_groups_(num_groups), num_devices_(num_devices), logits_(num_groups * num_devices, 0.0) {
  PLACELAB_CHECK(num_groups >= 1) << "a policy needs at least one group";
  PLACELAB_CHECK(num_devices >= 1 && num_devices <= 65535) << "num_devices = " << num_devices;
}

std::span<const double> SoftmaxTablePolicy::logits(std::size_t group) const {
  return std::span<const double>(logits_).subspan(group * num_devices_, num_devices_);
}

void SoftmaxTablePolicy::probabilities(std::size_t group, std::span<double> out) const {
  const double* u = logits_.data() + group * num_devices_;
  const double mx = *std::max_element(u, u + num_devices_);
  double sum = 0;
  for (std::size_t j = 0; j < num_devices_; ++j) sum += (out[j] = std::exp(u[j] - mx));
  for (std::size_t j = 0; j < num_devices_; ++j) out[j] /= sum;
}

void SoftmaxTablePolicy::probabilities(std::span<double> out) const {
  PLACELAB_CHECK(out.size() == logits_.size()) << "probability table size " << out.size();
  for (std::size_t m = 0; m < num_groups_; ++m) probabilities(m, out.subspan(m * num_devices_, num_devices_));
}

std::vector<double> SoftmaxTablePolicy::probabilities() const {
  std::vector<double> out(logits_.size());
  probabilities(out);
  return out;
}

void SoftmaxTablePolicy::set_probabilities(std::size_t group, std::span<const double> p, double floor) {
  PLACELAB_CHECK(p.size() == num_devices_) << "probabilities for " << p.size() << " devices";
  double sum = 0;
  for (double x : p) sum += std::max(x, floor);
  for (std::size_t j = 0; j < num_devices_; ++j)
    logits_[group * num_devices_ + j] = std::log(std::max(p[j], floor) / sum);
}

void SoftmaxTablePolicy::sample(Rng& rng, std::span<uint16_t> out) const {
  PLACELAB_CHECK(out.size() == num_groups_) << "choice of size " << out.size();
  sample(probabilities(), num_devices_, rng, out);
}

void SoftmaxTablePolicy::sample(std::span<const double> probs, std::size_t num_devices, Rng& rng,
                                std::span<uint16_t> out) {
  PLACELAB_CHECK(num_devices > 0 && probs.size() == out.size() * num_devices) << "probability table shape";
  for (std::size_t m = 0; m < out.size(); ++m) {
    const double* p = probs.data() + m * num_devices;
    const double r = uniform01(rng);
    double acc = 0;
    std::size_t j = 0;
    // The last device takes any rounding remainder, so a choice is always made.
    for (; j + 1 < num_devices; ++j) {
      acc += p[j];
      if (r < acc) break;
    }
    out[m] = static_cast<uint16_t>(j);
  }
}

Choice SoftmaxTablePolicy::mode() const {
  Choice out(num_groups_);
  for (std::size_t m = 0; m < num_groups_; ++m) {
    auto u = logits(m);
    out[m] = static_cast<uint16_t>(std::max_element(u.begin(), u.end()) - u.begin());
  }
  return out;
}

double SoftmaxTablePolicy::log_prob(std::span<const uint16_t> choice) const {
  PLACELAB_CHECK(choice.size() == num_groups_) << "choice of size " << choice.size();
  double total = 0;
  for (std::size_t m = 0; m < num_groups_; ++m) {
    auto u = logits(m);
    const double mx = *std::max_element(u.begin(), u.end());
    double sum = 0;
    for (double x : u) sum += std::exp(x - mx);
    total += u[choice[m]] - mx - std::log(sum);
  }
  return total;
}

void SoftmaxTablePolicy::add_log_prob_gradient(std::span<const uint16_t> choice, double scale,
                                               std::span<double> grad) const {
  PLACELAB_CHECK(choice.size() == num_groups_ && grad.size() == logits_.size()) << "gradient shape";
  std::vector<double> p(num_devices_);
  for (std::size_t m = 0; m < num_groups_; ++m) {
    probabilities(m, p);
    double* g = grad.data() + m * num_devices_;
    for (std::size_t j = 0; j < num_devices_; ++j) g[j] -= scale * p[j];
    g[choice[m]] += scale;
  }
}

std::string SoftmaxTablePolicy::to_string() const {
  std::ostringstream out;
  out << num_groups_ << ' ' << num_devices_;
  for (double x : logits_) out << ' ' << std::bit_cast<uint64_t>(x);
  return out.str();
}

SoftmaxTablePolicy SoftmaxTablePolicy::from_string(const std::string& text) {
  std::istringstream in(text);
  std::size_t g = 0, d = 0;
  if (!(in >> g >> d) || g == 0 || d == 0 || d > 65535 || g > (std::size_t{1} << 26) / d)
    throw InputError("policy: malformed header: must be \"<groups> <devices>\" with both >= 1");
  SoftmaxTablePolicy policy(g, d);
  for (double& x : policy.logits_) {
    uint64_t bits = 0;
    if (!(in >> bits)) throw InputError("policy: expected " + std::to_string(g * d) + " logits");
    x = std::bit_cast<double>(bits);
    if (!std::isfinite(x)) throw InputError("policy: a logit is not finite");
  }
  return policy;
}

PpoBatch make_ppo_batch(std::span<const double> old_probs, std::size_t num_devices, std::span<const Choice> choices,
                        std::span<const double> advantages) {
  PLACELAB_CHECK(num_devices > 0 && old_probs.size() % num_devices == 0) << "old_probs size " << old_probs.size();
  PLACELAB_CHECK(choices.size() == advantages.size() && !choices.empty()) << "batch of " << choices.size();
  const std::size_t G = old_probs.size() / num_devices;
  PpoBatch b;
  b.num_devices = num_devices;
  b.old_probs.assign(old_probs.begin(), old_probs.end());
  b.weight.assign(old_probs.size(), 0.0);
  const double inv_k = 1.0 / static_cast<double>(choices.size());
  for (std::size_t n = 0; n < choices.size(); ++n) {
    PLACELAB_CHECK(choices[n].size() == G) << "choice " << n << " has " << choices[n].size() << " groups";
    for (std::size_t m = 0; m < G; ++m) b.weight[m * num_devices + choices[n][m]] += advantages[n] * inv_k;
  }
  for (double p : old_probs)
    if (p > 0) b.old_neg_entropy += p * std::log(p);
  return b;
}

double ppo_objective(const SoftmaxTablePolicy& policy, const PpoBatch& batch, double beta, std::span<double> grad) {
  const std::size_t G = policy.num_groups(), D = policy.num_devices();
  PLACELAB_CHECK(batch.num_devices == D && batch.old_probs.size() == G * D) << "PPO batch shape";
  PLACELAB_CHECK(grad.empty() || grad.size() == G * D) << "grad size " << grad.size();
  const std::span<const double> logits = policy.logits();
  std::vector<double> q(D), w(D);
  double ratio_term = 0, cross = 0;  // cross = Σ p log q
  for (std::size_t m = 0; m < G; ++m) {
    const double* u = logits.data() + m * D;
    const double* p = batch.old_probs.data() + m * D;
    const double* s = batch.weight.data() + m * D;
    const double mx = *std::max_element(u, u + D);
    double sum = 0;
    for (std::size_t j = 0; j < D; ++j) sum += (q[j] = std::exp(u[j] - mx));
    const double lse = mx + std::log(sum);
    double wsum = 0;
    for (std::size_t j = 0; j < D; ++j) {
      q[j] /= sum;
      // log q from the logits: exact even where q underflows to 0.
      if (p[j] > 0) cross += p[j] * (u[j] - lse);
      w[j] = s[j] != 0 ? s[j] * q[j] / p[j] : 0.0;
      ratio_term += w[j];
      wsum += w[j];
    }
    if (grad.empty()) continue;
    // ∂/∂u_k of Σ_j S_j q_j/p_j is w_k − q_k Σ_j w_j; of −β KL it is β (p_k − q_k).
    double* g = grad.data() + m * D;
    for (std::size_t k = 0; k < D; ++k) g[k] = w[k] - q[k] * wsum - beta * (q[k] - p[k]);
  }
  return ratio_term - beta * (batch.old_neg_entropy - cross);
}

double ppo_objective(const SoftmaxTablePolicy& policy, std::span<const double> old_probs,
                     std::span<const Choice> choices, std::span<const double> advantages, double beta,
                     std::span<double> grad) {
  return ppo_objective(policy, make_ppo_batch(old_probs, policy.num_devices(), choices, advantages), beta, grad);
}

double mean_kl(std::span<const double> p, std::span<const double> q, std::size_t num_devices) {
  PLACELAB_CHECK(p.size() == q.size() && num_devices > 0 && p.size() % num_devices == 0) << "KL shapes";
  double kl = 0;
  // q below the smallest normal double is treated as that value: a finite (huge) divergence.
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0) kl += p[i] * (std::log(p[i]) - std::log(std::max(q[i], std::numeric_limits<double>::min())));
  return kl / static_cast<double>(p.size() / num_devices);
}

std::vector<double> cross_entropy_solution(std::span<const Choice> elites, std::size_t num_groups,
                                           std::size_t num_devices) {
  PLACELAB_CHECK(!elites.empty()) << "cross-entropy needs at least one elite placement";
  std::vector<double> p(num_groups * num_devices, 0.0);
  const double w = 1.0 / static_cast<double>(elites.size());
  for (const Choice& c : elites) {
    PLACELAB_CHECK(c.size() == num_groups) << "elite with " << c.size() << " groups";
    for (std::size_t m = 0; m < num_groups; ++m) p[m * num_devices + c[m]] += w;
  }
  return p;
}

}  // namespace placelab
