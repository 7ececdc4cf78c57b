// critpath: local search whose moves come from the simulated step's critical path — placelab's own
// learner, using what only a simulator knows. Every round reads the critical path of the current
// placement (sim/critical_path.h) and proposes the one-group moves that path suggests: a group whose
// ops queue behind others on a device goes to the device idlest over that stretch of the path; a
// copy on the path is removed by moving its consumer to the producer's device or the producer to
// the consumer's. Candidates are measured in steps of a few; the best improvement is taken at once
// (first improvement) and a new round begins from the new path. When a whole round fails, the
// search restarts from its best placement with a few groups of the path moved at random (iterated
// local search). Every candidate and every kicked start is one sample, as for every learner.
//
//   CritpathLearner cp(SearchSpace{groups, gpus}, CritpathOptions{}, seed, graph, sim, grouping, start);
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "placelab/learners/grouping.h"
#include "placelab/learners/learner.h"
#include "placelab/learners/random.h"
#include "placelab/sim/simulator.h"

namespace placelab {

struct CritpathOptions {
  // "best_baseline": the run's best baseline (LearnerContext::best_baseline); "first": every group
  // on the search space's first device (one GPU when the space is the GPUs).
  std::string start = "best_baseline";
  int64_t candidates = 0;    // moves tried per round, the path's first; 0: every single move
  int64_t step = 6;          // candidates measured before the best improvement is taken
  int64_t pair_from = 6;     // a failed round's best moves tried two at a time before a kick (0: none)
  int64_t kick = 3;          // groups moved at random from the best placement when a round fails
  double oom_time_s = 100.0;  // step time counted for an OOM placement (Post: 100 s)
  void validate() const;      // throws InputError naming field, value and rule
};

class CritpathLearner final : public Learner {
 public:
  // `sim` simulates `graph` on the scenario's machine and `grouping` maps its ops to the space's
  // groups; all three must outlive the learner. `start` (one device of the space per group) is
  // required with options.start = "best_baseline".
  CritpathLearner(SearchSpace space, CritpathOptions options, uint64_t seed, const OpGraph& graph,
                  const Simulator& sim, const Grouping& grouping, std::optional<Placement> start = std::nullopt);
  std::string name() const override { return "critpath"; }
  const SearchSpace& space() const override { return space_; }
  void set_sample_budget(int64_t samples) override;
  int64_t samples_seen() const override { return samples_seen_; }
  std::size_t samples_until_update() const override;
  std::vector<Placement> propose(std::size_t max_count) override;
  void observe(std::span<const Placement> group_placements, std::span<const Measurement> measurements) override;
  // The best placement measured so far (the start until it is measured).
  Placement mode() const override { return best_; }
  std::string save_state() const override;
  void load_state(const std::string& state) override;

  // A candidate: current_ with up to two groups moved (none: current_ itself, the start or a kick).
  // Kept as moves, not placements, so a round over every single move of 10,000 groups stays small.
  struct Candidate {
    uint8_t moves = 0;
    std::array<GroupId, 2> group{};
    std::array<DeviceId, 2> device{};
  };

  double current_time_s() const { return current_time_s_; }
  int64_t rounds() const { return rounds_; }
  int64_t kicks() const { return kicks_; }

 private:
  // Fills queue_ with the moves the current placement's critical path suggests; a kick when there
  // are none.
  void plan_round();
  // The pairs of the last round's best options_.pair_from moves; false when there are none.
  bool plan_pairs();
  // Restarts from the best placement with options_.kick groups moved at random; measured first.
  void plan_kick();

  SearchSpace space_;
  CritpathOptions options_;
  const OpGraph* graph_;
  const Simulator* sim_;
  const Grouping* grouping_;
  Rng rng_;
  int64_t budget_ = 0;
  int64_t samples_seen_ = 0;
  int64_t rounds_ = 0;
  int64_t kicks_ = 0;
  Placement current_;              // group → device of the search's current placement
  double current_time_s_ = 0;      // its step time; valid once measured
  bool pending_ = true;            // queue_ is current_ alone, to be measured (the start, a kick)
  Placement best_;
  double best_time_s_ = 0;
  bool have_best_ = false;
  Placement apply(const Candidate& c) const;

  std::vector<Candidate> queue_;   // this round's candidates, in order
  std::size_t next_ = 0;           // the first of queue_ not yet proposed
  std::size_t step_end_ = 0;       // proposals up to here are measured before an improvement is taken
  std::vector<Candidate> top_moves_;  // the last round's single moves, best first
  bool paired_ = false;            // queue_ holds pairs of top_moves_
  bool improved_in_pass_ = false;  // a move of the current pass was taken
  std::optional<Candidate> step_best_;  // the best candidate of the current step
  double step_best_time_s_ = 0;
};

}  // namespace placelab
