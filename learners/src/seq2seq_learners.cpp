#include "placelab/learners/seq2seq_learners.h"

#include <algorithm>
#include <cmath>

#include "option_table.h"
#include "placelab/core/error.h"
#include "placelab/learners/gcn.h"
#include "registry_entries.h"
#include "seq2seq_options.h"
#include "require.h"
#include "state_json.h"

namespace placelab {

using detail::require;

namespace {

AttentionPlacement attention_from(const std::string& name) {
  if (name == "before") return AttentionPlacement::kBefore;
  if (name == "none") return AttentionPlacement::kNone;
  return AttentionPlacement::kAfter;
}

}  // namespace

// ---- Options -----------------------------------------------------------------------------------

void Seq2SeqPolicyOptions::validate_policy(const std::string& owner) const {
  require(placer == "seq2seq" || placer == "gcn", owner, "placer", placer, "must be one of seq2seq, gcn");
  require(placer != "gcn" || inputs == "features", owner, "inputs", inputs,
          "must be features with placer gcn (its nodes are the groups' features)");
  require(attention == "after" || attention == "before" || attention == "none", owner, "attention", attention,
          "must be one of after, before, none");
  require(inputs == "features" || inputs == "names", owner, "inputs", inputs, "must be one of features, names");
  require(order == "topological" || order == "id", owner, "order", order, "must be one of topological, id");
  require(logit_noise >= 0 && std::isfinite(logit_noise), owner, "logit_noise", format_6g(logit_noise), "must be >= 0");
  require(noise_until >= 0, owner, "noise_until", std::to_string(noise_until), "must be >= 0");
  seq2seq().validate(owner);
}

Seq2SeqOptions Seq2SeqPolicyOptions::seq2seq() const {
  Seq2SeqOptions o;
  o.hidden = hidden;
  o.layers = layers;
  o.bidirectional = bidirectional;
  o.attention = attention_from(attention);
  o.hp_memory_pairing = hp_memory_pairing;
  o.forget_bias = forget_bias;
  o.temperature = temperature;
  o.tanh_constant = tanh_constant;
  o.uniform_start = uniform_start;
  return o;
}

namespace {
void validate_adam(const std::string& o, double lr, double b1, double b2, double eps, double clip) {
  require(lr > 0 && std::isfinite(lr), o, "learning_rate", format_6g(lr), "must be > 0");
  require(b1 >= 0 && b1 < 1, o, "adam_beta1", format_6g(b1), "must be in [0, 1)");
  require(b2 >= 0 && b2 < 1, o, "adam_beta2", format_6g(b2), "must be in [0, 1)");
  require(eps > 0 && std::isfinite(eps), o, "adam_epsilon", format_6g(eps), "must be > 0");
  require(clip >= 0 && std::isfinite(clip), o, "grad_clip", format_6g(clip), "must be >= 0 (0 = no clipping)");
}
}  // namespace

void GrlOptions::validate(const std::string& o) const {
  validate_policy(o);
  require(samples_per_update >= 1 && samples_per_update <= 1024, o, "samples_per_update",
          std::to_string(samples_per_update), "must be in [1, 1024]");
  validate_adam(o, learning_rate, adam_beta1, adam_beta2, adam_epsilon, grad_clip);
  require(lr_decay > 0 && lr_decay <= 1, o, "lr_decay", format_6g(lr_decay), "must be in (0, 1]");
  require(lr_decay_every >= 1, o, "lr_decay_every", std::to_string(lr_decay_every), "must be >= 1");
  require(lr_decay_after >= 0, o, "lr_decay_after", std::to_string(lr_decay_after), "must be >= 0");
  require(baseline_decay >= 0 && baseline_decay < 1, o, "baseline_decay", format_6g(baseline_decay), "must be in [0, 1)");
  require(failing_signal > 0 && std::isfinite(failing_signal), o, "failing_signal", format_6g(failing_signal), "must be > 0");
  require(feasible_only_after >= 0, o, "feasible_only_after", std::to_string(feasible_only_after), "must be >= 0");
}

SpotlightOptions::SpotlightOptions() {
  hidden = 256;
  layers = 2;
  bidirectional = false;
  attention = "after";
  inputs = "names";
  tanh_constant = 0;
  logit_noise = 0;
  uniform_start = true;
}

void SpotlightOptions::validate() const {
  const std::string o = "spotlight";
  validate_policy(o);
  require(samples_per_update >= 1 && samples_per_update <= 1024, o, "samples_per_update",
          std::to_string(samples_per_update), "must be in [1, 1024]");
  require(sga_steps >= 1 && sga_steps <= 1000, o, "sga_steps", std::to_string(sga_steps), "must be in [1, 1000]");
  require(beta >= 0 && std::isfinite(beta), o, "beta", format_6g(beta), "must be >= 0");
  validate_adam(o, learning_rate, adam_beta1, adam_beta2, adam_epsilon, grad_clip);
  require(oom_time_s > 0 && std::isfinite(oom_time_s), o, "oom_time_s", format_6g(oom_time_s), "must be > 0");
  require(advantage == "seconds" || advantage == "relative", o, "advantage", advantage,
          "must be one of seconds, relative");
}

// ---- Seq2SeqLearner ----------------------------------------------------------------------------

namespace {
SearchSpace checked(SearchSpace space, const PlacementProblem& problem, const std::string& owner) {
  space.validate();
  if (problem.num_groups != space.num_groups)
    throw InputError(owner + ": the problem has " + std::to_string(problem.num_groups) +
                     " groups: must equal the search space's " + std::to_string(space.num_groups));
  if (space.num_groups > kMaxSeq2SeqGroups)
    throw InputError(owner + ": " + std::to_string(space.num_groups) + " groups: a seq2seq placer decodes one group per step " +
                     "and attends over all of them, so it takes at most " + std::to_string(kMaxSeq2SeqGroups) +
                     "; use a coarser grouping (scope_units, model_units, or metis with `groups: 256`)");
  return space;
}
}  // namespace

Seq2SeqLearner::Seq2SeqLearner(SearchSpace space, const PlacementProblem& problem, const Seq2SeqPolicyOptions& policy,
                               std::size_t batch_size, nn::AdamOptions adam, const std::string& owner, uint64_t seed)
    : space_(checked(std::move(space), problem, owner)),
      policy_options_(policy),
      steps_(space_.num_groups),
      rng_(seed),
      adam_options_(adam),
      batch_size_(batch_size) {
  policy.validate_policy(owner);
  if (policy.order == "topological") order_ = problem.topological_order;
  else
    for (GroupId g = 0; g < problem.num_groups; ++g) order_.push_back(g);
  if (policy.inputs == "features") inputs_ = group_feature_matrix<float>(problem, order_);
  if (policy.placer == "gcn") {
    // EAGLE's GCN reads the group graph as its adjacency, so the features' adjacency rows (the
    // first 2·G) go; the edges are between decode positions.
    const auto G = static_cast<nn::Index>(problem.num_groups);
    inputs_ = nn::Matrix<float>(inputs_.bottomRows(inputs_.rows() - 2 * G));
    std::vector<nn::Index> position(problem.num_groups);
    for (std::size_t i = 0; i < order_.size(); ++i) position[order_[i]] = static_cast<nn::Index>(i);
    std::vector<std::pair<nn::Index, nn::Index>> edges;
    for (const PlacementProblem::GroupEdge& e : problem.group_edges) edges.emplace_back(position[e.from], position[e.to]);
    policy_ = std::make_unique<GcnPolicy<float>>(policy.seq2seq(), inputs_.rows(),
                                                 nn::GraphAdjacency::normalized(G, edges),
                                                 static_cast<nn::Index>(space_.devices.size()), rng_);
    adopt_policy();
    return;
  }
  make_policy(inputs_.rows());
}

Seq2SeqLearner::Seq2SeqLearner(SearchSpace space, std::size_t decoded_groups, nn::Index input_rows,
                               const Seq2SeqPolicyOptions& policy, std::size_t batch_size, nn::AdamOptions adam,
                               const std::string& owner, uint64_t seed)
    : space_((space.validate(), std::move(space))),
      policy_options_(policy),
      steps_(decoded_groups),
      rng_(seed),
      adam_options_(adam),
      batch_size_(batch_size) {
  policy.validate_policy(owner);
  require(policy.placer == "seq2seq", owner, "placer", policy.placer,
          "must be seq2seq: the learned groups change with every placement, and the GCN places the scenario's");
  PLACELAB_CHECK(decoded_groups >= 1 && decoded_groups <= kMaxSeq2SeqGroups) << owner << ": " << decoded_groups << " groups";
  make_policy(input_rows);
}

void Seq2SeqLearner::make_policy(nn::Index input_rows) {
  const auto G = static_cast<nn::Index>(steps_), D = static_cast<nn::Index>(space_.devices.size());
  policy_ = std::make_unique<Seq2SeqPolicy<float>>(policy_options_.seq2seq(), input_rows, G, D, rng_);
  adopt_policy();
}

void Seq2SeqLearner::adopt_policy() {
  for (nn::Param<float>* p : policy_->params().params()) params_.add(*p);
  adam_ = nn::Adam<float>(params_, adam_options_);
}

void Seq2SeqLearner::add_trainable(nn::ParamSet<float>& more) {
  for (nn::Param<float>* p : more.params()) params_.add(*p);
  adam_ = nn::Adam<float>(params_, adam_options_);
}

Seq2SeqLearner::~Seq2SeqLearner() = default;

void Seq2SeqLearner::set_sample_budget(int64_t samples) {
  if (samples < 1) throw InputError("sample_budget = " + std::to_string(samples) + ": must be >= 1");
  budget_ = samples;
}

Placement Seq2SeqLearner::to_placement(std::span<const uint16_t> choice, std::size_t) const {
  Placement p(space_.num_groups);
  for (std::size_t i = 0; i < choice.size(); ++i) p[order_[i]] = space_.devices[choice[i]];
  return p;
}

std::vector<Placement> Seq2SeqLearner::propose(std::size_t max_count) {
  PLACELAB_CHECK(max_count >= 1) << "propose(0)";
  PLACELAB_CHECK(handed_out_ == observed_) << "propose before the last proposal was observed";
  if (handed_out_ == 0) {
    // A new batch: every placement of the update from one forward pass.
    prepare_batch();
    const bool noisy = policy_options_.logit_noise > 0 && samples_seen_ < policy_options_.noise_until;
    policy_->forward(inputs_, static_cast<nn::Index>(batch_size_), DecodeMode::kSample, choices_, noise_,
                     noisy ? policy_options_.logit_noise : 0.0, &rng_);
    activations_current_ = true;
    times_.clear();
    oom_.clear();
  }
  const std::size_t count = std::min(max_count, batch_size_ - handed_out_);
  last_propose_start_ = handed_out_;
  const std::size_t G = steps_;
  std::vector<Placement> out;
  for (std::size_t i = 0; i < count; ++i)
    out.push_back(to_placement(std::span<const uint16_t>(choices_).subspan((handed_out_ + i) * G, G), handed_out_ + i));
  handed_out_ += count;
  return out;
}

void Seq2SeqLearner::set_stop_check(std::function<bool()> check) {
  stop_check_ = std::move(check);
  policy_->set_stop_check(&stop_check_);
}

void Seq2SeqLearner::observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) {
  PLACELAB_CHECK(group_placements.size() == measurements.size()) << "placements and measurements differ in number";
  PLACELAB_CHECK(observed_ + group_placements.size() == handed_out_) << "observe what the last propose returned";
  const std::size_t G = steps_;
  for (std::size_t i = 0; i < group_placements.size(); ++i) {
    PLACELAB_CHECK(group_placements[i] ==
                   to_placement(std::span<const uint16_t>(choices_).subspan((observed_ + i) * G, G), observed_ + i))
        << "observe: placement " << observed_ + i << " is not the one proposed";
    times_.push_back(measurements[i].step_time_s);
    oom_.push_back(measurements[i].oom ? 1 : 0);
  }
  observed_ += group_placements.size();
  samples_seen_ += static_cast<int64_t>(group_placements.size());
  if (observed_ == batch_size_) {
    update();
    handed_out_ = observed_ = 0;
    times_.clear();
    oom_.clear();
  }
}

Placement Seq2SeqLearner::mode() const {
  std::vector<uint16_t> choice;
  nn::Matrix<float> no_noise;
  policy_->forward(inputs_, 1, DecodeMode::kGreedy, choice, no_noise);
  activations_current_ = false;
  return to_placement(choice, 0);
}

void Seq2SeqLearner::forward_batch() {
  if (activations_current_) return;
  policy_->forward(inputs_, static_cast<nn::Index>(batch_size_), DecodeMode::kGiven, choices_, noise_);
  activations_current_ = true;
}

void Seq2SeqLearner::descend(double learning_rate, double grad_clip) {
  nn::clip_grad_norm(params_, grad_clip);
  adam_.step(learning_rate);
  activations_current_ = false;
}

void Seq2SeqLearner::log_prob_gradient(std::span<const double> weights, nn::Matrix<float>& dlogits) const {
  const auto G = static_cast<nn::Index>(steps_), B = static_cast<nn::Index>(batch_size_);
  const nn::Matrix<float>& p = policy_->probs();
  dlogits.resize(p.rows(), p.cols());
  for (nn::Index s = 0; s < G; ++s)
    for (nn::Index n = 0; n < B; ++n) {
      // d/dz of w log softmax(z)_a = w (e_a − p).
      const auto w = static_cast<float>(weights[static_cast<std::size_t>(n)]);
      const nn::Index col = s * B + n;
      dlogits.col(col) = -w * p.col(col);
      dlogits(choices_[static_cast<std::size_t>(n * G + s)], col) += w;
    }
}

std::string Seq2SeqLearner::save_state() const {
  nlohmann::json j = detail::state_header(*this);
  const std::vector<float> w = params_.values();
  j["weights"] = detail::floats_to_base64(w.data(), w.size());
  const std::vector<float> m = adam_.first_moments(), v = adam_.second_moments();
  j["adam_m"] = detail::floats_to_base64(m.data(), m.size());
  j["adam_v"] = detail::floats_to_base64(v.data(), v.size());
  j["adam_t"] = adam_.steps();
  j["rng"] = detail::rng_to_string(rng_);
  j["budget"] = budget_;
  j["samples_seen"] = samples_seen_;
  // The pending batch (empty between updates): its choices and noise, what was handed out and
  // observed. Its activations are recomputed on load (same weights, same choices: same values).
  j["handed_out"] = handed_out_;
  j["observed"] = observed_;
  j["choices"] = handed_out_ > 0 ? choices_ : std::vector<uint16_t>{};
  j["noise"] = handed_out_ > 0 ? detail::floats_to_base64(noise_.data(), static_cast<std::size_t>(noise_.size())) : "";
  j["noise_rows"] = handed_out_ > 0 ? noise_.rows() : 0;
  j["times"] = detail::bits(times_);
  j["oom"] = oom_;
  j["extra"] = nlohmann::json::parse(save_extra());
  return j.dump();
}

void Seq2SeqLearner::load_state(const std::string& state) {
  const nlohmann::json j = detail::parse_state(state, "learner state");
  try {
    detail::check_state_header(j, *this);
    const std::vector<float> w = detail::floats_from_base64(j.at("weights").get<std::string>(), "learner state: weights");
    if (static_cast<nn::Index>(w.size()) != params_.num_values())
      throw InputError("learner state: weights: " + std::to_string(w.size()) + " values for a policy of " +
                       std::to_string(params_.num_values()) + " (other options?)");
    const std::vector<float> m = detail::floats_from_base64(j.at("adam_m").get<std::string>(), "learner state: adam_m");
    const std::vector<float> v = detail::floats_from_base64(j.at("adam_v").get<std::string>(), "learner state: adam_v");
    if (!adam_.set_state(m, v, j.at("adam_t").get<int64_t>()))
      throw InputError("learner state: adam_m/adam_v/adam_t: must match the policy's parameters");
    params_.set_values(w);
    rng_ = detail::rng_from_string(j.at("rng").get<std::string>());
    budget_ = j.at("budget").get<int64_t>();
    samples_seen_ = j.at("samples_seen").get<int64_t>();
    handed_out_ = j.at("handed_out").get<std::size_t>();
    observed_ = j.at("observed").get<std::size_t>();
    times_ = detail::unbits_vector(j.at("times"));
    oom_ = j.at("oom").get<std::vector<uint8_t>>();
    const std::size_t G = steps_, D = space_.devices.size();
    if (handed_out_ > batch_size_ || observed_ > handed_out_ || times_.size() != observed_ || oom_.size() != observed_)
      throw InputError("learner state: the pending batch is inconsistent with samples_per_update = " +
                       std::to_string(batch_size_));
    if (handed_out_ > 0) {
      choices_ = j.at("choices").get<std::vector<uint16_t>>();
      if (choices_.size() != G * batch_size_ ||
          std::any_of(choices_.begin(), choices_.end(), [&](uint16_t c) { return c >= D; }))
        throw InputError("learner state: choices: must be " + std::to_string(batch_size_) + " placements of " +
                         std::to_string(G) + " groups over " + std::to_string(D) + " devices");
      const std::vector<float> noise = detail::floats_from_base64(j.at("noise").get<std::string>(), "learner state: noise");
      const auto rows = j.at("noise_rows").get<nn::Index>();
      if (noise.empty()) noise_.resize(0, 0);
      else if (rows != static_cast<nn::Index>(D) || noise.size() != D * G * batch_size_)
        throw InputError("learner state: noise: must be one value per device, group and placement");
      else noise_ = Eigen::Map<const nn::Matrix<float>>(noise.data(), rows, static_cast<nn::Index>(noise.size()) / rows);
    }
    load_extra(j.at("extra").dump());
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("learner state: ") + e.what());
  }
  activations_current_ = false;
}

// ---- GRL (Mirhoseini et al. 2017) --------------------------------------------------------------

GrlLearner::GrlLearner(SearchSpace space, const PlacementProblem& problem, GrlOptions options, uint64_t seed)
    : Seq2SeqLearner(std::move(space), problem, (options.validate(), static_cast<const Seq2SeqPolicyOptions&>(options)),
                     static_cast<std::size_t>(options.samples_per_update),
                     {options.adam_beta1, options.adam_beta2, options.adam_epsilon}, "grl", seed),
      options_(std::move(options)),
      baseline_(options_.failing_signal) {}

GrlLearner::GrlLearner(SearchSpace space, std::size_t decoded_groups, nn::Index input_rows, GrlOptions options,
                       const std::string& owner, uint64_t seed)
    : Seq2SeqLearner(std::move(space), decoded_groups, input_rows, static_cast<const Seq2SeqPolicyOptions&>(options),
                     static_cast<std::size_t>(options.samples_per_update),
                     {options.adam_beta1, options.adam_beta2, options.adam_epsilon}, owner, seed),
      options_(std::move(options)),
      baseline_(options_.failing_signal) {}

double GrlLearner::learning_rate_at(int64_t samples) const {
  // The Hierarchical Planner's exponential_decay(staircase=True), counted in samples (its code
  // takes one placement per step).
  if (samples < options_.lr_decay_after) return options_.learning_rate;
  const auto k = static_cast<double>((samples - options_.lr_decay_after) / options_.lr_decay_every);
  return options_.learning_rate * std::pow(options_.lr_decay, k);
}

void GrlLearner::update() {
  // Mirhoseini et al. Eq. 3: ∇J ≈ 1/K Σ (R(P_i) − B) ∇log p(P_i) with R = √T, descended with Adam.
  // Advantages use B from before the batch; then B absorbs the batch placement by placement.
  const int64_t start = batch_start();
  const bool feasible_only = start >= options_.feasible_only_after;
  std::vector<double> reward(batch_size_), weight(batch_size_, 0.0);
  std::size_t used = 0;
  for (std::size_t n = 0; n < batch_size_; ++n) {
    reward[n] = oom_[n] ? options_.failing_signal : std::sqrt(std::max(0.0, times_[n]));
    used += !feasible_only || !oom_[n];
  }
  if (used > 0) {
    for (std::size_t n = 0; n < batch_size_; ++n)
      if (!feasible_only || !oom_[n]) weight[n] = (reward[n] - baseline_) / static_cast<double>(used);
    forward_batch();
    nn::Matrix<float> dlogits;
    log_prob_gradient(weight, dlogits);
    params_.zero_grad();
    policy_->backward(dlogits);
    backward_extra(weight);
    descend(learning_rate_at(start), options_.grad_clip);
  }
  for (std::size_t n = 0; n < batch_size_; ++n)
    if (!feasible_only || !oom_[n])
      baseline_ = options_.baseline_decay * baseline_ + (1 - options_.baseline_decay) * reward[n];
}

std::string GrlLearner::save_extra() const {
  nlohmann::json e;
  e["baseline"] = detail::bits(baseline_);
  return e.dump();
}

void GrlLearner::load_extra(const std::string& json) {
  try {
    baseline_ = detail::unbits(nlohmann::json::parse(json).at("baseline"));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("learner state: grl: ") + e.what());
  }
}

// ---- Spotlight (Gao, Chen, Li 2018) ------------------------------------------------------------

SpotlightLearner::SpotlightLearner(SearchSpace space, const PlacementProblem& problem, SpotlightOptions options,
                                   uint64_t seed)
    : Seq2SeqLearner(std::move(space), problem, (options.validate(), static_cast<const Seq2SeqPolicyOptions&>(options)),
                     static_cast<std::size_t>(options.samples_per_update),
                     {options.adam_beta1, options.adam_beta2, options.adam_epsilon}, "spotlight", seed),
      options_(std::move(options)) {}

std::optional<double> SpotlightLearner::mean_time() const {
  if (time_count_ == 0) return std::nullopt;
  return time_sum_ / static_cast<double>(time_count_);
}

double SpotlightLearner::objective(const nn::Matrix<float>& old_probs, std::span<const double> advantages,
                                   nn::Matrix<float>* dlogits) const {
  // Eq. 15 averaged over the N stages and the K placements:
  //   G = 1/(K·N) Σ_n Σ_s [ q'(a)/q(a) · A_n − β KL(q_s ‖ q'_s) ],
  // and its gradient in the new logits z': A_n r (e_a − q') − β (q' − q), r = q'(a)/q(a).
  const auto N = static_cast<nn::Index>(steps_), K = static_cast<nn::Index>(batch_size_);
  const nn::Matrix<float>& q = policy_->probs();
  const nn::Index D = q.rows();
  const double scale = 1.0 / static_cast<double>(N * K), beta = options_.beta;
  if (dlogits) dlogits->resize(D, N * K);
  double total = 0;
  for (nn::Index s = 0; s < N; ++s)
    for (nn::Index n = 0; n < K; ++n) {
      const nn::Index col = s * K + n;
      const uint16_t a = choices_[static_cast<std::size_t>(n * N + s)];
      const double r = static_cast<double>(q(a, col)) / static_cast<double>(old_probs(a, col));
      const double adv = advantages[static_cast<std::size_t>(n)];
      double kl = 0;
      for (nn::Index d = 0; d < D; ++d) {
        const double p_old = old_probs(d, col), p_new = std::max(static_cast<double>(q(d, col)), 1e-30);
        if (p_old > 0) kl += p_old * std::log(p_old / p_new);
      }
      total += r * adv - beta * kl;
      if (!dlogits) continue;
      for (nn::Index d = 0; d < D; ++d) {
        const double qn = q(d, col);
        const double g = adv * r * ((d == a ? 1.0 : 0.0) - qn) - beta * (qn - static_cast<double>(old_probs(d, col)));
        (*dlogits)(d, col) = static_cast<float>(-g * scale);  // descend on −G
      }
    }
  return total * scale;
}

void SpotlightLearner::update() {
  std::vector<double> t(batch_size_), advantage(batch_size_);
  for (std::size_t n = 0; n < batch_size_; ++n) t[n] = oom_[n] ? options_.oom_time_s : times_[n];
  // R̄: the mean time of all earlier trials; the first iteration has none and uses its own mean.
  double batch_mean = 0;
  for (double x : t) batch_mean += x / static_cast<double>(batch_size_);
  const double r_bar = mean_time().value_or(batch_mean);
  const double scale = options_.advantage == "relative" ? r_bar : 1.0;
  for (std::size_t n = 0; n < batch_size_; ++n) advantage[n] = (r_bar - t[n]) / scale;

  forward_batch();
  const nn::Matrix<float> old_probs = policy_->probs();  // q: the policy that sampled the batch
  nn::Matrix<float> dlogits;
  objectives_.clear();
  for (int step = 0; step < options_.sga_steps; ++step) {
    check_stop();
    forward_batch();
    objectives_.push_back(objective(old_probs, advantage, &dlogits));
    params_.zero_grad();
    policy_->backward(dlogits);
    descend(options_.learning_rate, options_.grad_clip);
  }
  for (double x : t) time_sum_ += x;
  time_count_ += static_cast<int64_t>(batch_size_);
}

std::string SpotlightLearner::save_extra() const {
  nlohmann::json e;
  e["time_sum"] = detail::bits(time_sum_);
  e["time_count"] = time_count_;
  return e.dump();
}

void SpotlightLearner::load_extra(const std::string& json) {
  try {
    const nlohmann::json e = nlohmann::json::parse(json);
    time_sum_ = detail::unbits(e.at("time_sum"));
    time_count_ = e.at("time_count").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("learner state: spotlight: ") + e.what());
  }
}

// ---- Registry entries --------------------------------------------------------------------------

namespace {

const detail::OptionTable<GrlOptions>& grl_options() {
  static const detail::OptionTable<GrlOptions> kTable("grl", detail::with_policy<GrlOptions>(detail::grl_fields<GrlOptions>()));
  return kTable;
}

const detail::OptionTable<SpotlightOptions>& spotlight_options() {
  using O = SpotlightOptions;
  static const detail::OptionTable<O> kTable(
      "spotlight", detail::with_policy<O>({
                       {"samples_per_update", &O::samples_per_update, "in [1, 1024]", "placements per iteration"},
                       {"sga_steps", &O::sga_steps, "in [1, 1000]", "gradient-ascent steps on Eq. 15 per iteration"},
                       {"beta", &O::beta, ">= 0", "KL penalty coefficient"},
                       {"learning_rate", &O::learning_rate, "> 0", "Adam's step size (not stated by the paper)"},
                       {"adam_beta1", &O::adam_beta1, "in [0, 1)", "Adam's first-moment decay"},
                       {"adam_beta2", &O::adam_beta2, "in [0, 1)", "Adam's second-moment decay"},
                       {"adam_epsilon", &O::adam_epsilon, "> 0", "Adam's epsilon"},
                       {"grad_clip", &O::grad_clip, ">= 0", "global gradient-norm bound; 0 = none"},
                       {"oom_time_s", &O::oom_time_s, "> 0", "step time an OOM placement counts as"},
                       {"advantage", &O::advantage, "",
                        "R-bar - R divided by R-bar (relative), or in seconds as Eq. 15 writes it",
                        {"relative", "seconds"}},
                   }));
  return kTable;
}

}  // namespace

LearnerEntry detail::grl_learner_entry() {
  return {.name = "grl",
          .aliases = {},
          .summary = "policy gradient on an attentional seq2seq LSTM placer: REINFORCE on sqrt(T), moving-average "
                     "baseline from the failing signal, Adam, gradient clipping",
          .paper = "Mirhoseini et al., ICML 2017 (\"GRL\" in Spotlight, \"PG\" in Post); unstated settings from the "
                   "Hierarchical Planner's public code",
          .options = grl_options().infos(),
          .policy_gradient = true,
          .needs_problem = true,
          .validate = [](const OptionValues& v) { grl_options().build(v); },
          .make = [](const OptionValues& v, const LearnerContext& c) -> std::unique_ptr<Learner> {
            return std::make_unique<GrlLearner>(c.space, *c.problem, grl_options().build(v), c.seed);
          }};
}

LearnerEntry detail::spotlight_learner_entry() {
  return {.name = "spotlight",
          .aliases = {},
          .summary = "PPO on the multi-stage placement MDP: the KL-penalised stage objective, 10 ascent steps per "
                     "iteration of 5 placements, on a seq2seq LSTM placer that reads group names",
          .paper = "Gao, Chen, Li, ICML 2018 (Spotlight), Algorithm 1 and Eq. 15",
          .options = spotlight_options().infos(),
          .policy_gradient = false,
          .needs_problem = true,
          .validate = [](const OptionValues& v) { spotlight_options().build(v); },
          .make = [](const OptionValues& v, const LearnerContext& c) -> std::unique_ptr<Learner> {
            return std::make_unique<SpotlightLearner>(c.space, *c.problem, spotlight_options().build(v), c.seed);
          }};
}

}  // namespace placelab
