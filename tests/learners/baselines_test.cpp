#include "placelab/learners/baselines.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/models/zoo.h"
#include "placelab/sim/simulator.h"
#include "toy.h"

namespace placelab {
namespace {

void expect_valid(const OpGraph& g, const Machine& m, const Placement& p, const char* what) {
  EXPECT_NO_THROW(check_placement(p, g.num_ops(), m.num_devices(), what)) << what;
  // Colocation kept (the only cpu_only op, "save", is not colocated with anything).
  std::map<std::string, DeviceId> dev_of_key;
  for (OpId op = 0; op < g.num_ops(); ++op) {
    if (g.op(op).cpu_only) {
      EXPECT_EQ(p[op], *m.default_cpu()) << what;
    }
    if (g.op(op).colocation.empty()) continue;
    auto [it, inserted] = dev_of_key.emplace(g.op(op).colocation, p[op]);
    EXPECT_EQ(it->second, p[op]) << what << ": colocation " << g.op(op).colocation << " split";
  }
}

std::set<DeviceId> gpus_used(const OpGraph& g, const Machine& m, const Placement& p) {
  std::set<DeviceId> used;
  for (OpId op = 0; op < g.num_ops(); ++op)
    if (m.devices[p[op]].kind == DeviceKind::kGpu) used.insert(p[op]);
  return used;
}

TEST(Baselines, SingleDevicePlacements) {
  const Machine m = testing::toy_machine(2);
  const OpGraph g = testing::fork_join(2, 3, 1e9, 1 << 10);
  const Placement gpu = single_gpu_placement(g, m);
  expect_valid(g, m, gpu, "single_gpu");
  EXPECT_EQ(gpus_used(g, m, gpu), (std::set<DeviceId>{1}));
  EXPECT_EQ(single_gpu_placement(g, m, DeviceId{2})[0], 2);
  EXPECT_THROW(single_gpu_placement(g, m, DeviceId{0}), InputError);  // the CPU is no GPU
  const Placement cpu = single_cpu_placement(g, m);
  for (DeviceId d : cpu) EXPECT_EQ(d, 0);
}

TEST(Baselines, RandomAndRoundRobinAreValidAndSeeded) {
  const Machine m = testing::toy_machine(4);
  const OpGraph g = testing::fork_join(4, 6, 1e9, 1 << 10);
  const Placement r1 = random_placement(g, m, 1), r2 = random_placement(g, m, 1), r3 = random_placement(g, m, 2);
  expect_valid(g, m, r1, "random");
  EXPECT_EQ(r1, r2);
  EXPECT_NE(r1, r3);
  const Placement rr = round_robin_placement(g, m);
  expect_valid(g, m, rr, "round_robin");
  EXPECT_EQ(gpus_used(g, m, rr).size(), 4u);
  EXPECT_EQ(rr[0], 1);  // src is first in topological order: the first GPU
}

class PartitionBaselines : public ::testing::TestWithParam<std::string> {};

TEST_P(PartitionBaselines, ValidPlacementsUsingEveryGpuOnParallelWork) {
  const Machine m = testing::toy_machine(4);
  const testing::FlopsCostModel cost(m);
  const OpGraph g = testing::fork_join(8, 10, 1e10, 1 << 12);
  Placement p;
  if (GetParam() == "metis") p = metis_placement(g, m);
  if (GetParam() == "scotch") p = scotch_placement(g, cost);
  if (GetParam() == "mincut") p = mincut_placement(g, cost);
  expect_valid(g, m, p, GetParam().c_str());
  EXPECT_EQ(gpus_used(g, m, p).size(), 4u) << GetParam();
  if (GetParam() == "mincut")
    for (OpId op = 0; op < g.num_ops(); ++op)
      if (!g.op(op).cpu_only) {
        EXPECT_NE(p[op], 0) << "MinCut leaves the CPU out";
      }
  // Deterministic.
  Placement again;
  if (GetParam() == "metis") again = metis_placement(g, m);
  if (GetParam() == "scotch") again = scotch_placement(g, cost);
  if (GetParam() == "mincut") again = mincut_placement(g, cost);
  EXPECT_EQ(p, again) << GetParam();
  // Balanced: the simulated step beats one GPU by a wide margin on this embarrassingly parallel graph.
  const Simulator sim(g, cost);
  EXPECT_LT(sim.simulate(p).step_time_s, 0.5 * sim.simulate(single_gpu_placement(g, m)).step_time_s) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Baselines, PartitionBaselines, ::testing::Values("metis", "scotch", "mincut"));

TEST(Heft, BeatsRoundRobinOnForkJoin) {
  const Machine m = testing::toy_machine(4);
  const testing::FlopsCostModel cost(m);
  // Branch ops of 1 ms on a GPU, 4 MB tensors (0.4 ms per hop): chains should stay whole.
  const OpGraph g = testing::fork_join(4, 8, 1e10, 4 << 20);
  const Placement heft = heft_placement(g, cost);
  expect_valid(g, m, heft, "heft");
  const Simulator sim(g, cost);
  const double t_heft = sim.simulate(heft).step_time_s;
  const double t_rr = sim.simulate(round_robin_placement(g, m)).step_time_s;
  const double t_single = sim.simulate(single_gpu_placement(g, m)).step_time_s;
  EXPECT_LT(t_heft, t_rr);
  EXPECT_LT(t_heft, t_single);
  EXPECT_GE(gpus_used(g, m, heft).size(), 2u);  // the chains run in parallel
}

TEST(Heft, SeesTheGraphsMeasuredTimes) {
  const Machine m = testing::toy_machine(4);  // cpu:0, gpu:0..3, alike by the model
  const testing::FlopsCostModel cost(m);
  OpGraph g;
  // 1 ms on any GPU by the model; measured: 1 s on a GPU, 0.1 ms on gpu:2 (device 3).
  g.add_op({.name = "a", .type = "MatMul", .flops = 1e10, .measured_s = {{"gpu", 1.0}, {"gpu:2", 1e-4}}});
  g.add_op({.name = "b", .type = "Relu", .flops = 1e10});
  g.add_edge(0, 1, {.bytes = 4});
  const Placement heft = heft_placement(g, cost);
  EXPECT_EQ(heft[0], 3u);
  EXPECT_EQ(heft[1], 3u);  // b follows a rather than wait for a copy
  const Simulator sim(g, cost);
  EXPECT_DOUBLE_EQ(sim.simulate(heft).step_time_s, 1e-4 + 1e-3);
}

TEST(Heft, KeepsAChainWithItsVariablesOnOneGpu) {
  // One chain whose ops each read their own variable: compute is cheap and tensors are large, so
  // every split only adds transfers. HEFT must not scatter the (source) variables over idle GPUs
  // at time 0 and drag their consumers after them.
  const Machine m = testing::toy_machine(4);
  const testing::FlopsCostModel cost(m);
  OpGraph g;
  OpId prev = g.add_op({.name = "input", .type = "Input", .flops = 1e6, .output_bytes = 64 << 20});
  for (int i = 0; i < 6; ++i) {
    const std::string key = "layer" + std::to_string(i);
    // A variable read costs a little (launch overhead on real devices), so idle GPUs look attractive.
    const OpId w = g.add_op(
        {.name = key + "/w", .type = "VariableV2", .flops = 1e6, .persistent_bytes = 1 << 20, .colocation = key});
    const OpId op = g.add_op({.name = key + "/MatMul", .type = "MatMul", .flops = 1e8, .output_bytes = 64 << 20});
    g.add_edge(w, op, {.bytes = 64 << 20});
    g.add_edge(prev, op, {.bytes = 64 << 20});
    prev = op;
  }
  const Placement heft = heft_placement(g, cost);
  EXPECT_EQ(gpus_used(g, m, heft).size(), 1u);
  const Simulator sim(g, cost);
  EXPECT_EQ(sim.simulate(heft).step_time_s, sim.simulate(single_gpu_placement(g, m)).step_time_s);
}

TEST(Heft, RespectsMemoryOfPersistentBytes) {
  Machine m = testing::toy_machine(2);
  m.devices[1].memory_bytes = 3 << 20;  // gpu:0 holds at most 3 MiB of variables
  m.finalize();
  const testing::FlopsCostModel cost(m);
  const OpGraph g = testing::fork_join(6, 2, 1e9, 1 << 10);  // six 1 MiB variables
  const Placement p = heft_placement(g, cost);
  int64_t on_gpu0 = 0;
  for (OpId op = 0; op < g.num_ops(); ++op)
    if (p[op] == 1) on_gpu0 += g.op(op).persistent_bytes;
  EXPECT_LE(on_gpu0, int64_t{3} << 20);
}

// ---- Baechi's m-TOPO, m-ETF and m-SCT ---------------------------------------------------------

class BaechiBaselines : public ::testing::TestWithParam<std::string> {
 protected:
  Placement place(const OpGraph& g, const CostModel& cost) const {
    if (GetParam() == "m_topo") return m_topo_placement(g, cost.machine());
    return GetParam() == "m_etf" ? m_etf_placement(g, cost) : m_sct_placement(g, cost);
  }
};

TEST_P(BaechiBaselines, ValidAndDeterministic) {
  const Machine m = testing::toy_machine(4);
  const testing::FlopsCostModel cost(m);
  const OpGraph g = testing::fork_join(8, 10, 1e10, 1 << 12);
  const Placement p = place(g, cost);
  expect_valid(g, m, p, GetParam().c_str());
  EXPECT_EQ(p, place(g, cost)) << GetParam();
  EXPECT_FALSE(Simulator(g, cost).simulate(p).oom) << GetParam();
}

// A chain of eight layers, each a MatMul colocated with its own 1 GiB variable, on four GPUs that
// hold 3.5 GiB each: the model (8 GiB of variables) fits only spread over three GPUs or more.
OpGraph layers_with_large_variables() {
  OpGraph g;
  constexpr int64_t kActivation = 1 << 20;
  OpId prev = g.add_op({.name = "input", .type = "Input", .flops = 1e6, .output_bytes = kActivation});
  for (int i = 0; i < 8; ++i) {
    const std::string key = "layer" + std::to_string(i);
    const OpId w = g.add_op({.name = key + "/w", .type = "VariableV2", .persistent_bytes = int64_t{1} << 30,
                             .colocation = key});
    const OpId op = g.add_op({.name = key + "/MatMul", .type = "MatMul", .flops = 1e9, .output_bytes = kActivation,
                              .colocation = key});
    g.add_edge(w, op, {.bytes = kActivation});
    g.add_edge(prev, op, {.bytes = kActivation});
    prev = op;
  }
  return g;
}

TEST_P(BaechiBaselines, FitsWhereEachGpuHoldsOnlyPartOfTheModel) {
  Machine m = testing::toy_machine(4);
  for (Device& d : m.devices)
    if (d.kind == DeviceKind::kGpu) d.memory_bytes = int64_t{7} << 29;  // 3.5 GiB
  m.finalize();
  const testing::FlopsCostModel cost(m);
  const OpGraph g = layers_with_large_variables();
  const Simulator sim(g, cost);
  // Blind to memory, a topological order on one device and ETF both pile the layers on one GPU.
  EXPECT_TRUE(sim.simulate(single_gpu_placement(g, m)).oom);
  EXPECT_TRUE(sim.simulate(m_etf_placement(g, cost, {.respect_memory = false})).oom);
  EXPECT_TRUE(sim.simulate(m_sct_placement(g, cost, {.respect_memory = false})).oom);
  const Placement p = place(g, cost);
  expect_valid(g, m, p, GetParam().c_str());
  const SimResult r = sim.simulate(p);
  EXPECT_FALSE(r.oom) << GetParam() << ": " << oom_message(r, m);
}

INSTANTIATE_TEST_SUITE_P(Baselines, BaechiBaselines, ::testing::Values("m_topo", "m_etf", "m_sct"));

TEST(MTopo, FillsEachGpuUpToAnEvenShareInTopologicalOrder) {
  const Machine m = testing::toy_machine(4);
  const OpGraph g = layers_with_large_variables();
  const Placement p = m_topo_placement(g, m);
  // Share = (8 GiB + 9 MiB of variables and outputs) / 4 GPUs + 1 GiB (the largest op) = 3 GiB +
  // 2.25 MiB. gpu:0 holds the input (1 MiB) and two layers (1 GiB + 1 MiB each); a third would
  // take it to 3 GiB + 4 MiB. So two layers per GPU.
  const DeviceId expected[8] = {1, 1, 2, 2, 3, 3, 4, 4};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(p[*g.find("layer" + std::to_string(i) + "/MatMul")], expected[i]) << "layer " << i;
    EXPECT_EQ(p[*g.find("layer" + std::to_string(i) + "/w")], expected[i]) << "layer " << i;
  }
  // Non-uniform (Baechi's m_topo_nonuniform): gpu:0 takes everything its 8 GB hold.
  const Placement q = m_topo_placement(g, m, {.uniform = false});
  EXPECT_EQ(q[*g.find("layer6/MatMul")], 1);
  EXPECT_EQ(q[*g.find("layer7/MatMul")], 2);
}

// A diamond a → b, a → c, b → d, c → d of 10 MB tensors: a, c and d 1e10 FLOP (1 ms on a toy GPU),
// b `b_flops`.
OpGraph diamond(double b_flops) {
  OpGraph g;
  constexpr int64_t kBytes = 10'000'000;
  const OpId a = g.add_op({.name = "a", .type = "MatMul", .flops = 1e10, .output_bytes = kBytes});
  const OpId b = g.add_op({.name = "b", .type = "MatMul", .flops = b_flops, .output_bytes = kBytes});
  const OpId c = g.add_op({.name = "c", .type = "MatMul", .flops = 1e10, .output_bytes = kBytes});
  const OpId d = g.add_op({.name = "d", .type = "AddN", .flops = 1e10, .output_bytes = kBytes});
  g.add_edge(a, b, {.bytes = kBytes});
  g.add_edge(a, c, {.bytes = kBytes});
  g.add_edge(b, d, {.bytes = kBytes});
  g.add_edge(c, d, {.bytes = kBytes});
  return g;
}

// ETF by hand on two GPUs of the toy machine (10 TFLOP/s; gpu:0 → gpu:1 is two PCIe hops, 20 µs +
// bytes / 10 GB/s, so a 10 MB tensor takes 1.02 ms). a (1 ms) → b (3 ms), c (1 ms) → d (1 ms).
//   a: a source, gpu:0 at 0 (tie with gpu:1, lower id), done at 1; then b and c are asked for.
//   b, c both start at 1 on gpu:0 (2.02 on gpu:1): b, earlier in topological order, done at 4.
//   c: gpu:0 at 4, gpu:1 at 1 + 1.02 = 2.02 → gpu:1, done at 3.02; then d is asked for.
//   d: gpu:0 at max(4, 3.02 + 1.02) = 4.04, gpu:1 at 4 + 1.02 = 5.02 → gpu:0, done at 5.04.
// One GPU would take 6 ms, and no run with this one as its hint does better, so it is the answer.
TEST(MEtf, MatchesAHandComputedSchedule) {
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  const ListSchedule s = m_etf_schedule(diamond(3e10), cost);
  EXPECT_EQ(s.placement, (Placement{1, 1, 2, 1}));
  EXPECT_DOUBLE_EQ(s.makespan_s, 5.04e-3);
}

// Two children of one parent on the toy machine (1 ms per 1e10 FLOP; a's 10 MB output takes 1.02
// ms between the GPUs, c = 1.02): a (1 ms) → c (1 ms), a → b (1.408 ms); c has the lower id. The
// LP: w >= 1 + c x_ab + 1.408, w >= 1 + c x_ac + 1, x_ab + x_ac >= 1. Its optimum equalises the two
// paths: x_ab = (c - 0.408) / 2c = 0.3, x_ac = 0.7, so b is a's favorite at threshold 0.5 and a has
// none at Baechi's --sct_threshold 0.1.
struct TwoChildren {
  OpGraph g;
  OpId a = 0, c = 0, b = 0;
  TwoChildren() {
    constexpr int64_t kBytes = 10'000'000;
    a = g.add_op({.name = "a", .type = "MatMul", .flops = 1e10, .output_bytes = kBytes});
    c = g.add_op({.name = "c", .type = "MatMul", .flops = 1e10, .output_bytes = kBytes});
    b = g.add_op({.name = "b", .type = "MatMul", .flops = 1.408e10, .output_bytes = kBytes});
    g.add_edge(a, c, {.bytes = kBytes});
    g.add_edge(a, b, {.bytes = kBytes});
  }
};

TEST(MSct, FavoriteChildIsTheLpsRoundedAnswer) {
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  const TwoChildren t;
  const std::vector<std::optional<OpId>> favorite = sct_favorite_children(t.g, cost);
  EXPECT_EQ(favorite[t.a], t.b);
  EXPECT_FALSE(favorite[t.b].has_value());
  EXPECT_FALSE(favorite[t.c].has_value());
  EXPECT_FALSE(sct_favorite_children(t.g, cost, {.favorite_threshold = 0.1})[t.a].has_value());

  // A diamond a → b (3 ms) → d, a → c (1 ms) → d: the LP keeps the long path's two edges local
  // (x_ab + x_bd = 0.02 / 1.02 at the optimum) and pays the short path's (x_ac, x_cd >= 0.98).
  // Ops a, b, c, d are ids 0-3.
  EXPECT_EQ(sct_favorite_children(diamond(3e10), cost),
            (std::vector<std::optional<OpId>>{OpId{1}, OpId{3}, std::nullopt, std::nullopt}));
}

// The same graph scheduled. ETF: a on gpu:0 at 0; at 1 c and b could both start on gpu:0 (2.02 on
// gpu:1), c wins the tie by topological order, and b follows it on gpu:0 at 2 (gpu:1: 2.02): one
// GPU, done at 3.408. SCT keeps gpu:0 for b, a's favorite; c may take it only when urgent (at 2.02,
// its start on gpu:1), so b runs there at 1 and c on gpu:1 at 2.02: done at 3.02.
TEST(MSct, KeepsTheParentsGpuForItsFavoriteChild) {
  const Machine m = testing::toy_machine(2);
  const testing::FlopsCostModel cost(m);
  const TwoChildren t;
  EXPECT_EQ(m_etf_placement(t.g, cost), (Placement{1, 1, 1}));
  const Placement p = m_sct_placement(t.g, cost);
  EXPECT_EQ(p, (Placement{1, 2, 1}));
  const Simulator sim(t.g, cost);
  EXPECT_LT(sim.simulate(p).step_time_s, sim.simulate(m_etf_placement(t.g, cost)).step_time_s);
}

TEST(Baselines, OptionsAreValidated) {
  MetisPlacementOptions mo;
  mo.imbalance = 1.0;
  EXPECT_THROW(mo.validate(), InputError);
  ScotchPlacementOptions so;
  so.seed = -1;
  EXPECT_THROW(so.validate(), InputError);
  EXPECT_THROW(MSctOptions{.favorite_threshold = 1.0}.validate(), InputError);
  EXPECT_THROW(MSctOptions{.favorite_threshold = -0.1}.validate(), InputError);
}

// Scotch 7 maps with threads by default; on a graph this large two runs used to differ (Inception-V3
// on k80x2: 1.279 vs 1.322 s). The baseline must be a function of its inputs and seed.
TEST(ScotchBaseline, IsDeterministicOnALargeGraph) {
  models::Model model = models::make_model(models::ModelSpec::parse("inception_v3"));
  Machine machine = load_machine("k80x2");
  AnalyticCostModel cost(machine);
  Placement first = scotch_placement(model.graph, cost);
  for (int run = 0; run < 3; ++run) EXPECT_EQ(scotch_placement(model.graph, cost), first) << "run " << run;
}

// HEFT's, m-ETF's and m-SCT's schedules of `graph` on `preset`: each one's makespan is the simulated
// step of its placement, to the bit, and the placement is valid.
void expect_schedules_predict_their_step(const OpGraph& graph, const std::string& preset, const std::string& what) {
  const Machine machine = load_machine(preset);
  const AnalyticCostModel cost(machine);
  const Simulator sim(graph, cost);
  for (const auto& [name, schedule] : {std::pair{"heft", heft_schedule(graph, cost)},
                                       std::pair{"m_etf", m_etf_schedule(graph, cost)},
                                       std::pair{"m_sct", m_sct_schedule(graph, cost)}}) {
    const SimResult r = sim.simulate(schedule.placement);
    EXPECT_EQ(schedule.makespan_s, r.step_time_s) << name << " on " << what << ", " << preset;
    EXPECT_GT(r.step_time_s, 0.0);
    expect_valid(graph, machine, schedule.placement, name);
  }
}

// On a PyTorch graph the list schedulers build the step with the eager model itself
// (EagerSchedule), so the makespan each predicts is the simulated step of its placement, to the
// bit: the zoo's models that have a PyTorch form, on every single-node preset.
TEST(ListSchedulers, PredictTheSimulatedStepOfTheirPlacementOnEagerGraphs) {
  for (const char* spec : {"resnet50:framework=pytorch,batch=16,image=64", "alexnet:framework=pytorch,batch=32,image=224",
                           "inception_v3:framework=pytorch,batch=8", "bert_base:framework=pytorch,layers=2"}) {
    const models::Model model = models::make_model(models::ModelSpec::parse(spec));
    ASSERT_EQ(model.graph.execution(), Execution::kEager) << spec;
    for (const char* preset : {"k80x4", "p100x4", "dgx1", "h100x8"}) {
      expect_schedules_predict_their_step(model.graph, preset, spec);
    }
  }
}

// On a TensorFlow graph the list schedulers decide each op's device inside the simulator's own run
// of the step (sim/dataflow_schedule.h), so again the makespan each predicts is the simulated step
// of its placement, to the bit. A sample of the zoo's dataflow models over the single-node presets
// (docs/learners.md has the full table and the command behind it).
TEST(ListSchedulers, PredictTheSimulatedStepOfTheirPlacementOnDataflowGraphs) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"inception_v3:batch=8", "p100x4"}, {"resnet50:batch=8,image=64", "k80x4"},
      {"nmt:layers=2,batch=16,seq=10", "dgx1"}, {"cifar10_cnn", "h100x8"}};
  for (const auto& [spec, preset] : cases) {
    const models::Model model = models::make_model(models::ModelSpec::parse(spec));
    ASSERT_EQ(model.graph.execution(), Execution::kDataflow) << spec;
    expect_schedules_predict_their_step(model.graph, preset, spec);
  }
}

// The whole matrix behind docs/learners.md's table: every dataflow model of the zoo at its defaults
// (or those in PLACELAB_LIST_MODELS) on every preset in PLACELAB_LIST_PRESETS (comma-separated;
// default the single-node ones),
// printing each scheduler's predicted makespan, the simulated step of its placement and one GPU's.
// Minutes of CPU, so disabled; run it with
//   build/tests/learners/learners_test --gtest_also_run_disabled_tests
//       --gtest_filter=ListSchedulers.DISABLED_PredictTheSimulatedStepOnEveryZooModelAndPreset
TEST(ListSchedulers, DISABLED_PredictTheSimulatedStepOnEveryZooModelAndPreset) {
  std::vector<std::string> presets = {"k80x2", "k80x4", "k80x8", "p100x4", "dgx1", "h100x8"};
  if (const char* names = std::getenv("PLACELAB_LIST_PRESETS")) {
    presets.clear();
    std::stringstream in(names);
    for (std::string name; std::getline(in, name, ',');) presets.push_back(name);
  }
  const char* only = std::getenv("PLACELAB_LIST_MODELS");  // comma-separated; default all
  for (const models::ModelInfo& info : models::model_zoo()) {
    if (only && ("," + std::string(only) + ",").find("," + info.name + ",") == std::string::npos) continue;
    const models::Model model = models::make_model(models::ModelSpec::parse(info.name));
    if (model.graph.execution() != Execution::kDataflow) continue;
    for (const std::string& preset : presets) {
      const Machine machine = load_machine(preset);
      const AnalyticCostModel cost(machine);
      const Simulator sim(model.graph, cost);
      const SimResult one_gpu = sim.simulate(single_gpu_placement(model.graph, machine));
      for (const auto& [name, schedule] : {std::pair{"heft", heft_schedule(model.graph, cost)},
                                           std::pair{"m_etf", m_etf_schedule(model.graph, cost)},
                                           std::pair{"m_sct", m_sct_schedule(model.graph, cost)}}) {
        const SimResult r = sim.simulate(schedule.placement);
        EXPECT_EQ(schedule.makespan_s, r.step_time_s) << name << " on " << info.name << ", " << preset;
        std::printf("| %s | %s | %s | %.4f | %.4f%s | %.4f%s |\n", info.name.c_str(), preset.c_str(), name,
                    schedule.makespan_s, r.step_time_s, r.oom ? " (OOM)" : "", one_gpu.step_time_s,
                    one_gpu.oom ? " (OOM)" : "");
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace
}  // namespace placelab
