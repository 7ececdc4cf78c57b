// placelab under mpirun (docs/distributed.md), on this one machine: 2 to 4 ranks, oversubscribed.
// A distributed sweep writes the local sweep's table, a distributed run the single-process run's
// results bit for bit, and a sweep whose rank is killed still finishes every run.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "run_cli.h"

namespace {

namespace fs = std::filesystem;
using placelab::testing::CliResult;
using placelab::testing::placelab;
using placelab::testing::shell;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Distributed : public ::testing::Test {
 protected:
  void SetUp() override {
    // CI and `make test` run as root, which mpirun refuses unless told twice.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    dir_ = fs::temp_directory_path() / ("placelab_mpi_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // A machine whose MPI cannot start one process (no usable transport in a container, say) is
    // not placelab's failure: say why and skip.
    static const CliResult probe = shell(std::string(PLACELAB_MPIRUN) + " --oversubscribe -n 1 /bin/true");
    if (probe.status != 0) GTEST_SKIP() << "mpirun cannot start a process here: " << probe.out;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `mpirun -n ranks placelab <args>`, oversubscribed (this machine may have fewer cores).
  static CliResult mpi(int ranks, const std::string& args, const std::string& mpirun_options = "") {
    return shell(std::string(PLACELAB_MPIRUN) + " --oversubscribe " + mpirun_options + " -n " + std::to_string(ranks) +
                 " " + PLACELAB_CLI + " " + args);
  }
  std::string scenario(const std::string& name, int samples, const std::string& extra = "") {
    const fs::path p = dir_ / (name + ".yaml");
    std::ofstream(p) << "name: " << name << "\ngraph: " << PLACELAB_SOURCE_DIR << "/scenarios/graphs/quickstart.json\n"
                     << "machine: k80x2\ndevices: gpus\ngrouping: colocation\nsamples: " << samples
                     << "\nbatch: 12\nseeds: 2\ncheckpoint_every: 120\n"
                     << "learners:\n  post: {ce_every: 24}\n  reinforce: {}\nbaselines: [single_gpu, heft]\n"
                     << "output: " << (dir_ / name).string() << "\n" << extra;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(Distributed, SweepOverTwoRanksWritesTheLocalSweepsTable) {
  const std::string a = scenario("mpi_a", 96), b = scenario("mpi_b", 72);
  const std::string name = "mpitest-" + std::to_string(::getpid());
  const fs::path tables = fs::path("results") / ("sweep-" + name);
  CliResult local = placelab("sweep " + a + " " + b + " --seeds 2 --jobs 2 --name " + name);
  ASSERT_EQ(local.status, 0) << local.out;
  const std::string md = slurp(tables / "summary.md"), csv = slurp(tables / "summary.csv");
  fs::remove_all(dir_ / "mpi_a");
  fs::remove_all(dir_ / "mpi_b");
  fs::remove_all(tables);

  CliResult distributed = mpi(2, "sweep " + a + " " + b + " --seeds 2 --name " + name);
  ASSERT_EQ(distributed.status, 0) << distributed.out;
  EXPECT_NE(distributed.out.find("started on rank 1"), std::string::npos) << "rank 1 ran nothing: " << distributed.out;
  EXPECT_EQ(slurp(tables / "summary.md"), md);
  EXPECT_EQ(slurp(tables / "summary.csv"), csv);
  // Each seed ran as its own unit, each scenario's summary last.
  EXPECT_TRUE(fs::exists(tables / "logs" / "mpi_a-seed2.log"));
  EXPECT_TRUE(fs::exists(tables / "logs" / "mpi_b.log"));

  // Resumed with the same command: nothing runs again.
  CliResult again = mpi(2, "sweep " + a + " " + b + " --seeds 2 --name " + name);
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_NE(again.out.find("0 run(s) on 2 rank(s)"), std::string::npos) << again.out;
  EXPECT_EQ(slurp(tables / "summary.md"), md);
  fs::remove_all(tables);
}

TEST_F(Distributed, RunOverFourRanksEqualsTheSingleProcessRunBitForBit) {
  const std::string s = scenario("mpi_run", 120);
  CliResult single = placelab("run " + s + " --quiet -o " + (dir_ / "single").string());
  ASSERT_EQ(single.status, 0) << single.out;
  CliResult four = mpi(4, "run " + s + " --quiet -o " + (dir_ / "four").string());
  ASSERT_EQ(four.status, 0) << four.out;
  for (const char* file : {"curve.csv", "summary.json", "best_placement.json", "timeline.json"})
    EXPECT_EQ(slurp(dir_ / "four" / file), slurp(dir_ / "single" / file)) << file;
}

TEST_F(Distributed, RunUnderMpiSaysWhatIsWrongOnce) {
  CliResult r = mpi(2, "run " + scenario("mpi_bad", 24) + " --quiet --verify-rank 7");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--verify-rank 7: must be a rank of this job, 0 to 1"), std::string::npos) << r.out;
  // A graph no rank can read: rank 0 says so; the others exit without repeating it.
  const fs::path broken = dir_ / "broken.yaml";
  std::ofstream(broken) << "name: broken\ngraph: " << (dir_ / "missing.json").string() << "\nmachine: k80x2\n"
                        << "samples: 24\nlearners:\n  post: {}\noutput: " << (dir_ / "broken").string() << "\n";
  CliResult missing = mpi(2, "run " + broken.string() + " --quiet");
  EXPECT_EQ(missing.status, 2) << missing.out;
  EXPECT_NE(missing.out.find("missing.json"), std::string::npos) << missing.out;
  EXPECT_EQ(missing.out.find("internal error"), std::string::npos) << missing.out;
}

TEST_F(Distributed, RunVerifiesOnTheVerifyRank) {
  const fs::path machine = dir_ / "two-cpus.yaml";
  const std::string device = "{kind: cpu, peak_flops: 2.0e10, memory_bandwidth_Bps: 1.0e10, memory_bytes: 4.0e9, "
                             "streams: 1, launch_overhead_s: 1.0e-6, name: cpu:";
  std::ofstream(machine) << "name: two-cpus\ndevices:\n  - " << device << "0}\n  - " << device << "1}\nlinks:\n"
                         << "  - {a: cpu:0, b: cpu:1, kind: memory, bandwidth_Bps: 1.0e10, latency_s: 1.0e-6}\n";
  const fs::path s = dir_ / "verified.yaml";
  std::ofstream(s) << "name: verified\nmodel: cifar10_cnn:batch=2,granularity=layer\nmachine: " << machine.string()
                   << "\nsamples: 24\nbatch: 12\nlearners:\n  post: {}\nverify: {backend: cpu, every: 12, steps: 2}\n"
                   << "output: " << (dir_ / "verified").string() << "\n";
  CliResult r = mpi(2, "run " + s.string() + " --quiet --verify-rank 1");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string summary = slurp(dir_ / "verified" / "summary.json");
  EXPECT_NE(summary.find("\"measured_s\""), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"source\": \"cpu\""), std::string::npos) << summary;
}

// The pid of the sweep's rank `rank`: the placelab process whose environment says so.
pid_t find_rank(int rank, const std::string& sweep_name) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = slurp(e.path() / "cmdline"), environ = slurp(e.path() / "environ");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    for (char& c : environ) c = c == '\0' ? '\n' : c;
    if (cmdline.find(" sweep ") != std::string::npos && cmdline.find(sweep_name) != std::string::npos &&
        environ.find("\nOMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n") != std::string::npos)
      return static_cast<pid_t>(std::stol(pid));
  }
  return -1;
}

TEST_F(Distributed, SweepFinishesEveryRunWhenARankIsKilled) {
  const std::string a = scenario("mpi_kill_a", 1200), b = scenario("mpi_kill_b", 1200);
  const std::string name = "mpikill-" + std::to_string(::getpid());
  const fs::path out = dir_ / "sweep.out";
  // mpirun --enable-recovery: the job outlives a rank; the sweep gives the rank's run to another.
  std::thread sweep([&] {
    // Bounded: a job that does not end is the failure this test is for, not a reason to wait on.
    shell("timeout 240 " + std::string(PLACELAB_MPIRUN) + " --oversubscribe --enable-recovery -n 3 " + PLACELAB_CLI + " sweep " + a + " " +
          b + " --seeds 2 --rank-timeout 3 --name " + name + " > " + out.string() + " 2>&1; echo \"exit $?\" >> " +
          out.string());
  });
  pid_t victim = -1;
  for (int i = 0; i < 600 && victim < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (slurp(out).find("started on rank 1") != std::string::npos) victim = find_rank(1, name);
  }
  ASSERT_GT(victim, 0) << "rank 1 never started a run: " << slurp(out);
  kill(victim, SIGKILL);
  sweep.join();
  const std::string text = slurp(out);
  EXPECT_NE(text.find("rank 1 silent for"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 was lost: run again"), std::string::npos) << text;
  EXPECT_NE(text.find("| mpi_kill_a |"), std::string::npos) << text;
  EXPECT_NE(text.find("| mpi_kill_b |"), std::string::npos) << text;
  EXPECT_NE(text.find("exit 0"), std::string::npos) << text;
  for (const char* s : {"mpi_kill_a", "mpi_kill_b"})
    for (const char* run : {"post-seed1.json", "post-seed2.json", "reinforce-seed1.json", "reinforce-seed2.json"})
      EXPECT_TRUE(fs::exists(dir_ / s / "runs" / run)) << s << "/" << run;
  fs::remove_all(fs::path("results") / ("sweep-" + name));
}

TEST_F(Distributed, CalibrationOnTwoRanksWritesTwoNodesAndTheNetworkBetweenThem) {
  const std::string out = (dir_ / "cluster.yaml").string();
  CliResult cal = mpi(2, "calibrate --backend cpu --devices 1 --sweep-scale 0.02 --out " + out);
  ASSERT_EQ(cal.status, 0) << cal.out;
  EXPECT_NE(cal.out.find("network "), std::string::npos) << "no ping-pong result: " << cal.out;
  const std::string text = slurp(out);
  for (const char* needle : {"-rank0/cpu:0", "-rank1/cpu:0", "fabric", "kind: network", "measured network"})
    EXPECT_NE(text.find(needle), std::string::npos) << needle << " missing from the machine file:\n" << text;
  // It loads, and a placement across the two nodes is priced over the measured network.
  CliResult show = placelab("machines " + out);
  ASSERT_EQ(show.status, 0) << show.out;
  CliResult sim = placelab("simulate -g " + std::string(PLACELAB_SOURCE_DIR) + "/scenarios/graphs/quickstart.json -m " + out +
                           " -p round_robin --json");
  ASSERT_EQ(sim.status, 0) << sim.out;
  EXPECT_NE(sim.out.find("network"), std::string::npos) << "no transfer crossed the network: " << sim.out;
}

}  // namespace
