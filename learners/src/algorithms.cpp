#include "placelab/learners/algorithms.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "option_table.h"
#include "placelab/core/error.h"
#include "registry_entries.h"
#include "require.h"
#include "state_json.h"

namespace placelab {

using detail::require;


// ---- SearchSpace -------------------------------------------------------------------------------

void SearchSpace::validate() const {
  require(num_groups >= 1, "search_space", "num_groups", std::to_string(num_groups), "must be >= 1");
  require(!devices.empty() && devices.size() <= 65535, "search_space", "devices",
          std::to_string(devices.size()) + " devices", "must list 1 to 65535 devices");
  std::vector<DeviceId> sorted = devices;
  std::sort(sorted.begin(), sorted.end());
  require(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "search_space", "devices",
          "a repeated device id", "devices must be distinct");
}

// ---- Options -----------------------------------------------------------------------------------

void ReinforceOptions::validate() const {
  const char* o = "reinforce";
  require(samples_per_update >= 1 && samples_per_update <= kMaxSamplesPerUpdate, o, "samples_per_update",
          std::to_string(samples_per_update), "must be in [1, 100000]");
  require(learning_rate > 0 && std::isfinite(learning_rate), o, "learning_rate", format_6g(learning_rate), "must be > 0");
  require(adam_beta1 >= 0 && adam_beta1 < 1, o, "adam_beta1", format_6g(adam_beta1), "must be in [0, 1)");
  require(adam_beta2 >= 0 && adam_beta2 < 1, o, "adam_beta2", format_6g(adam_beta2), "must be in [0, 1)");
  require(adam_epsilon > 0 && std::isfinite(adam_epsilon), o, "adam_epsilon", format_6g(adam_epsilon), "must be > 0");
  require(baseline_decay >= 0 && baseline_decay < 1, o, "baseline_decay", format_6g(baseline_decay), "must be in [0, 1)");
  require(failing_signal > 0 && std::isfinite(failing_signal), o, "failing_signal", format_6g(failing_signal), "must be > 0");
  require(feasible_only_after >= 0 && feasible_only_after <= 1, o, "feasible_only_after", format_6g(feasible_only_after),
          "must be in [0, 1]");
}

namespace {
void validate_ppo_fields(const char* o, int sga_steps, double learning_rate, double beta_init, double kl_target,
                         double baseline_decay, double oom_time_s) {
  // An update's loop: bounded, so that no value makes one update run for ever (and SIGTERM, read
  // between updates, is honoured).
  require(sga_steps >= 1 && sga_steps <= 1000, o, "sga_steps", std::to_string(sga_steps), "must be in [1, 1000]");
  require(learning_rate > 0 && std::isfinite(learning_rate), o, "learning_rate", format_6g(learning_rate), "must be > 0");
  require(beta_init > 0 && std::isfinite(beta_init), o, "beta_init", format_6g(beta_init), "must be > 0");
  require(kl_target > 0 && std::isfinite(kl_target), o, "kl_target", format_6g(kl_target), "must be > 0");
  require(baseline_decay >= 0 && baseline_decay < 1, o, "baseline_decay", format_6g(baseline_decay), "must be in [0, 1)");
  require(oom_time_s > 0 && std::isfinite(oom_time_s), o, "oom_time_s", format_6g(oom_time_s), "must be > 0");
}
void validate_ce_fields(const char* o, double elite_fraction, double epsilon, double oom_time_s) {
  require(elite_fraction > 0 && elite_fraction <= 1, o, "elite_fraction", format_6g(elite_fraction), "must be in (0, 1]");
  require(epsilon >= 0 && epsilon <= 1, o, "epsilon", format_6g(epsilon), "must be in [0, 1]");
  require(oom_time_s > 0 && std::isfinite(oom_time_s), o, "oom_time_s", format_6g(oom_time_s), "must be > 0");
}
}  // namespace

void PpoOptions::validate() const {
  require(samples_per_update >= 1 && samples_per_update <= kMaxSamplesPerUpdate, "ppo", "samples_per_update",
          std::to_string(samples_per_update), "must be in [1, 100000]");
  validate_ppo_fields("ppo", sga_steps, learning_rate, beta_init, kl_target, baseline_decay, oom_time_s);
}

void CrossEntropyOptions::validate() const {
  require(samples_per_update >= 1 && samples_per_update <= kMaxSamplesPerUpdate, "cross_entropy", "samples_per_update",
          std::to_string(samples_per_update), "must be in [1, 100000]");
  validate_ce_fields("cross_entropy", elite_fraction, epsilon, oom_time_s);
}

void PostOptions::validate() const {
  require(ppo_every >= 1 && ppo_every <= kMaxSamplesPerUpdate, "post", "ppo_every", std::to_string(ppo_every),
          "must be in [1, 100000]");
  require(ce_every >= 1 && ce_every <= kMaxSamplesPerUpdate, "post", "ce_every", std::to_string(ce_every),
          "must be in [1, 100000]");
  require(ce_every % ppo_every == 0, "post", "ce_every", std::to_string(ce_every),
          ("must be a multiple of ppo_every (" + std::to_string(ppo_every) + ")").c_str());
  validate_ppo_fields("post", sga_steps, learning_rate, beta_init, kl_target, baseline_decay, oom_time_s);
  validate_ce_fields("post", elite_fraction, epsilon, oom_time_s);
}

// ---- TableLearner ------------------------------------------------------------------------------

namespace {
SearchSpace validated(SearchSpace space) {
  space.validate();
  return space;
}
}  // namespace

TableLearner::TableLearner(SearchSpace space, uint64_t seed)
    : space_(validated(std::move(space))), policy_(space_.num_groups, space_.devices.size()), rng_(seed) {
  const DeviceId max_id = *std::max_element(space_.devices.begin(), space_.devices.end());
  device_index_.assign(static_cast<std::size_t>(max_id) + 1, 0);
  for (std::size_t i = 0; i < space_.devices.size(); ++i)
    device_index_[space_.devices[i]] = static_cast<uint16_t>(i + 1);
}

TableLearner::~TableLearner() = default;

void TableLearner::set_sample_budget(int64_t samples) {
  if (samples < 1) throw InputError("sample_budget = " + std::to_string(samples) + ": must be >= 1");
  budget_ = samples;
}

std::vector<Placement> TableLearner::propose(std::size_t max_count) {
  PLACELAB_CHECK(max_count >= 1) << "propose(0)";
  const std::size_t count = std::min(max_count, samples_until_update());
  std::vector<Placement> out(count, Placement(space_.num_groups));
  Choice choice(space_.num_groups);
  const std::vector<double> probs = policy_.probabilities();
  for (auto& p : out) {
    SoftmaxTablePolicy::sample(probs, space_.devices.size(), rng_, choice);
    for (std::size_t m = 0; m < choice.size(); ++m) p[m] = space_.devices[choice[m]];
  }
  return out;
}

Placement TableLearner::mode() const {
  const Choice c = policy_.mode();
  Placement out(c.size());
  for (std::size_t m = 0; m < c.size(); ++m) out[m] = space_.devices[c[m]];
  return out;
}

Choice TableLearner::to_choice(const Placement& group_placement) const {
  PLACELAB_CHECK(group_placement.size() == space_.num_groups)
      << "group placement with " << group_placement.size() << " entries for " << space_.num_groups << " groups";
  Choice c(group_placement.size());
  for (std::size_t m = 0; m < c.size(); ++m) {
    const DeviceId d = group_placement[m];
    PLACELAB_CHECK(d < device_index_.size() && device_index_[d] != 0) << "device " << d << " is not in the space";
    c[m] = static_cast<uint16_t>(device_index_[d] - 1);
  }
  return c;
}

std::string TableLearner::save_common(const std::string& extra_json) const {
  nlohmann::json j = detail::state_header(*this);
  j["policy"] = policy_.to_string();
  j["rng"] = detail::rng_to_string(rng_);
  j["budget"] = budget_;
  j["samples_seen"] = samples_seen_;
  j["extra"] = nlohmann::json::parse(extra_json);
  return j.dump();
}

std::string TableLearner::load_common(const std::string& state) {
  const nlohmann::json j = detail::parse_state(state, "learner state");
  try {
    detail::check_state_header(j, *this);
    SoftmaxTablePolicy policy = SoftmaxTablePolicy::from_string(j.at("policy").get<std::string>());
    if (policy.num_groups() != space_.num_groups || policy.num_devices() != space_.devices.size())
      throw InputError("learner state: policy: shape must match the search space");
    policy_ = std::move(policy);
    rng_ = detail::rng_from_string(j.at("rng").get<std::string>());
    budget_ = j.at("budget").get<int64_t>();
    samples_seen_ = j.at("samples_seen").get<int64_t>();
    return j.at("extra").dump();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("learner state: ") + e.what());
  }
}

namespace {
nlohmann::json choices_json(const std::vector<Choice>& cs) {
  nlohmann::json out = nlohmann::json::array();
  for (const Choice& c : cs) out.push_back(c);
  return out;
}
std::vector<Choice> choices_from(const nlohmann::json& j, std::size_t groups, std::size_t devices) {
  std::vector<Choice> out;
  for (const auto& c : j) {
    out.push_back(c.get<Choice>());
    if (out.back().size() != groups) throw InputError("learner state: a buffered choice has the wrong size");
    for (uint16_t d : out.back())
      if (d >= devices) throw InputError("learner state: a buffered choice names an unknown device");
  }
  return out;
}
}  // namespace

// ---- REINFORCE ---------------------------------------------------------------------------------

ReinforceLearner::ReinforceLearner(SearchSpace space, ReinforceOptions options, uint64_t seed)
    : TableLearner(std::move(space), seed), options_(options), baseline_(options.failing_signal) {
  options_.validate();
  adam_m_.assign(policy_.logits().size(), 0.0);
  adam_v_.assign(policy_.logits().size(), 0.0);
}

std::size_t ReinforceLearner::samples_until_update() const {
  return static_cast<std::size_t>(options_.samples_per_update) - batch_.size();
}

void ReinforceLearner::observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) {
  PLACELAB_CHECK(group_placements.size() == measurements.size()) << "placements and measurements differ in number";
  PLACELAB_CHECK(group_placements.size() <= samples_until_update()) << "observe beyond the update boundary";
  for (std::size_t i = 0; i < group_placements.size(); ++i) {
    const Measurement& m = measurements[i];
    const double reward = m.oom ? options_.failing_signal : std::sqrt(std::max(0.0, m.step_time_s));
    batch_.push_back(to_choice(group_placements[i]));
    batch_reward_.push_back(reward);
    batch_ran_.push_back(m.oom ? 0 : 1);
    ++samples_seen_;
  }
  if (batch_.size() == static_cast<std::size_t>(options_.samples_per_update)) update();
}

void ReinforceLearner::update() {
  // Mirhoseini et al.: ∇J ≈ 1/K Σ (R(P_i) − B) ∇ log p(P_i), R = √T, descended with Adam. The
  // advantages use B from before this batch; then B absorbs the batch sample by sample.
  const int64_t budget = budget_ > 0 ? budget_ : 1;
  const bool feasible_only = static_cast<double>(samples_seen_) > options_.feasible_only_after * static_cast<double>(budget) &&
                             options_.feasible_only_after < 1.0;
  // Σ_n w_n ∇log f(d_n) = Σ_n w_n e_{d_n} − (Σ_n w_n) softmax(u), per group: one softmax per update.
  const std::size_t D = space_.devices.size();
  std::vector<double> grad = policy_.probabilities();
  double wsum = 0;
  std::size_t used = 0;
  std::vector<double> chosen(grad.size(), 0.0);
  for (std::size_t n = 0; n < batch_.size(); ++n) {
    if (feasible_only && !batch_ran_[n]) continue;
    const double w = batch_reward_[n] - baseline_;
    for (std::size_t m = 0; m < space_.num_groups; ++m) chosen[m * D + batch_[n][m]] += w;
    wsum += w;
    ++used;
  }
  for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = chosen[i] - wsum * grad[i];
  if (used > 0) {
    ++adam_t_;
    const double b1 = options_.adam_beta1, b2 = options_.adam_beta2;
    const double c1 = 1.0 - std::pow(b1, static_cast<double>(adam_t_));
    const double c2 = 1.0 - std::pow(b2, static_cast<double>(adam_t_));
    auto u = policy_.mutable_logits();
    for (std::size_t i = 0; i < grad.size(); ++i) {
      const double g = grad[i] / static_cast<double>(used);
      adam_m_[i] = b1 * adam_m_[i] + (1 - b1) * g;
      adam_v_[i] = b2 * adam_v_[i] + (1 - b2) * g * g;
      u[i] -= options_.learning_rate * (adam_m_[i] / c1) / (std::sqrt(adam_v_[i] / c2) + options_.adam_epsilon);
    }
  }
  for (std::size_t n = 0; n < batch_.size(); ++n)
    if (!feasible_only || batch_ran_[n])
      baseline_ = options_.baseline_decay * baseline_ + (1 - options_.baseline_decay) * batch_reward_[n];
  batch_.clear();
  batch_reward_.clear();
  batch_ran_.clear();
}

std::string ReinforceLearner::save_state() const {
  nlohmann::json e;
  e["baseline"] = detail::bits(baseline_);
  e["batch"] = choices_json(batch_);
  e["batch_reward"] = detail::bits(batch_reward_);
  e["batch_ran"] = batch_ran_;
  e["adam_m"] = detail::bits(adam_m_);
  e["adam_v"] = detail::bits(adam_v_);
  e["adam_t"] = adam_t_;
  return save_common(e.dump());
}

void ReinforceLearner::load_state(const std::string& state) {
  const nlohmann::json e = nlohmann::json::parse(load_common(state));
  try {
    baseline_ = detail::unbits(e.at("baseline"));
    batch_ = choices_from(e.at("batch"), space_.num_groups, space_.devices.size());
    batch_reward_ = detail::unbits_vector(e.at("batch_reward"));
    batch_ran_ = e.at("batch_ran").get<std::vector<uint8_t>>();
    adam_m_ = detail::unbits_vector(e.at("adam_m"));
    adam_v_ = detail::unbits_vector(e.at("adam_v"));
    adam_t_ = e.at("adam_t").get<int64_t>();
  } catch (const nlohmann::json::exception& ex) {
    throw InputError(std::string("learner state: ") + ex.what());
  }
  if (batch_reward_.size() != batch_.size() || batch_ran_.size() != batch_.size() ||
      adam_m_.size() != policy_.logits().size() || adam_v_.size() != policy_.logits().size() ||
      batch_.size() >= static_cast<std::size_t>(options_.samples_per_update))
    throw InputError("learner state: reinforce buffers are inconsistent with the options");
}

// ---- PPO / CE / Post ---------------------------------------------------------------------------

JointLearner::JointLearner(SearchSpace space, Config config, uint64_t seed)
    : TableLearner(std::move(space), seed), config_(config), beta_(config.beta_init) {}

std::size_t JointLearner::samples_until_update() const {
  const auto n = static_cast<int64_t>(samples_seen_);
  int64_t next = INT64_MAX;
  if (config_.ppo_every > 0) next = std::min(next, config_.ppo_every - n % config_.ppo_every);
  if (config_.ce_every > 0) next = std::min(next, config_.ce_every - n % config_.ce_every);
  return static_cast<std::size_t>(next);
}

double JointLearner::current_epsilon() const {
  if (!config_.decay_epsilon) return config_.epsilon;
  // Linear decay to 0 over the budget; evaluated at the sample count where the update happens.
  const double budget = static_cast<double>(budget_ > 0 ? budget_ : 1);
  return config_.epsilon * std::max(0.0, 1.0 - static_cast<double>(samples_seen_) / budget);
}

void JointLearner::observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) {
  PLACELAB_CHECK(group_placements.size() == measurements.size()) << "placements and measurements differ in number";
  PLACELAB_CHECK(group_placements.size() <= samples_until_update()) << "observe beyond the update boundary";
  for (std::size_t i = 0; i < group_placements.size(); ++i) {
    const double t = measurements[i].oom ? config_.oom_time_s : measurements[i].step_time_s;
    if (config_.ppo_every > 0 && samples_seen_ % config_.ppo_every == 0) {
      batch_baseline_ = baseline_;
      have_batch_baseline_ = have_baseline_;
    }
    samples_.push_back(to_choice(group_placements[i]));
    times_.push_back(t);
    baseline_ = have_baseline_ ? config_.baseline_decay * baseline_ + (1 - config_.baseline_decay) * t : t;
    have_baseline_ = true;
    ++samples_seen_;
  }
  // Post, Algorithm 1: at n % N == 0 solve CE (and skip PPO); else at n % K == 0 run PPO.
  const int64_t n = samples_seen_;
  if (config_.ce_every > 0 && n % config_.ce_every == 0) {
    ce_update();
  } else if (config_.ppo_every > 0 && n % config_.ppo_every == 0) {
    ppo_update();
  }
}

void JointLearner::ppo_update() {
  const std::size_t k = static_cast<std::size_t>(config_.ppo_every);
  PLACELAB_CHECK(samples_.size() >= k) << "PPO batch of " << samples_.size();
  const std::span<const Choice> batch(samples_.data() + samples_.size() - k, k);
  const std::span<const double> times(times_.data() + times_.size() - k, k);
  double b = batch_baseline_;
  if (!have_batch_baseline_) b = std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(k);
  std::vector<double> advantages(k);
  for (std::size_t i = 0; i < k; ++i) advantages[i] = b - times[i];

  const std::vector<double> old_probs = policy_.probabilities();
  const PpoBatch condensed = make_ppo_batch(old_probs, space_.devices.size(), batch, advantages);
  std::vector<double> grad(old_probs.size());
  for (int step = 0; step < config_.sga_steps; ++step) {
    ppo_objective(policy_, condensed, beta_, grad);
    auto u = policy_.mutable_logits();
    for (std::size_t i = 0; i < grad.size(); ++i) u[i] += config_.learning_rate * grad[i];
  }
  last_kl_ = mean_kl(old_probs, policy_.probabilities(), space_.devices.size());
  // Adaptive KL penalty (Schulman et al. 2017, as Spotlight and Post use it).
  if (last_kl_ < config_.kl_target / 1.5) beta_ /= 2;
  else if (last_kl_ > config_.kl_target * 1.5) beta_ *= 2;
  if (config_.ce_every == 0) {
    samples_.clear();
    times_.clear();
  }
}

void JointLearner::ce_update() {
  const std::size_t n = samples_.size();
  const std::size_t elites = std::max<std::size_t>(
      1, std::min(n, static_cast<std::size_t>(std::ceil(config_.elite_fraction * static_cast<double>(n) - 1e-9))));
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Stable: equal times keep sampling order, so the elite set is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return times_[a] < times_[b]; });
  std::vector<Choice> best;
  for (std::size_t i = 0; i < elites; ++i) best.push_back(samples_[order[i]]);
  std::vector<double> p = cross_entropy_solution(best, space_.num_groups, space_.devices.size());
  const double eps = current_epsilon();
  const std::size_t D = space_.devices.size();
  for (std::size_t m = 0; m < space_.num_groups; ++m) {
    std::span<double> row(p.data() + m * D, D);
    for (double& x : row) x = (1 - eps) * x + eps / static_cast<double>(D);
    policy_.set_probabilities(m, row);
  }
  samples_.clear();
  times_.clear();
}

std::string JointLearner::save_state() const {
  nlohmann::json e;
  e["beta"] = detail::bits(beta_);
  e["baseline"] = detail::bits(baseline_);
  e["have_baseline"] = have_baseline_;
  e["batch_baseline"] = detail::bits(batch_baseline_);
  e["have_batch_baseline"] = have_batch_baseline_;
  e["last_kl"] = detail::bits(last_kl_);
  e["samples"] = choices_json(samples_);
  e["times"] = detail::bits(times_);
  return save_common(e.dump());
}

void JointLearner::load_state(const std::string& state) {
  const nlohmann::json e = nlohmann::json::parse(load_common(state));
  try {
    beta_ = detail::unbits(e.at("beta"));
    baseline_ = detail::unbits(e.at("baseline"));
    have_baseline_ = e.at("have_baseline").get<bool>();
    batch_baseline_ = detail::unbits(e.at("batch_baseline"));
    have_batch_baseline_ = e.at("have_batch_baseline").get<bool>();
    last_kl_ = detail::unbits(e.at("last_kl"));
    samples_ = choices_from(e.at("samples"), space_.num_groups, space_.devices.size());
    times_ = detail::unbits_vector(e.at("times"));
  } catch (const nlohmann::json::exception& ex) {
    throw InputError(std::string("learner state: ") + ex.what());
  }
  if (times_.size() != samples_.size())
    throw InputError("learner state: samples and times differ in number");
}

namespace {
JointLearner::Config ppo_config(const PpoOptions& o) {
  o.validate();
  JointLearner::Config c;
  c.ppo_every = o.samples_per_update;
  c.sga_steps = o.sga_steps;
  c.learning_rate = o.learning_rate;
  c.beta_init = o.beta_init;
  c.kl_target = o.kl_target;
  c.baseline_decay = o.baseline_decay;
  c.oom_time_s = o.oom_time_s;
  return c;
}
JointLearner::Config ce_config(const CrossEntropyOptions& o) {
  o.validate();
  JointLearner::Config c;
  c.ce_every = o.samples_per_update;
  c.elite_fraction = o.elite_fraction;
  c.epsilon = o.epsilon;
  c.decay_epsilon = o.decay_epsilon;
  c.oom_time_s = o.oom_time_s;
  return c;
}
JointLearner::Config post_config(const PostOptions& o) {
  o.validate();
  JointLearner::Config c;
  c.ppo_every = o.ppo_every;
  c.ce_every = o.ce_every;
  c.sga_steps = o.sga_steps;
  c.learning_rate = o.learning_rate;
  c.beta_init = o.beta_init;
  c.kl_target = o.kl_target;
  c.baseline_decay = o.baseline_decay;
  c.elite_fraction = o.elite_fraction;
  c.epsilon = o.epsilon;
  c.decay_epsilon = o.decay_epsilon;
  c.oom_time_s = o.oom_time_s;
  return c;
}
}  // namespace

PpoLearner::PpoLearner(SearchSpace space, PpoOptions options, uint64_t seed)
    : JointLearner(std::move(space), ppo_config(options), seed) {}
CrossEntropyLearner::CrossEntropyLearner(SearchSpace space, CrossEntropyOptions options, uint64_t seed)
    : JointLearner(std::move(space), ce_config(options), seed) {}
PostLearner::PostLearner(SearchSpace space, PostOptions options, uint64_t seed)
    : JointLearner(std::move(space), post_config(options), seed) {}

// ---- Registry entries --------------------------------------------------------------------------
// Keys and rules are the ones scenario files have always used; the rules repeat what each
// Options::validate() checks (registry_test breaks each rule and expects validate's message).

namespace {

using detail::OptionTable;

const OptionTable<PostOptions>& post_options() {
  using O = PostOptions;
  static const OptionTable<O> kTable(
      "post", {{"ppo_every", &O::ppo_every, "in [1, 100000]", "K: a PPO update every K samples, unless it is also a CE sample"},
               {"ce_every", &O::ce_every, "in [1, 100000] and a multiple of ppo_every", "N: a cross-entropy update every N samples"},
               {"sga_steps", &O::sga_steps, "in [1, 1000]", "gradient ascent steps on Post Eq. 11 per PPO update"},
               {"learning_rate", &O::learning_rate, "> 0", "SGA step size on the logits"},
               {"beta_init", &O::beta_init, "> 0", "initial KL penalty coefficient β, adapted after each PPO update"},
               {"kl_target", &O::kl_target, "> 0", "β halves when the KL is below target/1.5, doubles above 1.5·target"},
               {"baseline_decay", &O::baseline_decay, "in [0, 1)", "b ← decay·b + (1−decay)·T per sample"},
               {"elite_fraction", &O::elite_fraction, "in (0, 1]", "ρ: the best ⌈ρN⌉ placements are the elites"},
               {"epsilon", &O::epsilon, "in [0, 1]", "ε: mixing with uniform after each CE update"},
               {"decay_epsilon", &O::decay_epsilon, "", "ε falls linearly to 0 over the sample budget"},
               {"oom_time_s", &O::oom_time_s, "> 0", "step time (s) counted for an OOM placement (Post: 100 s)"}});
  return kTable;
}

const OptionTable<PpoOptions>& ppo_options() {
  using O = PpoOptions;
  static const OptionTable<O> kTable(
      "ppo", {{"samples_per_update", &O::samples_per_update, "in [1, 100000]", "K: a PPO update every K samples"},
              {"sga_steps", &O::sga_steps, "in [1, 1000]", "gradient ascent steps on Post Eq. 11 per update"},
              {"learning_rate", &O::learning_rate, "> 0", "SGA step size on the logits"},
              {"beta_init", &O::beta_init, "> 0", "initial KL penalty coefficient β, adapted after each update"},
              {"kl_target", &O::kl_target, "> 0", "β halves when the KL is below target/1.5, doubles above 1.5·target"},
              {"baseline_decay", &O::baseline_decay, "in [0, 1)", "b ← decay·b + (1−decay)·T per sample"},
              {"oom_time_s", &O::oom_time_s, "> 0", "step time (s) counted for an OOM placement (Post: 100 s)"}});
  return kTable;
}

const OptionTable<CrossEntropyOptions>& cross_entropy_options() {
  using O = CrossEntropyOptions;
  static const OptionTable<O> kTable(
      "cross_entropy",
      {{"samples_per_update", &O::samples_per_update, "in [1, 100000]", "N: a cross-entropy update every N samples"},
       {"elite_fraction", &O::elite_fraction, "in (0, 1]", "ρ: the best ⌈ρN⌉ placements are the elites"},
       {"epsilon", &O::epsilon, "in [0, 1]", "ε: mixing with uniform after each update"},
       {"decay_epsilon", &O::decay_epsilon, "", "ε falls linearly to 0 over the sample budget"},
       {"oom_time_s", &O::oom_time_s, "> 0", "step time (s) counted for an OOM placement (Post: 100 s)"}});
  return kTable;
}

const OptionTable<ReinforceOptions>& reinforce_options() {
  using O = ReinforceOptions;
  static const OptionTable<O> kTable(
      "reinforce",
      {{"samples_per_update", &O::samples_per_update, "in [1, 100000]", "K: placements per gradient step (Post's 12 workers)"},
       {"learning_rate", &O::learning_rate, "> 0", "Adam step size on the logits"},
       {"adam_beta1", &O::adam_beta1, "in [0, 1)", "Adam's first-moment decay"},
       {"adam_beta2", &O::adam_beta2, "in [0, 1)", "Adam's second-moment decay"},
       {"adam_epsilon", &O::adam_epsilon, "> 0", "Adam's denominator term"},
       {"baseline_decay", &O::baseline_decay, "in [0, 1)", "B ← decay·B + (1−decay)·√T per sample"},
       {"failing_signal", &O::failing_signal, "> 0", "√T counted for an OOM placement (√100 s, Post's OOM time)"},
       {"feasible_only_after", &O::feasible_only_after, "in [0, 1]",
        "after this fraction of the budget only placements that ran update the policy (1: never)"}});
  return kTable;
}

}  // namespace

LearnerEntry detail::post_learner_entry() {
  return {.name = "post",
          .aliases = {},
          .summary = "Post: PPO every K samples and closed-form cross-entropy every N samples on a softmax table",
          .paper = "Gao, Chen, Li, NeurIPS 2018 (Post), Algorithm 1",
          .options = post_options().infos(),
          .policy_gradient = false,
          .needs_problem = false,
          .validate = [](const OptionValues& v) { post_options().build(v); },
          .make = [](const OptionValues& v, const LearnerContext& c) -> std::unique_ptr<Learner> {
            return std::make_unique<PostLearner>(c.space, post_options().build(v), c.seed);
          }};
}

LearnerEntry detail::ppo_learner_entry() {
  return {.name = "ppo",
          .aliases = {},
          .summary = "PPO with adaptive KL penalty on a softmax table, every K samples (Post with CE off)",
          .paper = "Gao, Chen, Li, ICML 2018 (Spotlight); Post (NeurIPS 2018) Eq. 11",
          .options = ppo_options().infos(),
          .policy_gradient = false,
          .needs_problem = false,
          .validate = [](const OptionValues& v) { ppo_options().build(v); },
          .make = [](const OptionValues& v, const LearnerContext& c) -> std::unique_ptr<Learner> {
            return std::make_unique<PpoLearner>(c.space, ppo_options().build(v), c.seed);
          }};
}

LearnerEntry detail::cross_entropy_learner_entry() {
  return {.name = "cross_entropy",
          .aliases = {},
          .summary = "closed-form cross-entropy on a softmax table every N samples, mixed with uniform (Post with PPO off)",
          .paper = "Gao, Chen, Li, NeurIPS 2018 (Post), Eq. 10",
          .options = cross_entropy_options().infos(),
          .policy_gradient = false,
          .needs_problem = false,
          .validate = [](const OptionValues& v) { cross_entropy_options().build(v); },
          .make = [](const OptionValues& v, const LearnerContext& c) -> std::unique_ptr<Learner> {
            return std::make_unique<CrossEntropyLearner>(c.space, cross_entropy_options().build(v), c.seed);
          }};
}

LearnerEntry detail::reinforce_learner_entry() {
  return {.name = "reinforce",
          .aliases = {"policy_gradient"},
          .summary = "policy gradient: REINFORCE on E[√T] with a moving-average baseline, failing signal for OOM, Adam",
          .paper = "Mirhoseini et al., ICML 2017 (REINFORCE on sqrt(T)), on Post's softmax table",
          .options = reinforce_options().infos(),
          .policy_gradient = true,
          .needs_problem = false,
          .validate = [](const OptionValues& v) { reinforce_options().build(v); },
          .make = [](const OptionValues& v, const LearnerContext& c) -> std::unique_ptr<Learner> {
            return std::make_unique<ReinforceLearner>(c.space, reinforce_options().build(v), c.seed);
          }};
}

}  // namespace placelab
