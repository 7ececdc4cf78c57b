// critpath: local search whose moves come from the simulated step's critical path — placelab's own
// learner, using what only a simulator knows. It places single ops (its search space is the graph's
// ops) and moves either a whole group of the scenario's grouping or one op. Every pass reads the
// critical path of the current placement (sim/critical_path.h) and scores moves by it: an op that
// held a slot the path waited for (a blocker: a weight gradient beside the backward chain, another
// branch's op) may go, alone or with its group, to a device idle meanwhile; a copy on the path may
// be removed by moving its consumer to the producer's device or the producer to the consumer's.
// The pass tries the path's best moves, then every other whole-group move, a few at a time, taking
// the first improvement; a pass that improves nothing is followed by pairs of the path's best
// moves, then by a restart from the best placement with a few groups moved at random (iterated
// local search). Every candidate and every kicked start is one sample, as for every learner.
//
//   CritpathLearner cp(SearchSpace{graph.num_ops(), gpus}, CritpathOptions{}, seed, graph, sim, groups, start);
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
  // "both": half the budget from the run's fastest baseline projected onto the groups (each whole,
  // on the device most of its ops are on), the other half from that baseline op for op;
  // "best_baseline_groups", "best_baseline": one of them for the whole budget; "first": every op on
  // the search space's first device. With op_moves = false every start is projected.
  std::string start = "both";
  bool op_moves = true;      // also move single ops the path marks; false: whole groups only
  int64_t candidates = 600;  // the path's best moves tried per pass, before every other group move
  int64_t step = 3;          // candidates measured before the best improvement is taken
  int64_t pair_from = 6;     // a failed round's best moves tried two at a time before a kick (0: none)
  int64_t kick = 3;          // groups moved at random from the best placement when a round fails
  double oom_time_s = kDefaultOomTimeS;  // step time counted for an OOM placement (Post: 100 s)
  void validate() const;      // throws InputError naming field, value and rule
};

class CritpathLearner final : public Learner {
 public:
  // `space` has one "group" per op of `graph`; `sim` simulates `graph` on the scenario's machine and
  // `groups` is the scenario's grouping, the groups moved whole; all three must outlive the learner.
  // `start` (one device of the space per op) is required with options.start = "best_baseline"; with
  // op_moves = false it is first projected onto the groups (each on the device most of its ops are on).
  CritpathLearner(SearchSpace space, CritpathOptions options, uint64_t seed, const OpGraph& graph,
                  const Simulator& sim, const Grouping& groups, std::optional<Placement> start = std::nullopt);
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

  // One move: a whole group of the scenario's grouping, or one op, to a device.
  struct Move {
    bool whole_group = true;
    uint32_t id = 0;  // GroupId or OpId
    DeviceId device = 0;
  };
  // A candidate: current_ with up to two moves (none: current_ itself, the start or a kick). Kept as
  // moves, not placements, so a pass over thousands of moves stays small.
  struct Candidate {
    uint8_t count = 0;
    std::array<Move, 2> moves{};
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
  // Makes the queue current_ alone, to be measured before the search goes on from it.
  void measure_current();
  // Restarts from the best placement with options_.kick groups moved at random; measured first.
  void plan_kick();

  SearchSpace space_;
  CritpathOptions options_;
  const OpGraph* graph_;
  const Simulator* sim_;
  const Grouping* grouping_;
  std::vector<std::vector<OpId>> members_;  // the ops of each group
  Rng rng_;
  int64_t budget_ = 0;
  int64_t samples_seen_ = 0;
  int64_t rounds_ = 0;
  int64_t kicks_ = 0;
  Placement current_;              // op → device of the search's current placement
  Placement second_start_;         // start: both — where the second half of the budget starts; then empty
  double current_time_s_ = 0;      // its step time; valid once measured
  bool pending_ = true;            // queue_ is current_ alone, to be measured (the start, a kick)
  Placement best_;
  double best_time_s_ = 0;
  bool have_best_ = false;
  Placement apply(const Candidate& c) const;
  bool changes(const Move& m) const;  // the move puts some op on another device

  std::vector<Candidate> queue_;   // this round's candidates, in order
  std::size_t next_ = 0;           // the first of queue_ not yet proposed
  std::size_t step_end_ = 0;       // proposals up to here are measured before an improvement is taken
  std::vector<Candidate> top_moves_;  // the last pass's best single moves, best first
  bool paired_ = false;            // queue_ holds pairs of top_moves_
  bool improved_in_pass_ = false;  // a move of the current pass was taken
  std::optional<Candidate> step_best_;  // the best candidate of the current step
  double step_best_time_s_ = 0;
};

}  // namespace placelab
