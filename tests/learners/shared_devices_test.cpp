// The sharing rule (docs/simulator.md, "Compute") on the presets and the zoo: a preset's CPU runs
// its inter-op slots on one socket, so a placement that puts a whole training step on it takes the
// step's whole work there — what an all-CPU GNMT step on p100x4 did not before the rule (30.07 s of
// work in 12.79 s).
#include <gtest/gtest.h>

#include <string>

#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/models/zoo.h"
#include "placelab/sim/bounds.h"
#include "placelab/sim/simulator.h"

namespace placelab {
namespace {

// Everything on `cpu`: one device never idles while ops are left (every input is local), so the
// step is its work, Σ op times, to rounding.
void expect_all_on_one_cpu_takes_its_work(const std::string& spec, const std::string& preset) {
  const models::Model model = models::make_model(models::ModelSpec::parse(spec));
  const Machine machine = load_machine(preset);
  const AnalyticCostModel cost(machine);
  const Simulator sim(model.graph, cost);
  const DeviceId cpu = *machine.find_device("cpu:0");
  ASSERT_GT(machine.devices[cpu].streams, machine.devices[cpu].full_speed_ops) << preset;
  double work = 0;
  for (OpId op = 0; op < model.graph.num_ops(); ++op) work += sim.op_time_s(op, cpu);
  const SimResult r = sim.simulate(Placement(model.graph.num_ops(), cpu));
  EXPECT_NEAR(r.devices[cpu].busy_s, work, 1e-9 * work);
  EXPECT_NEAR(r.step_time_s, work, 1e-9 * work) << spec << " on " << preset;
  // And the work bound counts the socket once, not once per slot.
  EXPECT_LE(step_lower_bound(model.graph, sim, std::vector<DeviceId>{cpu}).work_s, r.step_time_s * (1 + 1e-12));
}

TEST(SharedDevices, AnAllCpuStepTakesTheWholeWorkOfTheSocket) {
  expect_all_on_one_cpu_takes_its_work("gnmt:layers=2,batch=32", "p100x4");
  expect_all_on_one_cpu_takes_its_work("inception_v3:batch=8", "k80x4");
}

}  // namespace
}  // namespace placelab
