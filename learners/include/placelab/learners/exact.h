// An exact reference for small placement problems: a mixed-integer model of placement *and*
// scheduling in the spirit of Pesto (Hafeez et al., "Towards optimal placement and scheduling of
// DNN operations with Pesto", Middleware 2021), solved with COIN-OR CBC under a time limit. It
// places the groups of a grouping (layer granularity) and orders their work on each device; the
// solver's incumbent is a placement to simulate, its best bound a bound on *the model's* optimum.
//
//   ExactResult r = solve_exact(graph, cost, make_grouping(graph, "scope_units"), {.time_limit_s = 30});
//   SimResult s = Simulator(graph, cost).simulate(r.placement);   // an achievable step time
//   // r.best_bound_s bounds the model's makespan, not the simulator's (docs/learners.md, "exact")
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/learners/grouping.h"

namespace placelab {

struct ExactOptions {
  double time_limit_s = 60;     // CBC's time limit, wall seconds, in (0, 86400]
  // The most groups the model accepts, in [1, 200]: the ordering binaries grow as the square of
  // the number of tasks (a few per group). Larger problems are refused with an InputError that
  // suggests a coarser grouping.
  std::size_t max_groups = 64;
  double relative_gap = 1e-3;   // CBC stops when (incumbent − bound) / incumbent ≤ this; in [0, 1)
  int seed = 1;                 // CBC's random seed (one thread, so a seed fixes the search); ≥ 0
  // Devices the groups may use; empty: the machine's GPUs (every device when it has none). CPU-only
  // ops go to the machine's first CPU whatever this says (TF soft placement, as the baselines).
  std::vector<DeviceId> devices;
  // Throws InputError "exact.<field> = <value>: must be <rule>".
  void validate() const;
};

enum class ExactStatus {
  kOptimal,        // CBC proved the incumbent optimal for the model (within relative_gap)
  kTimeLimit,      // the time limit came first; the incumbent and the bound are what CBC had then
  kNoIncumbent,    // no placement of the groups fits the devices' memory (persistent bytes), or
                   // CBC found none in time; `placement` is then empty
};
// "optimal", "time limit", "no incumbent".
std::string_view exact_status_name(ExactStatus status);

struct ExactResult {
  ExactStatus status = ExactStatus::kNoIncumbent;
  Placement placement;        // one device per op (the groups' devices; cpu_only ops on the first CPU)
  Placement group_devices;    // one device per group of the grouping passed in
  // The model's makespan of the incumbent (s) and CBC's best bound on the model's optimum (s);
  // gap = (objective − bound) / objective, the solver's own gap. A bound on the model, which is not
  // a relaxation of the simulator: see docs/learners.md before calling it a bound on step time.
  double objective_s = 0;
  double best_bound_s = 0;
  double gap = 0;
  // A valid lower bound (s) on the simulated step time of every placement that keeps each group on
  // one of the devices (CPU-only ops on the first CPU) and fits the groups' persistent bytes: CBC's
  // bound on a relaxation with no order binaries (docs/learners.md, "exact"). It does not bound
  // placements that split groups (op-level baselines); 0 when not computed.
  double group_bound_s = 0;
  bool group_bound_optimal = false;  // CBC solved the relaxation to optimality
  double solve_s = 0;         // wall seconds: building the model and CBC's search
  std::size_t groups = 0;     // the grouping's groups
  std::size_t tasks = 0;      // scheduled blocks: (group, level) pieces, see solve_exact
  std::size_t variables = 0;
  std::size_t integer_variables = 0;
  std::size_t constraints = 0;
  // "optimal: model makespan 0.0123 s (bound 0.0123 s, gap 0.00 %), 12 groups, 30 tasks, 400
  // variables (350 integer), 2000 constraints, 1.2 s": for a result row's note.
  std::string summary() const;
};

// Solves the placement-and-scheduling model of `graph` on `cost`'s machine over `grouping`'s groups.
//
// Tasks: the ops of one group at one *level*, where an op's level counts the group changes on the
// longest path that reaches it (CPU-only ops count as one group of their own, fixed on the first
// CPU). Levels rise strictly along every edge between tasks, so the task graph is acyclic without
// merging groups: a group's forward, backward and update work, and any part of it that waits on
// another group, are separate tasks. A task takes Σ op_time_s of its ops on its device (one block
// of sequential work).
// Model: binary x[g][d] (group g on device d, Σ_d x = 1); start S_t ≥ 0; for every task edge a → b,
// S_b ≥ S_a + P_a, plus the transfer time of every producer op of a that feeds b
// (cost.transfer_time_s of its wire_bytes over the route) when a and b are on different devices;
// for every pair of tasks neither of which reaches the other, an order binary and big-M
// disjunctions so that two tasks on one single-stream device do not overlap; Σ persistent bytes of
// a device's groups ≤ its memory; minimise the makespan C ≥ S_t + P_t. CBC starts from the best of
// the single-device and HEFT placements, scheduled in the model. Before it, with a fifth of the
// time limit, CBC solves the op-level relaxation behind group_bound_s.
//
// Throws InputError for bad options, a grouping of another graph, or more than max_groups groups.
// Deterministic for given inputs and options (one thread, a fixed seed), up to where the time limit
// stops the search. The solver prints nothing.
ExactResult solve_exact(const OpGraph& graph, const CostModel& cost, const Grouping& grouping,
                        const ExactOptions& options = {});

}  // namespace placelab
