#include "placelab/sim/sim_environment.h"

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "sim_test_util.h"

namespace placelab {
namespace {

TEST(SimEnvironment, MeasuresWhatTheSimulatorPredicts) {
  Machine m = testing::mesh_machine(2, 1, /*memory_bytes=*/1000);
  testing::FixedCostModel cost(m);
  OpGraph g;
  testing::add(g, "a", 1, 0, 600);
  testing::add(g, "b", 2, 0, 600);
  g.add_edge(0, 1, Tensor{300, false});
  Simulator sim(g, cost);
  SimEnvironment env(sim, 2);
  EXPECT_EQ(env.name(), "sim");
  std::vector<Placement> batch = {{0, 1}, {0, 0}, {1, 0}};
  std::vector<Measurement> out = env.evaluate(batch);
  ASSERT_EQ(out.size(), 3u);
  // {0,1}: a [0,1], send 1 + 0.3 s, b [2.3, 4.3]; gpu:1 holds 600 + the 300 B copy.
  // {0,0}: 3 s but 1200 B on gpu:0 > 1000: OOM.
  EXPECT_DOUBLE_EQ(out[0].step_time_s, 4.3);
  EXPECT_FALSE(out[0].oom);
  EXPECT_DOUBLE_EQ(out[1].step_time_s, 3);
  EXPECT_TRUE(out[1].oom);
  EXPECT_DOUBLE_EQ(out[2].step_time_s, 4.3);
  for (const Measurement& x : out) EXPECT_EQ(x.source, "sim");
  ASSERT_EQ(env.last_results().size(), 3u);
  EXPECT_EQ(env.last_results()[1].oom_excess_bytes, 200);
  // A smaller batch after a larger one reports only its own results.
  EXPECT_EQ(env.evaluate(std::span<const Placement>(batch).first(1)).size(), 1u);
  EXPECT_EQ(env.last_results().size(), 1u);
  EXPECT_THROW(env.evaluate(std::vector<Placement>{{0}}), InputError);
}

}  // namespace
}  // namespace placelab
