// Scenario fingerprints (apps/src/scenario.h), which decide whether `placelab run --resume` may keep
// a run: a graph file's content is part of them, its measured op times included.
#include "scenario.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "placelab/hwmodels/machine_io.h"

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

// A scenario file in a fresh folder, read back; the folder goes with the fixture.
class ScenarioDevices : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("placelab-scenario-devices-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  placelab::cli::Scenario read(const std::string& machine, const std::string& devices) {
    const fs::path file = dir_ / "s.yaml";
    std::ofstream(file) << "name: s\n"              // 1
                           "model: resnet50\n"      // 2
                           "machine: " << machine << "\n"  // 3
                        << "devices: " << devices << "\n"  // 4
                        << "baselines: [single_gpu]\n";
    return placelab::cli::read_scenario(file);
  }
  std::vector<std::string> names(const std::string& machine, const std::string& devices) {
    const placelab::Machine m = placelab::load_machine(machine);
    std::vector<std::string> out;
    for (placelab::DeviceId d : placelab::cli::learner_devices(read(machine, devices), m))
      out.push_back(m.devices[d].name);
    return out;
  }
  fs::path dir_;
};

// TensorFlow 1.x gives a placer one CPU device for the whole host and the GPUs (the Hierarchical
// Planner's controller sizes its action space from that list): EAGLE's 4 GPUs and 1 CPU, where
// the p100x4 preset has two CPU devices, one per socket.
TEST_F(ScenarioDevices, TensorflowIsTheHostsFirstCpuAndTheGpus) {
  using V = std::vector<std::string>;
  EXPECT_EQ(read("p100x4", "tensorflow").devices, "tensorflow");
  EXPECT_EQ(names("p100x4", "tensorflow"), (V{"cpu:0", "gpu:0", "gpu:1", "gpu:2", "gpu:3"}));
  EXPECT_EQ(names("p100x4", "all"), (V{"cpu:0", "cpu:1", "gpu:0", "gpu:1", "gpu:2", "gpu:3"}));
  EXPECT_EQ(names("p100x4", "gpus"), (V{"gpu:0", "gpu:1", "gpu:2", "gpu:3"}));
  // The host's device is the CPU where cpu_only ops run.
  EXPECT_EQ(placelab::load_machine("dgx1").default_cpu(), placelab::DeviceId{0});
  EXPECT_EQ(names("dgx1", "tensorflow").size(), 9u);
  // One CPU already: TensorFlow's list is every device (Post's and Spotlight's K80 VMs).
  EXPECT_EQ(names("k80x4", "tensorflow"), names("k80x4", "all"));
  EXPECT_EQ(names("k80x8", "tensorflow").size(), 9u);
}

TEST_F(ScenarioDevices, OtherValuesAreRejectedWithFileAndLine) {
  for (const std::string bad : {"cpus", "TensorFlow", "[gpu:0]", "tf"}) {
    try {
      read("p100x4", bad);
      ADD_FAILURE() << bad << ": no error";
    } catch (const placelab::InputError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind((dir_ / "s.yaml").string() + ":4: devices = ", 0), 0u) << what;
      EXPECT_NE(what.find(bad == "[gpu:0]" ? "must be a string" : ": must be one of all, gpus, tensorflow"),
                std::string::npos)
          << what;
    }
  }
}

}  // namespace
