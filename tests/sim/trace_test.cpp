#include "placelab/sim/trace.h"

#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "placelab/core/error.h"
#include "sim_test_util.h"

namespace placelab {
namespace {

TEST(ChromeTrace, IsValidJsonWithOneTrackPerStreamAndPerLinkDirection) {
  Machine m = testing::switch_machine();
  m.devices[0].streams = 2;
  m.finalize();
  testing::FixedCostModel cost(m);
  OpGraph g = testing::random_dag(3, 5, 6);
  Placement p = testing::random_placement(9, g.num_ops(), m.num_devices());
  SimResult r = Simulator(g, cost).simulate(p, SimOptions{.record_timeline = true});
  std::ostringstream out;
  write_chrome_trace(r, g, m, out);
  const nlohmann::json doc = nlohmann::json::parse(out.str());  // throws on invalid JSON

  const int links_pid = static_cast<int>(m.num_devices());
  std::map<int, std::set<int>> tracks;  // pid → tids named
  std::map<int, std::string> processes;
  int ops = 0, hops = 0, counters = 0;
  for (const auto& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "thread_name") {
      EXPECT_TRUE(tracks[e.at("pid")].insert(e.at("tid").get<int>()).second) << e.dump();
    } else if (ph == "M" && e.at("name") == "process_name") {
      processes[e.at("pid")] = e.at("args").at("name");
    } else if (ph == "X") {
      EXPECT_GE(e.at("dur").get<double>(), 0);
      EXPECT_TRUE(tracks[e.at("pid")].count(e.at("tid").get<int>())) << "event on an unnamed track: " << e.dump();
      (e.at("cat") == "op" ? ops : hops) += 1;
    } else if (ph == "C") {
      ++counters;
    }
  }
  for (std::size_t d = 0; d < m.num_devices(); ++d) {
    EXPECT_EQ(processes[static_cast<int>(d)], m.devices[d].name);
    EXPECT_EQ(tracks[static_cast<int>(d)].size(), static_cast<std::size_t>(m.devices[d].streams));
  }
  EXPECT_EQ(processes[links_pid], "links");
  EXPECT_EQ(tracks[links_pid].size(), m.num_link_directions());
  EXPECT_EQ(ops, static_cast<int>(g.num_ops()));
  int expected_hops = 0;
  for (const TimelineEvent& e : r.timeline)
    if (e.kind == TimelineEvent::Kind::kTransfer) expected_hops += static_cast<int>(m.route(e.src_device, e.device).hops.size());
  EXPECT_GT(expected_hops, 0);
  EXPECT_EQ(hops, expected_hops);
  EXPECT_EQ(counters, static_cast<int>(r.memory_timeline.size()));
}

TEST(ChromeTrace, RejectsAResultWithoutTimeline) {
  Machine m = testing::mesh_machine(1);
  testing::FixedCostModel cost(m);
  OpGraph g;
  testing::add(g, "a", 1);
  SimResult r = Simulator(g, cost).simulate(Placement{0});
  std::ostringstream out;
  EXPECT_THROW(write_chrome_trace(r, g, m, out), Error);
}

}  // namespace
}  // namespace placelab
