// Scenario fingerprints (apps/src/scenario.h), which decide whether `placelab run --resume` may keep
// a run: a graph file's content is part of them, its measured op times included.
#include "scenario.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

TEST(ScenarioFingerprint, ChangesWithTheGraphsMeasuredTimes) {
  const fs::path dir = fs::temp_directory_path() / ("placelab-scenario-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path graph = dir / "g.json";
  auto write = [&](const std::string& measured) {
    std::ofstream(graph) << "{\"format\": \"placelab-graph\", \"version\": 2, \"ops\": [{\"name\": \"a\", \"type\": "
                            "\"MatMul\""
                         << measured << "}]}\n";
  };
  placelab::cli::Scenario s;
  s.graph = graph;
  write("");
  const std::string plain = placelab::cli::scenario_fingerprint(s);
  write(", \"measured_s\": {\"gpu\": 0.001}");
  const std::string measured = placelab::cli::scenario_fingerprint(s);
  write(", \"measured_s\": {\"gpu\": 0.002}");
  const std::string other = placelab::cli::scenario_fingerprint(s);
  EXPECT_NE(plain, measured);
  EXPECT_NE(measured, other);
  write(", \"measured_s\": {\"gpu\": 0.001}");
  EXPECT_EQ(placelab::cli::scenario_fingerprint(s), measured);
  fs::remove_all(dir);
}

}  // namespace
