// The simulator behind the Environment contract: learners ask it for step times exactly as they
// would ask a hardware executor, and get Measurements tagged "sim".
//
//   Simulator sim(graph, cost);
//   SimEnvironment env(sim);
//   std::vector<Measurement> m = env.evaluate(placements);
#pragma once

#include <span>
#include <string>
#include <vector>

#include "placelab/sim/environment.h"
#include "placelab/sim/simulator.h"

namespace placelab {

// Evaluates placements with Simulator::simulate_batch. Not thread-safe itself (it reuses one
// buffer of results between calls); the batch inside runs on `threads` threads.
class SimEnvironment : public Environment {
 public:
  // `simulator` must outlive the environment. threads = 0 uses the hardware concurrency.
  explicit SimEnvironment(const Simulator& simulator, int threads = 0);

  // One Measurement{step_time_s, oom, "sim"} per placement, in order. Throws InputError for a
  // placement of the wrong size or with an unknown device.
  std::vector<Measurement> evaluate(std::span<const Placement> placements) override;
  std::string name() const override { return "sim"; }

  // The full results of the last evaluate() call, in the same order (per-device stats, OOM).
  std::span<const SimResult> last_results() const { return {results_.data(), last_size_}; }

 private:
  const Simulator* simulator_;
  int threads_;
  std::vector<SimResult> results_;  // grows to the largest batch; reused so results do not reallocate
  std::size_t last_size_ = 0;
};

}  // namespace placelab
