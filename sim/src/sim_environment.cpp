#include "placelab/sim/sim_environment.h"

namespace placelab {

SimEnvironment::SimEnvironment(const Simulator& simulator, int threads) : simulator_(&simulator), threads_(threads) {}

std::vector<Measurement> SimEnvironment::evaluate(std::span<const Placement> placements) {
  if (results_.size() < placements.size()) results_.resize(placements.size());
  last_size_ = 0;
  std::span<SimResult> results(results_.data(), placements.size());
  simulator_->simulate_batch(placements, results, threads_);
  last_size_ = placements.size();
  std::vector<Measurement> out;
  out.reserve(placements.size());
  for (const SimResult& r : results) out.push_back({r.step_time_s, r.oom, "sim"});
  return out;
}

}  // namespace placelab
