#include "placelab/learners/mcmc.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "option_table.h"
#include "registry_entries.h"
#include "require.h"
#include "state_json.h"

namespace placelab {

void McmcOptions::validate() const {
  using detail::require;
  require(start == "first" || start == "random" || start == "best_baseline", "mcmc", "start", start,
          "must be first, random or best_baseline");
  require(std::isfinite(beta) && beta > 0, "mcmc", "beta", format_exact(beta), "must be > 0");
  require(std::isfinite(oom_time_s) && oom_time_s > 0, "mcmc", "oom_time_s", format_exact(oom_time_s), "must be > 0");
}

McmcLearner::McmcLearner(SearchSpace space, McmcOptions options, uint64_t seed, std::optional<Placement> start)
    : space_(std::move(space)), options_(std::move(options)), rng_(seed) {
  space_.validate();
  options_.validate();
  current_.assign(space_.num_groups, space_.devices.front());
  if (options_.start == "random")
    for (DeviceId& d : current_) d = space_.devices[rng_() % space_.devices.size()];
  if (options_.start == "best_baseline") {
    if (!start)
      throw InputError("mcmc.start = best_baseline: the run has no baseline that placed this graph (list one under "
                       "`baselines:`)");
    PLACELAB_CHECK(start->size() == space_.num_groups) << start->size() << " groups in the start placement";
    for (DeviceId d : *start)
      PLACELAB_CHECK(std::find(space_.devices.begin(), space_.devices.end(), d) != space_.devices.end())
          << "start device " << d << " is not in the search space";
    current_ = *start;
  }
}

void McmcLearner::set_sample_budget(int64_t samples) {
  PLACELAB_CHECK(samples >= 1) << "sample budget " << samples;
  budget_ = samples;
}

std::vector<Placement> McmcLearner::propose(std::size_t max_count) {
  PLACELAB_CHECK(max_count >= 1) << "propose(0)";
  if (!started_) return {current_};
  Placement next = current_;
  const std::size_t nd = space_.devices.size();
  if (nd > 1) {
    // One group to one of the other devices, uniformly: a symmetric proposal, as Metropolis needs.
    const std::size_t g = rng_() % space_.num_groups;
    std::size_t here = 0;
    while (space_.devices[here] != next[g]) ++here;
    const std::size_t other = (here + 1 + rng_() % (nd - 1)) % nd;
    next[g] = space_.devices[other];
  }
  return {std::move(next)};
}

void McmcLearner::observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) {
  PLACELAB_CHECK(group_placements.size() == 1 && measurements.size() == 1)
      << group_placements.size() << " placements and " << measurements.size() << " measurements; mcmc takes one";
  const double t = measurements[0].oom ? options_.oom_time_s : measurements[0].step_time_s;
  ++samples_seen_;
  if (!started_) {
    started_ = true;
    current_time_s_ = t;
    return;
  }
  // Metropolis: the draw is taken for every proposal, so the random stream does not depend on
  // which proposals were better.
  const double u = uniform01(rng_);
  if (t <= current_time_s_ || u < std::exp(-options_.beta * (t - current_time_s_) / current_time_s_)) {
    current_ = group_placements[0];
    current_time_s_ = t;
    ++accepted_;
  }
}

std::string McmcLearner::save_state() const {
  nlohmann::json j = detail::state_header(*this);
  j["rng"] = detail::rng_to_string(rng_);
  j["budget"] = budget_;
  j["samples_seen"] = samples_seen_;
  j["accepted"] = accepted_;
  j["current"] = current_;
  j["current_time_s"] = detail::bits(current_time_s_);
  j["started"] = started_;
  return j.dump();
}

void McmcLearner::load_state(const std::string& state) {
  const nlohmann::json j = detail::parse_state(state, "learner state");
  try {
    detail::check_state_header(j, *this);
    Placement current = detail::space_placement(j, "current", space_);
    rng_ = detail::rng_from_string(j.at("rng").get<std::string>());
    budget_ = j.at("budget").get<int64_t>();
    samples_seen_ = j.at("samples_seen").get<int64_t>();
    accepted_ = j.at("accepted").get<int64_t>();
    current_ = std::move(current);
    current_time_s_ = detail::unbits(j.at("current_time_s"));
    started_ = j.at("started").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("learner state: ") + e.what());
  }
}

// ---- Registry entry ----------------------------------------------------------------------------

namespace {

const detail::OptionTable<McmcOptions>& mcmc_options() {
  using O = McmcOptions;
  static const detail::OptionTable<O> kTable(
      "mcmc", {{"start", &O::start, "",
                "first: every group on the first device (one GPU); random: uniform; best_baseline: the run's best baseline",
                {"first", "random", "best_baseline"}},
               {"beta", &O::beta, "> 0", "a step slower by a fraction f is accepted with probability exp(-beta * f)"},
               {"oom_time_s", &O::oom_time_s, "> 0", "step time (s) counted for an OOM placement (Post: 100 s)"}});
  return kTable;
}

}  // namespace

LearnerEntry detail::mcmc_learner_entry() {
  return {.name = "mcmc",
          .aliases = {},
          .summary = "Markov-chain Monte Carlo over placements: move one group, accept by the Metropolis rule (FlexFlow's search)",
          .paper = "Jia, Zaharia, Aiken, SysML 2019 (FlexFlow), §6",
          .options = mcmc_options().infos(),
          .policy_gradient = false,
          .needs_problem = false,
          .validate = [](const OptionValues& v) { mcmc_options().build(v); },
          .make = [](const OptionValues& v, const LearnerContext& c) -> std::unique_ptr<Learner> {
            return std::make_unique<McmcLearner>(c.space, mcmc_options().build(v), c.seed, c.best_baseline);
          }};
}

}  // namespace placelab
