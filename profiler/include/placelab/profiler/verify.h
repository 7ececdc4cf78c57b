// Predicted vs measured: the simulator's step time and per-device busy time for a placement next
// to the CPU executor's measurement of the same placement, and the summary statistics over many
// placements that say whether the cost model can be trusted (`placelab verify`, issue 4).
//
//   CalibratedCostModel cost(cm.machine, cm.calibration);
//   CpuExecutor exec(graph, cm.machine, {.steps = 11, .device_cores = device_cores(cm)});
//   VerifyReport r = verify_placement(graph, placement, cost, exec);   // r.error = −0.04 …
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"
#include "placelab/hwmodels/calibration.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/profiler/cpu_calibrator.h"
#include "placelab/profiler/cpu_executor.h"
#include "placelab/sim/simulator.h"

namespace placelab {

struct VerifyDevice {
  std::string device;            // machine device name
  double predicted_busy_s = 0;   // simulated kernel time on the device in one step
  double measured_busy_s = 0;    // measured mean kernel time per step
};

struct VerifyReport {
  double predicted_s = 0;  // simulated step time
  double measured_s = 0;   // executor's mean step time after the first step
  double error = 0;        // (predicted − measured) / measured; 0 when measured is 0
  bool oom = false;        // the simulator or the executor found the placement does not fit
  std::vector<VerifyDevice> devices;
  std::vector<double> measured_steps_s;  // every measured step, the warm-up first
};

// Puts a simulated and a measured step of the same placement side by side.
VerifyReport compare_step(const SimResult& predicted, const ExecutionResult& measured, const Machine& machine);
// Simulates `placement` with `cost` and runs it with `executor` (same graph and machine).
VerifyReport verify_placement(const OpGraph& graph, std::span<const DeviceId> placement, const CostModel& cost,
                              const CpuExecutor& executor);

// Measures several placements in `rounds` interleaved rounds (each round runs every placement once
// for the executor's steps, in order), so a slow spell of a shared machine hits every placement
// alike instead of a few: the ranking of placements is what learners use. Per placement, the
// combined result has the median over rounds of the step time and of each device's busy and copy
// time, every round's steps in `step_times_s` (each round's warm-up first), and the last round's
// timeline. A placement that is OOM in its first round is not run again. `after_run(round,
// placement)` reports progress; `before_round(round)` runs first in every round (verify --in-situ
// re-times the graph's kernels there). rounds ≥ 1 (InputError otherwise).
std::vector<ExecutionResult> measure_interleaved(const CpuExecutor& executor, std::span<const Placement> placements,
                                                 int rounds,
                                                 const std::function<void(int, std::size_t)>& after_run = {},
                                                 const std::function<void(int)>& before_round = {});

// measure_interleaved with `graph`'s kernels re-timed in situ before every round (an
// InSituSampler with the executor's steps): the measurements, and `calibration` with those in-step
// kernel times (refit), to predict the same placements from kernel times of the same minutes —
// what `placelab verify --in-situ` and InSituVerifyEnvironment compare. The executor runs `graph`
// on `machine`; `before_round` runs before each round's in-situ run.
struct InSituMeasurement {
  std::vector<ExecutionResult> measured;  // as measure_interleaved's
  Calibration calibration;                // `calibration` with the graph's kernels re-timed
};
InSituMeasurement measure_interleaved_in_situ(const OpGraph& graph, const Machine& machine, const CpuExecutor& executor,
                                              const Calibration& calibration, std::span<const Placement> placements,
                                              int rounds, const std::function<void(int, std::size_t)>& after_run = {},
                                              const std::function<void(int)>& before_round = {});

// The verify environment of a scenario's `verify: {backend: cpu, in_situ: true}`: each evaluate()
// is a measure_interleaved_in_situ of the placements; Measurement::predicted_s is the simulator's
// step with the re-timed kernels, so a trainer can report it beside the measurement — on a machine
// whose speed drifted since calibration, the file's prediction alone would blame the cost model.
// `graph`, `machine` and `calibration` must outlive it; the calibration's devices need cores.
class InSituVerifyEnvironment : public Environment {
 public:
  InSituVerifyEnvironment(const OpGraph& graph, const Machine& machine, const Calibration& calibration,
                          CpuExecutorOptions options, int rounds);
  std::vector<Measurement> evaluate(std::span<const Placement> placements) override;
  std::string name() const override { return "cpu executor, kernels re-timed in situ"; }

 private:
  const OpGraph& graph_;
  const Machine& machine_;
  const Calibration& calibration_;
  CpuExecutor executor_;
  int rounds_;
};

// The core sets a calibration measured its devices on, indexed by the machine's DeviceId — the
// executor's CpuExecutorOptions::device_cores. Empty when some device has no recorded cores (the
// executor then chooses).
std::vector<std::vector<int>> device_cores(const CalibratedMachine& calibrated);

// Spearman rank correlation of two equally long series (average ranks for ties); 0 when either
// is constant or shorter than 2.
double spearman_correlation(std::span<const double> a, std::span<const double> b);

struct VerifySummary {
  int placements = 0;               // non-oom reports summarised
  double median_abs_error = 0;      // median |error|
  double worst_abs_error = 0;       // max |error|
  double spearman = 0;              // rank correlation of predicted vs measured step times
};
VerifySummary summarize(std::span<const VerifyReport> reports);

}  // namespace placelab
