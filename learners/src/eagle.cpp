#include "placelab/learners/eagle.h"

#include <algorithm>
#include <cmath>

#include "placelab/core/error.h"
#include "registry_entries.h"
#include "require.h"
#include "seq2seq_options.h"
#include "state_json.h"

namespace placelab {

using detail::require;

EagleOptions::EagleOptions() {
  hidden = 512;
  bidirectional = true;
  attention = "before";
  order = "id";
}

void EagleOptions::validate(const std::string& o) const {
  validate_policy(o);
  validate_grouper(o, inputs);
  require(samples_per_update >= 1 && samples_per_update <= 1024, o, "samples_per_update",
          std::to_string(samples_per_update), "must be in [1, 1024]");
  require(ppo_epochs >= 1 && ppo_epochs <= 100, o, "ppo_epochs", std::to_string(ppo_epochs), "must be in [1, 100]");
  require(clip > 0 && clip < 1, o, "clip", format_6g(clip), "must be in (0, 1)");
  require(entropy >= 0 && std::isfinite(entropy), o, "entropy", format_6g(entropy), "must be >= 0");
  require(learning_rate > 0 && std::isfinite(learning_rate), o, "learning_rate", format_6g(learning_rate), "must be > 0");
  require(adam_beta1 >= 0 && adam_beta1 < 1, o, "adam_beta1", format_6g(adam_beta1), "must be in [0, 1)");
  require(adam_beta2 >= 0 && adam_beta2 < 1, o, "adam_beta2", format_6g(adam_beta2), "must be in [0, 1)");
  require(adam_epsilon > 0 && std::isfinite(adam_epsilon), o, "adam_epsilon", format_6g(adam_epsilon), "must be > 0");
  require(grad_clip >= 0 && std::isfinite(grad_clip), o, "grad_clip", format_6g(grad_clip), "must be >= 0 (0 = no clipping)");
  require(baseline_decay >= 0 && baseline_decay < 1, o, "baseline_decay", format_6g(baseline_decay), "must be in [0, 1)");
  require(failing_signal > 0 && std::isfinite(failing_signal), o, "failing_signal", format_6g(failing_signal), "must be > 0");
  require(ce_every >= 0, o, "ce_every", std::to_string(ce_every), "must be >= 0 (0 = no cross-entropy updates)");
  require(elites >= 1 && elites <= 1000, o, "elites", std::to_string(elites), "must be in [1, 1000]");
  require(ce_steps >= 1 && ce_steps <= 100, o, "ce_steps", std::to_string(ce_steps), "must be in [1, 100]");
}

EagleLearner::EagleLearner(SearchSpace space, const PlacementProblem& units, EagleOptions options, uint64_t seed,
                           std::string name)
    // `space` and `options` are read by several arguments here (in unspecified order): none moves them.
    : Seq2SeqLearner(LearnedGroups::checked_space(space, units, name), static_cast<std::size_t>(detail::validated(options, name).groups),
                     group_feature_size(static_cast<std::size_t>(options.groups), units.op_types.size()), options,
                     static_cast<std::size_t>(options.samples_per_update),
                     {options.adam_beta1, options.adam_beta2, options.adam_epsilon}, name, seed),
      name_(std::move(name)),
      options_(std::move(options)),
      groups_(units, options_.grouper(decoded_groups()), options_.order == "topological", rng_) {
  add_trainable(groups_.grouper().params());
}

void EagleLearner::prepare_batch() { groups_.sample(batch_size_, rng_, inputs_); }

Placement EagleLearner::to_placement(std::span<const uint16_t> choice, std::size_t n) const {
  return groups_.placement(choice, n, space_.devices);
}

Placement EagleLearner::mode() const {
  activations_current_ = false;  // the greedy pass replaces the batch's activations
  return groups_.mode(*policy_, space_.devices);
}

double EagleLearner::ppo_gradients(const nn::Matrix<float>& old_probs,
                                   const std::vector<std::vector<float>>& old_unit_logp, std::span<const double> A) {
  // PPO-clip per decision — a group's device, a unit's group — each with its placement's advantage:
  // maximise mean_decisions min(r·A, clip(r, 1−ε, 1+ε)·A) + c_H · mean entropy, for the placer and
  // the grouper (a ratio over a whole placement's 44k unit choices would be clipped at once).
  // The gradient of r·A in the logits is A·r·(e_a − q), and zero where the clipped term is the min.
  const double eps = options_.clip, c_h = options_.entropy;
  const auto G = static_cast<nn::Index>(steps_), K = static_cast<nn::Index>(batch_size_);
  const nn::Matrix<float>& q = policy_->probs();
  const nn::Index D = q.rows();
  const auto active = [&](double r, double adv) { return adv >= 0 ? r <= 1 + eps : r >= 1 - eps; };
  const auto surrogate = [&](double r, double adv) { return std::min(r * adv, std::clamp(r, 1 - eps, 1 + eps) * adv); };
  nn::Matrix<float> dlogits(D, G * K);
  const double scale = 1.0 / static_cast<double>(G * K);
  double objective = 0;
  for (nn::Index s = 0; s < G; ++s)
    for (nn::Index n = 0; n < K; ++n) {
      const nn::Index col = s * K + n;
      const uint16_t a = choices_[static_cast<std::size_t>(n * G + s)];
      const double adv = A[static_cast<std::size_t>(n)];
      const double r = static_cast<double>(q(a, col)) / static_cast<double>(old_probs(a, col));
      double h = 0;
      for (nn::Index d = 0; d < D; ++d)
        if (q(d, col) > 0) h -= static_cast<double>(q(d, col)) * std::log(static_cast<double>(q(d, col)));
      objective += scale * (surrogate(r, adv) + c_h * h);
      const double g_ratio = active(r, adv) ? adv * r : 0.0;
      for (nn::Index d = 0; d < D; ++d) {
        const double qd = q(d, col);
        const double dh = qd > 0 ? -qd * (std::log(qd) + h) : 0.0;  // ∂H/∂z_d
        const double g = g_ratio * ((d == a ? 1.0 : 0.0) - qd) + c_h * dh;
        dlogits(d, col) = static_cast<float>(-g * scale);  // descend on −objective
      }
    }
  policy_->backward(dlogits);

  FeedForwardGrouper<float>& grouper = groups_.grouper();
  const auto& groupings = groups_.groupings();
  const nn::Index U = grouper.num_units();
  const double unit_scale = 1.0 / static_cast<double>(U * K);
  std::vector<std::vector<double>> coefficient(groupings.size(), std::vector<double>(static_cast<std::size_t>(U)));
  for (std::size_t n = 0; n < groupings.size(); ++n)
    for (nn::Index u = 0; u < U; ++u) {
      const auto iu = static_cast<std::size_t>(u);
      const double r = std::exp(static_cast<double>(grouper.log_probs()(groupings[n][iu], u)) -
                                static_cast<double>(old_unit_logp[n][iu]));
      objective += unit_scale * surrogate(r, A[n]);
      coefficient[n][iu] = active(r, A[n]) ? -A[n] * r * unit_scale : 0.0;
    }
  objective += c_h * grouper.mean_entropy();
  grouper.backward(groups_.unit_features(), groupings, std::span<const std::vector<double>>(coefficient), -c_h);
  return objective;
}

void EagleLearner::update() {
  const std::size_t K = batch_size_;
  std::vector<double> reward(K), advantage(K);
  double mean = 0;
  for (std::size_t n = 0; n < K; ++n) {
    reward[n] = oom_[n] ? -options_.failing_signal : -std::sqrt(std::max(0.0, times_[n]));
    mean += reward[n] / static_cast<double>(K);
  }
  if (!has_baseline_) baseline_ = mean, has_baseline_ = true;  // the average starts at the first batch
  for (std::size_t n = 0; n < K; ++n) advantage[n] = reward[n] - baseline_;

  // The old policy: the one that sampled the batch (its weights have not changed since).
  forward_batch();
  const nn::Matrix<float> old_probs = policy_->probs();
  groups_.forward();
  std::vector<std::vector<float>> old_unit_logp(K);
  const auto U = static_cast<nn::Index>(groups_.num_units());
  for (std::size_t n = 0; n < K; ++n) {
    old_unit_logp[n].resize(static_cast<std::size_t>(U));
    for (nn::Index u = 0; u < U; ++u)
      old_unit_logp[n][static_cast<std::size_t>(u)] =
          groups_.grouper().log_probs()(groups_.groupings()[n][static_cast<std::size_t>(u)], u);
  }
  objectives_.clear();
  for (int epoch = 0; epoch < options_.ppo_epochs; ++epoch) {
    forward_batch();
    groups_.forward();
    params_.zero_grad();
    objectives_.push_back(ppo_gradients(old_probs, old_unit_logp, advantage));
    descend(options_.learning_rate, options_.grad_clip);
    groups_.stale();
  }
  for (std::size_t n = 0; n < K; ++n)
    baseline_ = options_.baseline_decay * baseline_ + (1 - options_.baseline_decay) * reward[n];

  remember_elites();
  const auto every = static_cast<int64_t>(options_.ce_every);
  if (every > 0 && samples_seen_ / every > (samples_seen_ - static_cast<int64_t>(K)) / every) cross_entropy_update();
}

void EagleLearner::remember_elites() {
  const std::size_t G = steps_;
  for (std::size_t n = 0; n < batch_size_; ++n) {
    if (oom_[n]) continue;
    Elite e{times_[n], groups_.groupings()[n],
            std::vector<uint16_t>(choices_.begin() + static_cast<std::ptrdiff_t>(n * G),
                                  choices_.begin() + static_cast<std::ptrdiff_t>((n + 1) * G))};
    // Best first; an equal time keeps the earlier placement ahead.
    const auto at = std::upper_bound(elites_.begin(), elites_.end(), e.time_s,
                                     [](double t, const Elite& x) { return t < x.time_s; });
    elites_.insert(at, std::move(e));
    if (elites_.size() > static_cast<std::size_t>(options_.elites)) elites_.pop_back();
  }
}

void EagleLearner::cross_entropy_update() {
  // Post's cross-entropy step on a neural policy: Adam steps up the mean log-likelihood (per
  // decision) of the elites — their groupings and their placements.
  if (elites_.empty()) return;
  const std::size_t E = elites_.size(), G = steps_;
  std::vector<std::vector<GroupId>> groupings;
  std::vector<uint16_t> choices;
  for (const Elite& e : elites_) {
    groupings.push_back(e.grouping);
    choices.insert(choices.end(), e.choice.begin(), e.choice.end());
  }
  groups_.set(groupings, inputs_);
  const auto U = static_cast<double>(groups_.num_units());
  const std::vector<double> unit_w(E, -1.0 / (static_cast<double>(E) * U));
  const float w = -1.0f / static_cast<float>(E * G);
  nn::Matrix<float> dlogits, no_noise;
  for (int step = 0; step < options_.ce_steps; ++step) {
    policy_->forward(inputs_, static_cast<nn::Index>(E), DecodeMode::kGiven, choices, no_noise);
    const nn::Matrix<float>& p = policy_->probs();
    dlogits.resize(p.rows(), p.cols());
    for (std::size_t s = 0; s < G; ++s)
      for (std::size_t n = 0; n < E; ++n) {
        const auto col = static_cast<nn::Index>(s * E + n);
        dlogits.col(col) = -w * p.col(col);
        dlogits(choices[n * G + s], col) += w;
      }
    groups_.forward();
    params_.zero_grad();
    policy_->backward(dlogits);
    groups_.grouper().backward(groups_.unit_features(), groupings, unit_w);
    descend(options_.learning_rate, options_.grad_clip);
    groups_.stale();
  }
  groups_.clear();
}

std::string EagleLearner::save_extra() const {
  nlohmann::json e;
  e["baseline"] = detail::bits(baseline_);
  e["has_baseline"] = has_baseline_;
  nlohmann::json elites = nlohmann::json::array();
  for (const Elite& x : elites_)
    elites.push_back({{"time_s", detail::bits(x.time_s)}, {"grouping", x.grouping}, {"choice", x.choice}});
  e["elites"] = elites;
  // The pending batch's groupings (its placements were drawn from them); none between updates.
  e["groupings"] = handed_out_ > 0 ? groups_.groupings() : std::vector<std::vector<GroupId>>{};
  return e.dump();
}

void EagleLearner::load_extra(const std::string& json) {
  std::vector<std::vector<GroupId>> groupings;
  try {
    const nlohmann::json e = nlohmann::json::parse(json);
    baseline_ = detail::unbits(e.at("baseline"));
    has_baseline_ = e.at("has_baseline").get<bool>();
    elites_.clear();
    for (const auto& x : e.at("elites")) {
      Elite el{detail::unbits(x.at("time_s")), x.at("grouping").get<std::vector<GroupId>>(),
               x.at("choice").get<std::vector<uint16_t>>()};
      if (el.grouping.size() != groups_.num_units() || el.choice.size() != steps_ ||
          std::any_of(el.grouping.begin(), el.grouping.end(), [&](GroupId g) { return g >= steps_; }) ||
          std::any_of(el.choice.begin(), el.choice.end(), [&](uint16_t c) { return c >= space_.devices.size(); }))
        throw InputError("learner state: " + name_ + ": elites: a placement of the wrong shape");
      elites_.push_back(std::move(el));
    }
    groupings = e.at("groupings").get<std::vector<std::vector<GroupId>>>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError("learner state: " + name_ + ": " + e.what());
  }
  groups_.stale();
  groups_.clear();
  if (handed_out_ == 0) return;
  if (groupings.size() != batch_size_)
    throw InputError("learner state: " + name_ + ": groupings: must be " + std::to_string(batch_size_));
  groups_.set(std::move(groupings), inputs_);
}

// ---- Registry entries --------------------------------------------------------------------------

namespace {

// eagle_ce's defaults: EAGLE's PPO+CE.
struct EagleCeOptions : EagleOptions {
  EagleCeOptions() { ce_every = 50; }
  void validate() const { EagleOptions::validate("eagle_ce"); }  // the option table's check names eagle_ce
};

template <typename O>
const detail::OptionTable<O>& eagle_options(const std::string& name) {
  static const detail::OptionTable<O> kTable(
      name, detail::with_policy<O>([] {
        auto own = detail::grouper_fields<O>("in [2, 4096]", "learned groups");
        const std::vector<typename detail::OptionTable<O>::Field> ppo = {
            {"samples_per_update", &O::samples_per_update, "in [1, 1024]", "placements per PPO minibatch"},
            {"ppo_epochs", &O::ppo_epochs, "in [1, 100]", "PPO updates per minibatch"},
            {"clip", &O::clip, "in (0, 1)", "epsilon of PPO's clipped ratio"},
            {"entropy", &O::entropy, ">= 0", "coefficient of the mean per-decision entropy"},
            {"learning_rate", &O::learning_rate, "> 0", "Adam's step size"},
            {"adam_beta1", &O::adam_beta1, "in [0, 1)", "Adam's first-moment decay"},
            {"adam_beta2", &O::adam_beta2, "in [0, 1)", "Adam's second-moment decay"},
            {"adam_epsilon", &O::adam_epsilon, "> 0", "Adam's epsilon"},
            {"grad_clip", &O::grad_clip, ">= 0", "global gradient-norm bound; 0 = none"},
            {"baseline_decay", &O::baseline_decay, "in [0, 1)", "B <- decay*B + (1-decay)*R per placement, R = -sqrt(T)"},
            {"failing_signal", &O::failing_signal, "> 0", "-R of an OOM placement"},
            {"ce_every", &O::ce_every, ">= 0", "a cross-entropy update every this many placements; 0 = none"},
            {"elites", &O::elites, "in [1, 1000]", "the best placements so far that it moves toward"},
            {"ce_steps", &O::ce_steps, "in [1, 100]", "Adam steps per cross-entropy update"},
        };
        own.insert(own.end(), ppo.begin(), ppo.end());
        return own;
      }(), /*learned_groups=*/true));
  return kTable;
}

LearnerEntry eagle_entry(const std::string& name, std::vector<std::string> aliases, const std::string& summary,
                         const std::vector<OptionInfo>& options, std::function<void(const OptionValues&)> validate,
                         std::function<EagleOptions(const OptionValues&)> build) {
  return {.name = name,
          .aliases = std::move(aliases),
          .summary = summary,
          .paper = "Lan, Chen, Li: EAGLE (expedited automatic grouping for large models), Sec. III-IV",
          .options = options,
          .policy_gradient = false,
          .needs_problem = true,
          .validate = std::move(validate),
          .make = [name, build](const OptionValues& v, const LearnerContext& c) -> std::unique_ptr<Learner> {
            return std::make_unique<EagleLearner>(c.space, *c.problem, build(v), c.seed, name);
          }};
}

}  // namespace

LearnerEntry detail::eagle_learner_entry() {
  const auto& t = eagle_options<EagleOptions>("eagle");
  return eagle_entry(
      "eagle", {},
      "learned grouping and placement trained by PPO-clip: a feed-forward grouper (256 groups) and a seq2seq "
      "LSTM placer with attention before the decoder",
      t.infos(), [](const OptionValues& v) { eagle_options<EagleOptions>("eagle").build(v); },
      [](const OptionValues& v) { return eagle_options<EagleOptions>("eagle").build(v); });
}

LearnerEntry detail::eagle_ce_learner_entry() {
  const auto& t = eagle_options<EagleCeOptions>("eagle_ce");
  return eagle_entry(
      "eagle_ce", {"eagle-ce"},
      "EAGLE's PPO with Post's cross-entropy update every 50 placements toward the 5 best found so far",
      t.infos(), [](const OptionValues& v) { eagle_options<EagleCeOptions>("eagle_ce").build(v); },
      [](const OptionValues& v) -> EagleOptions { return eagle_options<EagleCeOptions>("eagle_ce").build(v); });
}

}  // namespace placelab
