#include "placelab/learners/policy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>

#include "placelab/graph/error.h"

namespace placelab {

double uniform01(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

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
  std::vector<double> p(num_devices_);
  for (std::size_t m = 0; m < num_groups_; ++m) {
    probabilities(m, p);
    const double r = uniform01(rng);
    double acc = 0;
    std::size_t j = 0;
    // The last device takes any rounding remainder, so a choice is always made.
    for (; j + 1 < num_devices_; ++j) {
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

double ppo_objective(const SoftmaxTablePolicy& policy, std::span<const double> old_probs,
                     std::span<const Choice> choices, std::span<const double> advantages, double beta,
                     std::span<double> grad) {
  const std::size_t G = policy.num_groups(), D = policy.num_devices();
  PLACELAB_CHECK(old_probs.size() == G * D) << "old_probs size " << old_probs.size();
  PLACELAB_CHECK(choices.size() == advantages.size() && !choices.empty()) << "batch of " << choices.size();
  PLACELAB_CHECK(grad.empty() || grad.size() == G * D) << "grad size " << grad.size();
  const double inv_k = 1.0 / static_cast<double>(choices.size());
  std::vector<double> q(G * D);
  policy.probabilities(q);
  if (!grad.empty()) std::fill(grad.begin(), grad.end(), 0.0);
  double objective = 0;
  for (std::size_t n = 0; n < choices.size(); ++n) {
    const Choice& c = choices[n];
    PLACELAB_CHECK(c.size() == G) << "choice " << n << " has " << c.size() << " groups";
    const double a = advantages[n] * inv_k;
    for (std::size_t m = 0; m < G; ++m) {
      const std::size_t d = c[m];
      const double ratio = q[m * D + d] / old_probs[m * D + d];
      objective += a * ratio;
      if (grad.empty()) continue;
      // ∂r/∂u_k = r (δ_kd − q_k)
      double* g = grad.data() + m * D;
      const double w = a * ratio;
      for (std::size_t k = 0; k < D; ++k) g[k] -= w * q[m * D + k];
      g[d] += w;
    }
  }
  double kl = 0;
  for (std::size_t i = 0; i < G * D; ++i)
    if (old_probs[i] > 0) kl += old_probs[i] * (std::log(old_probs[i]) - std::log(q[i]));
  objective -= beta * kl;
  if (!grad.empty())
    for (std::size_t i = 0; i < G * D; ++i) grad[i] -= beta * (q[i] - old_probs[i]);
  return objective;
}

double mean_kl(std::span<const double> p, std::span<const double> q, std::size_t num_devices) {
  PLACELAB_CHECK(p.size() == q.size() && num_devices > 0 && p.size() % num_devices == 0) << "KL shapes";
  double kl = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0) kl += p[i] * (std::log(p[i]) - std::log(q[i]));
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
