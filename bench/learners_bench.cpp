// Learner speed, on one thread:
//  - BM_Train/<learner>: one whole run of 2,400 samples (Post's budget, in batches of 12) on the
//    op-level Inception-V3 (batch 32) on `k80x4`, in `scope_units` groups, as
//    scenarios/post-table1-inception-4gpu.yaml runs it (targets: Post under 60 s, grl under 2 min
//    on one core). Graph generation and grouping are set up once, outside the timing.
//  - BM_Seq2SeqSample/<learner>/hidden:<H>: the neural learners alone (the environment answers at
//    once) on 256 groups and 5 devices, the Hierarchical Planner's and EAGLE's group count: one
//    iteration draws an update's placements and runs the update, so 1 / items_per_second is one
//    sample plus its share of the update (targets: ≤ 0.2 s at hidden 512, ≤ 20 ms at hidden 128).
//
//  - The learned groupers on the papers' largest graph, GNMT (4 layers, batch 256: 43,932 ops,
//    43,884 colocation units), 256 groups and 64 hidden units (the Hierarchical Planner's and
//    EAGLE's settings): BM_GrouperForwardBackward, a forward pass over every unit and the backward
//    pass of one grouping's policy gradient (target ≤ 100 ms); BM_GrouperSample, one grouping
//    drawn from a forward pass already made; BM_MergeUnits, a drawn grouping turned into the
//    placer's input (merge_units, then the 256 groups' feature matrix).
//
//  - CTest's smoke run (bench_util.h) trains one batch of 12 samples, the neural learners at hidden 32.
//
//   taskset -c 1 build/bench/learners_bench --benchmark_filter=BM_Train/post
//   taskset -c 1 build/bench/learners_bench --benchmark_filter=BM_Seq2SeqSample
//   taskset -c 1 build/bench/learners_bench --benchmark_filter='BM_Grouper|BM_MergeUnits'
//   taskset -c 1 build/bench/learners_bench --benchmark_filter=BM_LearnedGroupingSample
//   taskset -c 1 build/bench/learners_bench --benchmark_filter=BM_AttentionDecode
//   taskset -c 1 build/bench/learners_bench --benchmark_filter='BM_FmaPeak|BM_SmallProduct'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>

#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/learners/grouper.h"
#include "placelab/learners/grouping.h"
#include "placelab/learners/nn/layers.h"
#include "placelab/learners/problem.h"
#include "placelab/learners/registry.h"
#include "placelab/learners/trainer.h"
#include "placelab/models/zoo.h"
#include "placelab/sim/sim_environment.h"
#include "placelab/sim/simulator.h"
#include "bench_util.h"

namespace placelab {
namespace {

// The scenario's inputs, built once for every benchmark of this program.
struct InceptionSetup {
  models::Model model = models::make_model(models::ModelSpec::parse("inception_v3:batch=32"));
  Machine machine = load_machine("k80x4");
  AnalyticCostModel cost{machine};
  Simulator sim{model.graph, cost};
  Grouping grouping = make_grouping(model.graph, "scope_units");
  PlacementProblem problem = describe_problem(model.graph, grouping);
  SearchSpace space;
  InceptionSetup() {
    space.num_groups = grouping.num_groups();
    for (std::size_t d = 0; d < machine.num_devices(); ++d)
      if (machine.devices[d].kind == DeviceKind::kGpu) space.devices.push_back(static_cast<DeviceId>(d));
  }
};

const InceptionSetup& setup() {
  static const InceptionSetup s;
  return s;
}

// A learner's options: its defaults, and in the smoke run a small network (hidden 32) for the
// neural ones, whose paper-sized networks take seconds a sample.
OptionValues smoke_options(const LearnerEntry& entry) {
  if (bench::smoke() && entry.needs_problem) return {{"hidden", int64_t{32}}};
  return {};
}

void BM_Train(benchmark::State& state, const std::string& learner_name) {
  const InceptionSetup& s = setup();
  SimEnvironment env(s.sim, /*threads=*/1);
  TrainerOptions options;  // 2,400 samples in batches of 12: Post's budget and workers
  if (bench::smoke()) options.sample_budget = options.batch_size;
  double best = 0;
  int64_t samples = 0;
  // No DoNotOptimize: train() changes the learner, so nothing here can be optimised away (and this
  // Google Benchmark's DoNotOptimize on a double clobbered it in testing).
  // As a scenario runs it (apps/src/run.cpp): a learner that places ops (critpath) gets the ops as
  // its space, the scenario's groups to move whole, the graph and its simulator, and the fastest
  // baseline as its start (single_gpu here, the scenario's only baseline).
  const LearnerEntry* entry = find_learner(learner_name);
  const Grouping ops = Grouping::identity(s.model.graph.num_ops());
  const Grouping& trained = entry->places_ops ? ops : s.grouping;
  SearchSpace space = s.space;
  space.num_groups = trained.num_groups();
  LearnerContext context{space, /*seed=*/1, &s.problem};
  context.graph = &s.model.graph;
  context.simulator = &s.sim;
  context.grouping = &s.grouping;
  context.best_baseline = Placement(trained.num_groups(), s.space.devices.front());
  for (auto _ : state) {
    std::unique_ptr<Learner> learner = make_learner(LearnerConfig{learner_name, smoke_options(*entry)}, context);
    const TrainSummary summary = train(*learner, trained, env, options);
    best = summary.best_step_time_s;
    samples = summary.samples;
  }
  state.counters["ops"] = static_cast<double>(s.model.graph.num_ops());
  state.counters["groups"] = static_cast<double>(space.num_groups);
  state.counters["best_step_s"] = best;
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsIterationInvariantRate);
}

// 256 groups of a layered graph (16 layers of 16 ops, each reading two ops of the layer before),
// with a mix of op types and shapes so the group features vary: the size of problem the
// Hierarchical Planner and EAGLE decode (256 groups), on 5 devices (a CPU and 4 GPUs).
struct Synthetic256 {
  OpGraph graph;
  Grouping grouping;
  PlacementProblem problem;
  SearchSpace space;
  Synthetic256() {
    const char* types[] = {"MatMul", "Conv2D", "Relu", "Add", "Mul", "Sum", "Tanh", "Sigmoid"};
    for (int layer = 0; layer < 16; ++layer)
      for (int i = 0; i < 16; ++i) {
        const int k = layer * 16 + i;
        std::string name = "l";  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "l" + to_string
        name += std::to_string(layer);
        name += "/op";
        name += std::to_string(i);
        const OpId v = graph.add_op({.name = name,
                                     .type = types[k % 8],
                                     .kernel = KernelSignature::gemm(64 + i, 128, 32 + layer),
                                     .flops = 1e6 * (1 + k % 7),
                                     .output_bytes = 4096 * (1 + k % 5)});
        if (layer > 0) {
          graph.add_edge(static_cast<OpId>(v - 16), v, {.bytes = 4096});
          graph.add_edge(static_cast<OpId>(v - 16 + (i + 1) % 16 - i), v, {.bytes = 4096});
        }
      }
    std::vector<GroupId> ids(graph.num_ops());
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<GroupId>(i);
    grouping = Grouping(std::move(ids));
    problem = describe_problem(graph, grouping);
    space = SearchSpace{grouping.num_groups(), {0, 1, 2, 3, 4}};
  }
};

// One update's placements drawn and observed at once-answered times (the update runs in observe):
// the neural learners' own cost. Returns the samples drawn.
int64_t draw_and_update(Learner& learner, int64_t samples) {
  const std::vector<Placement> batch = learner.propose(learner.samples_until_update());
  std::vector<Measurement> times(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i)
    times[i].step_time_s = 1.0 + 0.01 * static_cast<double>((samples + static_cast<int64_t>(i)) % 7);
  learner.observe(batch, times);
  return static_cast<int64_t>(batch.size());
}

void BM_Seq2SeqSample(benchmark::State& state, const std::string& learner_name) {
  static const Synthetic256 s;
  const int64_t hidden = bench::smoke_size(state.range(0), 32);
  std::unique_ptr<Learner> learner =
      make_learner(LearnerConfig{learner_name, {{"hidden", hidden}}}, LearnerContext{s.space, /*seed=*/1, &s.problem});
  learner->set_sample_budget(1'000'000);
  int64_t samples = 0;
  for (auto _ : state) samples += draw_and_update(*learner, samples);
  state.SetItemsProcessed(samples);
  state.counters["groups"] = static_cast<double>(s.space.num_groups);
  state.counters["devices"] = static_cast<double>(s.space.devices.size());
}

// grl with EAGLE's GCN placer in place of its seq2seq LSTM: the same REINFORCE update over the
// same 256 groups, every group decided at once.
void BM_GcnSample(benchmark::State& state) {
  static const Synthetic256 s;
  const int64_t hidden = bench::smoke_size(state.range(0), 32);
  std::unique_ptr<Learner> learner = make_learner(
      LearnerConfig{"grl", {{"hidden", hidden}, {"placer", std::string("gcn")}}}, LearnerContext{s.space, 1, &s.problem});
  learner->set_sample_budget(1'000'000);
  int64_t samples = 0;
  for (auto _ : state) samples += draw_and_update(*learner, samples);
  state.SetItemsProcessed(samples);
}
BENCHMARK(BM_GcnSample)->ArgName("hidden")->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

// One BM_Train per registry learner, with the paper's options; the neural learners' per-sample
// cost at the hidden sizes of the targets.
const int kRegistered = [] {
  for (const LearnerEntry& entry : learner_registry()) {
    benchmark::RegisterBenchmark(("BM_Train/" + entry.name + "/inception_v3_k80x4").c_str(), BM_Train, entry.name)
        ->Unit(benchmark::kSecond)
        ->Iterations(1)
        ->UseRealTime();
    if (entry.needs_problem) {
      auto* b = benchmark::RegisterBenchmark(("BM_Seq2SeqSample/" + entry.name).c_str(), BM_Seq2SeqSample, entry.name)
                    ->ArgName("hidden")
                    ->Arg(128)
                    ->Arg(512)
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime();
      if (!bench::smoke()) b->MinTime(5.0);
    }
  }
  return 0;
}();

struct GnmtSetup {
  models::Model model = models::make_model(models::ModelSpec::parse("gnmt"));
  Grouping units = make_grouping(model.graph, "colocation");
  PlacementProblem problem = describe_problem(model.graph, units);
  nn::Matrix<float> X = unit_feature_matrix<float>(problem);
};

const GnmtSetup& gnmt() {
  static const GnmtSetup s;
  return s;
}

// One decoder step's weight product at EAGLE's size: a 2048 × 512 LSTM weight (4 × hidden 512)
// times the 10 placements of a minibatch, forwards (W h) or backwards (Wᵀ dP), through
// nn::multiply (its small_product kernels) or Eigen's GEMM as the expression reads.
void BM_SmallProduct(benchmark::State& state, bool transposed, bool eigen) {
  const nn::Index rows = 2048, cols = 512, n = 10;
  Rng rng(3);
  nn::Matrix<float> W(rows, cols), X(transposed ? rows : cols, n), C(transposed ? cols : rows, n);
  for (nn::Index i = 0; i < W.size(); ++i) W.data()[i] = static_cast<float>(uniform01(rng) - 0.5);
  for (nn::Index i = 0; i < X.size(); ++i) X.data()[i] = static_cast<float>(uniform01(rng) - 0.5);
  for (auto _ : state) {
    if (transposed && eigen) C.noalias() = W.transpose() * X;
    else if (transposed) nn::multiply(C, W.transpose(), X);
    else if (eigen) C.noalias() = W * X;
    else nn::multiply(C, W, X);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * cols * n * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_SmallProduct, W_h_multiply, false, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SmallProduct, W_h_eigen, false, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SmallProduct, Wt_dP_multiply, true, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SmallProduct, Wt_dP_eigen, true, true)->Unit(benchmark::kMicrosecond);

// This core's float multiply-add throughput: twelve independent chains of Eigen's fused multiply-add
// on its widest packet, all in registers — the most any product's inner loop can reach here, the
// ceiling BM_SmallProduct's GFLOP/s are read against (EAGLE's speed, docs/learners.md).
void BM_FmaPeak(benchmark::State& state) {
  using Packet = Eigen::internal::packet_traits<float>::type;
  constexpr int kWidth = Eigen::internal::packet_traits<float>::size;
  constexpr int kChains = 12;  // more than FMA latency × pipes (4 × 2 on Zen 4, 4 × 2 on Skylake)
  Packet acc[kChains];
  // Distinct starts, so that no compiler may fold the chains into one.
  for (int i = 0; i < kChains; ++i) acc[i] = Eigen::internal::pset1<Packet>(1.0f + 0.125f * static_cast<float>(i));
  const Packet scale = Eigen::internal::pset1<Packet>(0.9999999f), shift = Eigen::internal::pset1<Packet>(1e-7f);
  constexpr int64_t kRounds = int64_t{1} << 20;
  for (auto _ : state) {
    for (int64_t r = 0; r < kRounds; ++r)
      for (Packet& x : acc) x = Eigen::internal::pmadd(x, scale, shift);
    benchmark::DoNotOptimize(acc);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kWidth * kChains * kRounds * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FmaPeak)->Unit(benchmark::kMillisecond);

// EAGLE's attention over one minibatch's decode: 10 placements, each its own memory of 256 groups
// (hidden 512), one query per decoder step — the S² · A tanh of the forward and of its backward.
// own_memory:0 gives all ten one shared memory (it stays in cache): the difference is what the
// ten memories cost in memory traffic, the rest is the tanh arithmetic.
void BM_AttentionDecode(benchmark::State& state) {
  const nn::Index H = 512, S = 256, B = 10;
  Rng rng(5);
  nn::Attention<float> attention("attention", H, H, H);
  attention.init(rng);
  const nn::Index memories = state.range(1) != 0 ? B : 1;
  nn::Matrix<float> M(H, S * memories), Q(H, B), probs(S, B), context(H, B), dcontext(H, B), dQ(H, B), dM;
  nn::glorot_uniform(M, rng);
  nn::glorot_uniform(Q, rng);
  nn::glorot_uniform(dcontext, rng);
  const bool backward = state.range(0) != 0;
  for (auto _ : state) {
    attention.set_memory(M, S, memories);
    for (nn::Index step = 0; step < S; ++step) {
      attention.forward(Q, probs, context);
      if (backward) attention.backward(Q, probs, dcontext, dQ);
    }
    if (backward) attention.memory_backward(dM);
    benchmark::DoNotOptimize(context.data());
    benchmark::DoNotOptimize(dQ.data());
  }
  state.counters["tanh_per_s"] = benchmark::Counter(static_cast<double>(S * S * B * H) * static_cast<double>(state.iterations()),
                                                    benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"backward", "own_memory"})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Unit(benchmark::kMillisecond);

void BM_GrouperForwardBackward(benchmark::State& state) {
  const GnmtSetup& s = gnmt();
  Rng rng(1);
  FeedForwardGrouper<float> grouper(GrouperOptions{}, s.X.rows(), rng);
  std::vector<std::vector<GroupId>> drawn(1);
  const std::vector<double> coefficient{-0.5};
  grouper.forward(s.X);
  grouper.sample(rng, drawn[0]);
  for (auto _ : state) {
    grouper.params().zero_grad();
    grouper.forward(s.X);
    grouper.backward(s.X, drawn, coefficient);
  }
  state.counters["units"] = static_cast<double>(s.X.cols());
  state.counters["features"] = static_cast<double>(s.X.rows());
  state.SetItemsProcessed(state.iterations());
}

void BM_GrouperSample(benchmark::State& state) {
  const GnmtSetup& s = gnmt();
  Rng rng(1);
  FeedForwardGrouper<float> grouper(GrouperOptions{}, s.X.rows(), rng);
  grouper.forward(s.X);
  std::vector<GroupId> assignment;
  for (auto _ : state) benchmark::DoNotOptimize(grouper.sample(rng, assignment));
  state.SetItemsProcessed(state.iterations());
}

void BM_MergeUnits(benchmark::State& state) {
  const GnmtSetup& s = gnmt();
  Rng rng(1);
  FeedForwardGrouper<float> grouper(GrouperOptions{}, s.X.rows(), rng);
  grouper.forward(s.X);
  std::vector<GroupId> assignment;
  grouper.sample(rng, assignment);
  for (auto _ : state) {
    const PlacementProblem groups = merge_units(s.problem, assignment, grouper.num_groups());
    nn::Matrix<float> input = group_feature_matrix<float>(groups, groups.topological_order);
    benchmark::DoNotOptimize(input.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// The learned-grouping learners on GNMT itself (43,884 colocation units, 6 devices of p100x4, their
// default 256 or 120 groups, hidden 512): one iteration draws an update's placements and runs the
// update, the environment answering at once, so 1 / items_per_second is one sample plus its share
// of the update (EAGLE's target: ≤ 0.5 s).
void BM_LearnedGroupingSample(benchmark::State& state, const std::string& learner_name) {
  const GnmtSetup& s = gnmt();
  const SearchSpace space{s.problem.num_groups, {0, 1, 2, 3, 4, 5}};
  std::unique_ptr<Learner> learner =
      make_learner(LearnerConfig{learner_name, smoke_options(*find_learner(learner_name))}, LearnerContext{space, 1, &s.problem});
  learner->set_sample_budget(1'000'000);
  int64_t samples = 0;
  for (auto _ : state) samples += draw_and_update(*learner, samples);
  state.SetItemsProcessed(samples);
}

BENCHMARK(BM_GrouperForwardBackward)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LearnedGroupingSample, hierarchical, std::string("hierarchical"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LearnedGroupingSample, eagle, std::string("eagle"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GrouperSample)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MergeUnits)->Unit(benchmark::kMillisecond);

// Every grouper on a graph of N ops: a chain in id order and the same chain reversed (consumers
// before producers in id order), each op with a colocation partner every 8 ops and a side input
// every 16, so the merges meet both orders. Time should grow near-linearly in N (issue "Hostile
// input, third round": the single-consumer merge was quadratic, 16 s on a 40k chain).
//   taskset -c 1 build/bench/learners_bench --benchmark_filter=BM_Groupings
OpGraph grouping_bench_graph(int64_t n, bool reversed) {
  OpGraph g;
  for (int64_t i = 0; i < n; ++i) {
    Op op;
    op.name = "s" + std::to_string(i / 100) + "/op" + std::to_string(i);
    op.type = "T";
    op.flops = 1;
    if (i % 8 == 7) op.colocation = "s" + std::to_string(i / 100) + "/op" + std::to_string(i - 7);
    g.add_op(std::move(op));
  }
  for (int64_t i = 0; i + 1 < n; ++i) {
    const auto a = static_cast<OpId>(reversed ? i + 1 : i), b = static_cast<OpId>(reversed ? i : i + 1);
    g.add_edge(a, b, {.bytes = 4});
    if (i % 16 == 0 && i + 3 < n) g.add_edge(reversed ? static_cast<OpId>(i + 3) : a, reversed ? a : static_cast<OpId>(i + 3), {.bytes = 4});
  }
  return g;
}

void BM_Groupings(benchmark::State& state) {
  const int64_t n = bench::smoke_size(state.range(0), 10'000);
  const OpGraph g = grouping_bench_graph(n, state.range(1) != 0);
  for (auto _ : state)
    for (std::string_view name : grouping_names()) {
      if (name == "metis" || name == "scotch" || name == "module") continue;  // partitioners: their libraries' growth
      benchmark::DoNotOptimize(make_grouping(g, std::string(name)).num_groups());
    }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Groupings)
    ->ArgNames({"ops", "reversed"})
    ->Args({10'000, 0})
    ->Args({100'000, 0})
    ->Args({1'000'000, 0})
    ->Args({10'000, 1})
    ->Args({100'000, 1})
    ->Args({1'000'000, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace placelab

BENCHMARK_MAIN();
