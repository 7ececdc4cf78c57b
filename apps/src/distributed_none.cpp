// distributed.h in a placelab built without MPI: every command is local, and a start under an MPI
// launcher says how to get the distributed commands.
#include "distributed.h"
#include "placelab/core/error.h"
#include "sweep.h"

namespace placelab::cli {

MpiWorld mpi_world() {
  if (under_mpi_launcher())
    throw InputError(
        "started by an MPI launcher, but this placelab was built without MPI: install libopenmpi-dev and "
        "openmpi-bin (scripts/install-deps.sh does) and rebuild, or run the command without mpirun");
  return {};
}

void finalize_mpi() {}
void end_mpi_after_error(int) {}

void run_sweep_distributed(const DistributedSweep& sweep) {
  mpi_world();
  run_sweep(sweep.files, sweep.seeds, sweep.jobs, sweep.name);
}

RunOutcome run_scenario_distributed(const Scenario& s, RunOptions options, int) {
  mpi_world();
  return run_scenario(s, options);
}

std::optional<CalibratedMachine> calibrate_cluster(const std::function<CalibratedMachine()>&, const std::filesystem::path&) {
  mpi_world();
  throw InputError("a cluster calibration needs MPI");
}

}  // namespace placelab::cli
