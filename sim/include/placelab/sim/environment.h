// The one contract for "tell me how good these placements are". The simulator implements it
// (SimEnvironment); the executors of profiler/ implement it on real hardware. Learners only see
// this interface, so they never know whether a number was simulated or measured.
#pragma once

#include <span>
#include <optional>
#include <string>
#include <vector>

#include "placelab/graph/placement.h"

namespace placelab {

struct Measurement {
  double step_time_s = 0;  // per-step time; meaningless when oom
  bool oom = false;        // the placement does not fit in some device's memory
  std::string source;      // "sim", "cpu", "cuda": where the number came from
  // The environment's own prediction of this placement, when it makes one: a verify environment
  // that re-times the graph's kernels while it measures (InSituVerifyEnvironment).
  std::optional<double> predicted_s;
};

class Environment {
 public:
  virtual ~Environment() = default;
  // Evaluates each placement; the result has one Measurement per placement, in order.
  virtual std::vector<Measurement> evaluate(std::span<const Placement> placements) = 0;
  virtual std::string name() const = 0;
};

}  // namespace placelab
