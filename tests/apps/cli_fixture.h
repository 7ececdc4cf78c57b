// The fixture and scenario texts the CLI's end-to-end tests share (cli_test.cpp: the commands;
// cli_run_test.cpp: runs, resumes, scenarios and reports).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "run_cli.h"

namespace placelab::testing {

namespace fs = std::filesystem;

// A scratch folder per test process, removed after each test; the quickstart's graph and scenario.
class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("placelab_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  const std::string quickstart_ = std::string(PLACELAB_SOURCE_DIR) + "/scenarios/graphs/quickstart.json";
  static std::string quickstart_scenario() { return std::string(PLACELAB_SOURCE_DIR) + "/scenarios/quickstart.yaml"; }
  fs::path dir_;
};

// A small scenario on the quickstart graph: quick enough for CI, but it runs every part of a run.
inline std::string small_scenario(const std::string& graph, const fs::path& out, const std::string& extra = "") {
  return "name: small\n"
         "graph: " + graph + "\n"
         "machine: k80x2\n"
         "devices: gpus\n"
         "grouping: colocation\n"
         "samples: 48\n"
         "batch: 12\n"
         "seeds: 2\n"
         "checkpoint_every: 12\n"
         "learners:\n  post: {ce_every: 24}\n  reinforce: {}\n"
         "baselines: [single_gpu, heft, round_robin, expert]\n"
         "output: " + out.string() + "\n" + extra;
}

// A file's whole text (empty when it cannot be read).
inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A scenario of the four neural learners at toy sizes whose batches (7) cut their updates (6, 5):
// a run stopped at a batch's end stops inside an update.
inline std::string neural_scenario(const std::string& graph, const fs::path& out) {
  return "name: neural\n"
         "graph: " + graph + "\n"
         "machine: k80x2\n"
         "devices: gpus\n"
         "grouping: colocation\n"
         "samples: 30\n"
         "batch: 7\n"
         "seeds: 1\n"
         "checkpoint_every: 12\n"
         "learners:\n  grl: {hidden: 16, samples_per_update: 6}\n  spotlight: {hidden: 16, sga_steps: 3}\n"
         "  hierarchical: {hidden: 16, groups: 4, samples_per_update: 4}\n"
         "  eagle_ce: {hidden: 16, groups: 4, samples_per_update: 4, ce_every: 8}\n"
         "baselines: [single_gpu]\n"
         "output: " + out.string() + "\n";
}

}  // namespace placelab::testing
