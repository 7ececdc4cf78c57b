// The classical placements every learner is compared with (Mirhoseini et al. 2017, Post Table 1):
// single GPU, single CPU, METIS, Scotch, MinCut, random, round-robin, a list scheduler (HEFT) as
// a strong non-learning reference, and Baechi's memory-aware placers m-TOPO, m-ETF and m-SCT. Each
// returns a full op placement (one DeviceId per op) that keeps every TF colocation group on one
// device and puts ops marked cpu_only on the machine's first CPU when it has one (TF soft
// placement). The expert placements live in the model zoo (models/).
//
//   Placement p = heft_placement(graph, cost_model);
//   SimResult r = Simulator(graph, cost_model).simulate(p);
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine.h"

namespace placelab {

// The machine's GPUs, in device-id order.
std::vector<DeviceId> gpu_devices(const Machine& machine);

// Every op on `gpu` (default: the first GPU); cpu_only ops on the first CPU. Throws InputError
// when the machine has no GPU or `gpu` is not one.
Placement single_gpu_placement(const OpGraph& graph, const Machine& machine, std::optional<DeviceId> gpu = {});
// Every op on the first CPU. Throws InputError when the machine has no CPU.
Placement single_cpu_placement(const OpGraph& graph, const Machine& machine);

// Each colocation group on a device drawn uniformly from `devices` (default: the GPUs) with a
// std::mt19937_64 seeded by `seed`.
Placement random_placement(const OpGraph& graph, const Machine& machine, uint64_t seed,
                           std::vector<DeviceId> devices = {});
// Colocation groups, in the topological order of their first op, dealt to `devices` (default: the
// GPUs) in turn.
Placement round_robin_placement(const OpGraph& graph, const Machine& machine, std::vector<DeviceId> devices = {});

struct MetisPlacementOptions {
  int seed = 1;             // METIS_OPTION_SEED
  double imbalance = 1.03;  // allowed max part / average part compute
  void validate() const;    // throws InputError naming field, value and rule
};
// METIS k-way partition of the op graph (colocation groups contracted) into k = number of GPUs
// parts, vertex weight = FLOPs, edge weight = tensor bytes; part i goes to the i-th GPU.
Placement metis_placement(const OpGraph& graph, const Machine& machine, const MetisPlacementOptions& options = {});

struct ScotchPlacementOptions {
  bool include_cpu = true;  // false = MinCut (Mirhoseini et al.: Scotch without the CPU)
  int seed = 1;             // SCOTCH_randomSeed before mapping
  void validate() const;
};
// Scotch static mapping of the op graph onto the machine graph. The source graph has colocation
// groups as vertices, weighted by their compute time on the fastest target device (the cost
// model), and edges weighted by tensor bytes. The target architecture (SCOTCH_archBuild0) is the
// complete graph of the target devices (GPUs, plus the CPUs unless MinCut), vertices weighted by
// peak FLOP/s and each pair's edge by the time its route takes per byte (the cost model's
// transfer_time_s over the machine's routes), so the mapping balances compute by device speed and
// keeps heavy tensors on fast links. Deterministic for a seed. Throws Error when Scotch fails.
Placement scotch_placement(const OpGraph& graph, const CostModel& cost, const ScotchPlacementOptions& options = {});
// MinCut: scotch_placement with include_cpu = false.
Placement mincut_placement(const OpGraph& graph, const CostModel& cost, int seed = 1);

// What a list scheduler built: its placement and the step it predicts for it. On an eager graph
// (PyTorch: Execution::kEager) the schedulers below build the step through EagerSchedule
// (sim/eager_schedule.h), the simulator's own rule, in program order, so makespan_s is exactly the
// step Simulator::simulate reports for the placement. On a dataflow graph each plans in its own
// model of TensorFlow's executor, then the simulator runs that plan, one GPU, and the scheduler's
// rule deciding inside the simulator's own run of the step (sim/dataflow_schedule.h), refined with
// the best run as a hint; the best run is the schedule, and makespan_s is again the simulated step
// of the placement (docs/learners.md, "List schedulers and the simulator").
struct ListSchedule {
  Placement placement;
  double makespan_s = 0;
};

struct HeftOptions {
  bool include_cpu = false;  // let ordinary ops go to the CPU too (cpu_only ops always may)
  bool respect_memory = true;  // skip devices whose persistent bytes would exceed their capacity
};
// HEFT list scheduling (Topcuoglu et al. 2002): upward rank from mean op times over the candidate
// devices and mean transfer times over device pairs; then, in decreasing rank, each op goes to the
// device where it finishes earliest (insertion into idle gaps of the device's streams; inputs
// arrive by the simulator's copy rule, sim/link_book.h). Source ops (variables, inputs) are placed
// with their first consumer; colocated ops follow the first of their group to be placed; cpu_only
// ops may only use the CPU. With respect_memory, a device is skipped while the persistent bytes
// already on it plus the group's would exceed its memory (unless no device fits). On a dataflow
// graph that plan is one start of the runs above (the rule inside the step: the ops asked for at
// one moment in decreasing rank, each where the step's estimate ends it first). Deterministic. On
// an eager graph the
// ops go in program order (the order PyTorch issues them), each to the device where the eager
// model finishes it first.
Placement heft_placement(const OpGraph& graph, const CostModel& cost, const HeftOptions& options = {});
ListSchedule heft_schedule(const OpGraph& graph, const CostModel& cost, const HeftOptions& options = {});

// Baechi's memory-constrained placers (Jeon et al., "Baechi: Fast Device Placement of Machine
// Learning Graphs", SoCC 2020; code: github.com/beomyeol/baechi, placer/m_topo.py, m_etf.py,
// m_sct.py). All three place over the GPUs (every device when there is none), keep colocation
// groups whole, put cpu_only ops on the first CPU, and count an op's memory as Baechi does: its
// output bytes plus its persistent bytes (Baechi's "temporary + output memory", a variable's value
// being its output; our ops have no temporary buffer). Deterministic. Throws InputError when the
// machine has no devices.

struct MTopoOptions {
  // true (Baechi's m-TOPO): each device takes ops up to an even share, Σ op memory / devices +
  // the largest op's memory, whatever its own memory (as Baechi). false (Baechi's
  // m_topo_nonuniform): up to its whole memory.
  bool uniform = true;
};
// m-TOPO: colocation groups, in the topological order of their first op, fill the first GPU until
// the next group would take it past its share, then the next GPU, and so on; the last GPU takes
// whatever remains (Baechi raises an error there; the simulator reports the OOM instead). Memory is
// counted statically: every op placed on a device adds its memory, nothing is freed.
Placement m_topo_placement(const OpGraph& graph, const Machine& machine, const MTopoOptions& options = {});

struct MEtfOptions {
  bool respect_memory = true;  // false: plain ETF (Hwang et al. 1989), blind to memory
};
// m-ETF: earliest-time-first list scheduling (Hwang et al., SIAM J. Comput. 1989). Repeatedly, among
// the ready ops (every predecessor scheduled) and the devices each may use, the pair with the
// earliest start time is scheduled, ties to the op earlier in topological order, then the lower
// device id; start = max(the device's earliest free stream, the arrival of every input). Arrivals
// follow graph/transfers.h and the simulator's link rule (sim/link_book.h). With respect_memory, a
// device is skipped while the bytes live on it in the schedule plus the op's (its output, the input
// copies it would receive, and its colocation group's persistent bytes when the group is not
// placed yet) exceed its memory; an output (and its copies) is freed once all its consumers are
// scheduled. When no ready op fits anywhere, memory is ignored for that step. On a dataflow graph
// that plan is one start of the runs above; the rule inside the step takes the (op, device) pair
// that starts first among the ops asked for, with the memory test on the step's bytes in use.
// On an eager graph the one ready op is the next in program order, and start times are the eager
// model's.
Placement m_etf_placement(const OpGraph& graph, const CostModel& cost, const MEtfOptions& options = {});
ListSchedule m_etf_schedule(const OpGraph& graph, const CostModel& cost, const MEtfOptions& options = {});

struct MSctOptions {
  // Hanen & Munier's rounding of the LP: edge i → j makes j i's favorite child when the LP pays at
  // most this fraction of its communication (x_ij <= favorite_threshold). 0.5 is Hanen & Munier's
  // and m_sct.py's default; Baechi's placer_lib.py passes --sct_threshold = 0.1.
  double favorite_threshold = 0.5;
  bool respect_memory = true;  // as MEtfOptions
  void validate() const;       // throws InputError unless 0 <= favorite_threshold < 1
};
// The favorite children of Hanen & Munier's SCT ("small communication times", 1995) as Baechi
// computes them (m_sct.py, FavoriteChildLPSolver): the LP relaxation of the makespan with one
// variable x_ij in [0, 1] per data edge (1: the communication is paid, 0: j runs right after i on
// i's device) and a start time per op, minimising the makespan subject to s_i + p_i + c_ij x_ij <=
// s_j, at most one child per op and one parent per op with x = 0 (Σ x >= degree - 1). p_i is op i's
// mean time over the devices it may use, c_ij the mean transfer time of what i sends (graph/
// transfers.h) between two of them; control edges order ops but have no x. Solved with COIN-OR CLP
// (presolve and dual simplex, quiet, deterministic). Returns, per op, its favorite child, if any: rounded at
// favorite_threshold, each op keeping at most one child and each child one parent (the smaller x,
// then the earlier edge). Throws Error when CLP does not reach an optimum.
std::vector<std::optional<OpId>> sct_favorite_children(const OpGraph& graph, const CostModel& cost,
                                                       const MSctOptions& options = {});
// m-SCT: m-ETF's list scheduling (same start times, memory test and tie order) with SCT's rule
// for favorite children (Baechi's SCTDevice): a device whose last scheduled op has a favorite child
// that is ready, unscheduled and starts there no later than anywhere else is kept for that child;
// another op may start on it only once it is urgent, at the latest of its start times over the
// devices it may use (when its inputs could be everywhere). Favorites from sct_favorite_children.
// Inside the step, a finishing op's favorite child goes to its device under the same test.
// On an eager graph a device is kept only for a favorite child that is the next op in program order.
Placement m_sct_placement(const OpGraph& graph, const CostModel& cost, const MSctOptions& options = {});
ListSchedule m_sct_schedule(const OpGraph& graph, const CostModel& cost, const MSctOptions& options = {});

}  // namespace placelab
