// placelab under an MPI launcher (docs/distributed.md): `mpirun -n N placelab sweep|run|calibrate`
// spreads a sweep's scenario × seed runs, a run's sample evaluation, or a cluster's calibration
// over N ranks. Without a launcher every command is local and MPI is never initialised.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "placelab/hwmodels/calibration.h"
#include "run.h"

namespace placelab::cli {

// True when an MPI launcher started this process (mpirun, or srun with PMI/PMIx): it set
// OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK.
bool under_mpi_launcher();

// This process's place in the job. Outside a launcher: rank 0 of 1, and MPI is not touched.
struct MpiWorld {
  int rank = 0;
  int size = 1;
};
// Initialises MPI on first use under a launcher. Throws InputError when this placelab was built
// without MPI (it says how to build it with).
MpiWorld mpi_world();

// Thrown on a rank whose error rank 0 reports for the job (every rank met it): main() exits with
// `code` without printing it again.
struct QuietExit {
  int code = 2;
};

// How main() ends MPI after a command. After success, or an error every rank met and agreed on,
// MPI_Finalize; after an error one rank met alone, MPI_Abort with its exit status (the others
// would otherwise wait for that rank for ever). Nothing when MPI was not initialised.
void finalize_mpi();
void end_mpi_after_error(int code);

// `mpirun … placelab sweep`: rank 0 hands scenario × seed runs to the ranks as they free up (each
// rank runs up to `jobs` at once, as child processes), then each scenario's summary run; it writes
// the same summary.md/.csv as a local sweep. A rank silent for `rank_timeout_s` while it holds runs
// is given up: its runs go to other ranks (the job survives a rank's death under
// `mpirun --enable-recovery`).
struct DistributedSweep {
  std::vector<std::string> files;
  std::optional<int> seeds;
  int jobs = 1;
  std::string name = "sweep";
  double rank_timeout_s = 60;
};
void run_sweep_distributed(const DistributedSweep& sweep);

// `mpirun … placelab run`: rank 0 trains and writes the outputs; every rank holds the scenario's
// simulator and evaluates its share of each batch of samples; the scenario's verifications run on
// `verify_rank`. The results equal the single-process run's, bit for bit. Returns on rank 0;
// the other ranks return an empty outcome when rank 0 is done.
RunOutcome run_scenario_distributed(const Scenario& s, RunOptions options, int verify_rank);

// `mpirun … placelab calibrate --backend cpu|cupti`, one rank per node: each rank measures its
// node with `measure` (ranks that share a host take turns, so that none times the others'
// work), rank 0 measures the network to every other rank by MPI ping-pong over message sizes
// (a latency + bytes/bandwidth fit per pair), and writes to `out` one calibrated machine: every
// node's devices, links and costs under `<node>/` names (the node is the host name, with
// `-rank<N>` when ranks share a host), joined by a network of the median measured latency and
// bandwidth (hwmodels/cluster.h). Returns the machine on rank 0, nullopt on the others.
std::optional<CalibratedMachine> calibrate_cluster(const std::function<CalibratedMachine()>& measure,
                                                   const std::filesystem::path& out);

}  // namespace placelab::cli
