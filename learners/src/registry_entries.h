// One function per registry entry, each defined beside its implementation; registry.cpp calls them
// in the registry's order. Functions rather than self-registering static objects: a static
// library's linker drops object files nothing references, and their registrations with them.
// Private to learners/.
#pragma once

#include <optional>
#include <string>

#include "placelab/core/error.h"
#include "placelab/core/numbers.h"
#include "placelab/learners/registry.h"

namespace placelab::detail {

// A baseline's `name:<number>` argument as its options: the defaults with `field` (named `name`
// in messages) set to the number, then validated (InputError naming the rule).
template <typename Options>
Options options_from_argument(const std::string& argument, double Options::*field, const char* name,
                              const char* rule) {
  Options options;
  const std::optional<double> value = parse_number<double>(argument);
  if (!value) throw InputError(std::string(name) + " = " + excerpt(argument) + ": " + rule);
  options.*field = *value;
  options.validate();
  return options;
}

// Learners (algorithms.cpp).
LearnerEntry post_learner_entry();
LearnerEntry ppo_learner_entry();
LearnerEntry cross_entropy_learner_entry();
LearnerEntry reinforce_learner_entry();
LearnerEntry mcmc_learner_entry();  // mcmc.cpp
LearnerEntry critpath_learner_entry();  // critpath.cpp

// Neural learners (seq2seq_learners.cpp).
LearnerEntry grl_learner_entry();
LearnerEntry spotlight_learner_entry();
LearnerEntry hierarchical_learner_entry();  // hierarchical.cpp
LearnerEntry eagle_learner_entry();         // eagle.cpp
LearnerEntry eagle_ce_learner_entry();

// Baselines (baselines.cpp).
BaselineEntry single_gpu_baseline_entry();
BaselineEntry single_cpu_baseline_entry();
BaselineEntry expert_baseline_entry();
BaselineEntry metis_baseline_entry();
BaselineEntry scotch_baseline_entry();
BaselineEntry mincut_baseline_entry();
BaselineEntry random_baseline_entry();
BaselineEntry round_robin_baseline_entry();
BaselineEntry heft_baseline_entry();
BaselineEntry m_topo_baseline_entry();  // baechi.cpp
BaselineEntry m_etf_baseline_entry();
BaselineEntry m_sct_baseline_entry();
BaselineEntry exact_baseline_entry();   // exact.cpp

}  // namespace placelab::detail
