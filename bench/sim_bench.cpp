// Simulator throughput: simulated ops per second on synthetic layered DAGs (average fan-in 2) on a
// 5-device machine (1 CPU + 4 GPUs behind one PCIe switch) under random placements. Also counts
// heap allocations per evaluation after the first (a global operator new override), which the
// learners' inner loop relies on being 0. The BM_Cluster* benchmarks scale the machine instead:
// N DGX-1 nodes on InfiniBand (the dgx1x64-ib100 preset's network) and op-level GNMT.
//
//   build/bench/sim_bench --benchmark_filter=BM_Simulate/
//   build/bench/sim_bench --benchmark_filter=BM_Cluster
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "placelab/graph/io.h"
#include "placelab/hwmodels/cluster.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine_io.h"
#include "placelab/models/zoo.h"
#include "placelab/sim/critical_path.h"
#include "placelab/sim/simulator.h"
#include "../tests/support/alloc_counter.h"
#include "bench_util.h"

using placelab::bench::smoke_size;
using placelab::support::g_allocations;

namespace placelab {
namespace {

// Roofline-free stand-in for a cost model: launch overhead + flops / peak. The bench measures the
// simulator, not the cost model, so any fixed positive times do.
class BenchCostModel : public CostModel {
 public:
  explicit BenchCostModel(const Machine& machine) : CostModel(machine) {}
  double model_op_time_s(const Op& op, DeviceId device) const override {
    const Device& d = machine().devices[device];
    return d.launch_overhead_s + op.flops / d.peak_flops_per_s;
  }
  std::string describe() const override { return "bench: flops / peak"; }
};

// cpu:0 and gpu:0..3; the GPUs sit behind one PCIe switch that joins the host over one link,
// so GPU↔GPU copies take two hops and host↔GPU copies share the host link.
Machine bench_machine() {
  Machine m;
  m.name = "bench-1cpu-4gpu";
  Device cpu;
  cpu.name = "cpu:0";
  cpu.kind = DeviceKind::kCpu;
  cpu.peak_flops_per_s = 1e12;
  cpu.memory_bandwidth_Bps = 60e9;
  cpu.memory_bytes = int64_t{256} << 30;
  cpu.streams = 4;
  cpu.launch_overhead_s = 2e-6;
  m.devices.push_back(cpu);
  for (int i = 0; i < 4; ++i) {
    Device gpu;
    gpu.name = "gpu:" + std::to_string(i);
    gpu.kind = DeviceKind::kGpu;
    gpu.peak_flops_per_s = 8e12;
    gpu.memory_bandwidth_Bps = 480e9;
    gpu.memory_bytes = int64_t{12} << 30;
    gpu.launch_overhead_s = 5e-6;
    m.devices.push_back(gpu);
  }
  m.switches = {"pcie_switch"};
  auto link = [&](std::string a, double bw) {
    Link l;
    l.a = std::move(a);
    l.b = "pcie_switch";
    l.kind = LinkKind::kPcie;
    l.bandwidth_Bps = bw;
    l.latency_s = 5e-6;
    m.links.push_back(l);
  };
  link("cpu:0", 12e9);
  for (int i = 0; i < 4; ++i) link("gpu:" + std::to_string(i), 12e9);
  m.finalize();
  return m;
}

// Layered DAG of `ops` ops, 64 per layer; every op after the first layer reads 2 distinct ops of
// the previous two layers.
OpGraph layered_dag(int ops, uint32_t seed) {
  constexpr int kWidth = 64;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> flops(1e6, 1e9);
  std::uniform_int_distribution<int64_t> bytes(1 << 10, 4 << 20);
  OpGraph g;
  for (int i = 0; i < ops; ++i) {
    Op op;
    op.name = "op" + std::to_string(i);
    op.type = "Bench";
    op.flops = flops(rng);
    op.output_bytes = bytes(rng);
    op.persistent_bytes = i % 4 == 0 ? bytes(rng) : 0;
    g.add_op(std::move(op));
  }
  for (int i = kWidth; i < ops; ++i) {
    const int layer = i / kWidth;
    const int lo = std::max(0, layer - 2) * kWidth, hi = layer * kWidth - 1;
    std::uniform_int_distribution<int> pick(lo, hi);
    const int a = pick(rng);
    int b = pick(rng);
    while (b == a) b = pick(rng);
    g.add_edge(static_cast<OpId>(a), static_cast<OpId>(i), {.bytes = g.op(static_cast<OpId>(a)).output_bytes});
    g.add_edge(static_cast<OpId>(b), static_cast<OpId>(i), {.bytes = g.op(static_cast<OpId>(b)).output_bytes});
  }
  return g;
}

std::vector<Placement> random_placements(std::size_t count, std::size_t ops, std::size_t devices, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(devices) - 1);
  std::vector<Placement> out(count, Placement(ops));
  for (Placement& p : out)
    for (DeviceId& d : p) d = static_cast<DeviceId>(pick(rng));
  return out;
}

// Shared inputs per graph size, built once outside the timed loops.
struct Setup {
  Machine machine = bench_machine();
  BenchCostModel cost{machine};
  OpGraph graph;
  Simulator sim;
  std::vector<Placement> placements;
  explicit Setup(int ops)
      : graph(layered_dag(ops, 1)), sim(graph, cost), placements(random_placements(16, graph.num_ops(), 5, 2)) {}
};

Setup& setup(int ops) {
  static std::vector<std::unique_ptr<Setup>> cache;
  for (auto& s : cache)
    if (static_cast<int>(s->graph.num_ops()) == ops) return *s;
  cache.push_back(std::make_unique<Setup>(ops));
  return *cache.back();
}

void BM_Simulate(benchmark::State& state) {
  Setup& s = setup(static_cast<int>(smoke_size(state.range(0), 1000)));
  SimWorkspace ws;
  SimResult result;
  s.sim.simulate(s.placements[0], ws, result);  // the first call sizes the workspace and result
  std::size_t i = 0;
  const long before = g_allocations.load();
  for (auto _ : state) {
    s.sim.simulate(s.placements[i++ % s.placements.size()], ws, result);
    // The whole struct: benchmark 1.7.1's DoNotOptimize on a lone double under gcc may pick a
    // general-purpose register and clobber the value.
    benchmark::DoNotOptimize(result);
  }
  const long allocations = g_allocations.load() - before;
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.graph.num_ops()));
  state.counters["allocs_per_eval"] = static_cast<double>(allocations) / static_cast<double>(state.iterations());
  state.counters["transfers"] = static_cast<double>(result.transfers);
  state.counters["step_ms"] = result.step_time_s * 1e3;
}
BENCHMARK(BM_Simulate)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// A learner-sized batch of 32 placements through simulate_batch, threads = range(1).
void BM_SimulateBatch(benchmark::State& state) {
  Setup& s = setup(static_cast<int>(smoke_size(state.range(0), 1000)));
  const int threads = static_cast<int>(state.range(1));
  std::vector<Placement> batch;
  for (int k = 0; k < 32; ++k) batch.push_back(s.placements[static_cast<std::size_t>(k) % s.placements.size()]);
  std::vector<SimResult> results(batch.size());
  for (auto _ : state) {
    s.sim.simulate_batch(batch, results, threads);
    benchmark::DoNotOptimize(results.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch.size() * s.graph.num_ops()));
}
BENCHMARK(BM_SimulateBatch)->Args({10000, 1})->Args({10000, 2})->Unit(benchmark::kMillisecond)->UseRealTime();

// Machine::finalize on a hostile machine: N GPUs under N/25 switches (a random tree of switches,
// 30 % of the GPUs on a second switch, N/16 extra links), every link direction of its own
// bandwidth and latency. Routing tried every distinct bandwidth as a threshold before: minutes at
// N = 1,000.
Machine random_machine(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> bw(1e9, 5e10), lat(0, 1e-5), coin(0, 1);
  Machine m;
  m.name = "bench";
  const int switches = std::max(1, n / 25);
  for (int i = 0; i < n; ++i)
    m.devices.push_back({.name = "gpu:" + std::to_string(i), .kind = DeviceKind::kGpu, .peak_flops_per_s = 1e13,
                         .memory_bandwidth_Bps = 1e11, .memory_bytes = int64_t{1} << 34});
  for (int i = 0; i < switches; ++i) m.switches.push_back("sw:" + std::to_string(i));
  auto link = [&](const std::string& a, const std::string& b) {
    m.links.push_back({.a = a, .b = b, .kind = LinkKind::kPcie, .bandwidth_Bps = bw(rng), .latency_s = lat(rng),
                       .reverse_bandwidth_Bps = bw(rng), .reverse_latency_s = lat(rng)});
  };
  auto any_switch = [&] { return m.switches[std::uniform_int_distribution<int>(0, switches - 1)(rng)]; };
  for (int i = 1; i < switches; ++i) link(m.switches[i], m.switches[std::uniform_int_distribution<int>(0, i - 1)(rng)]);
  for (const Device& d : m.devices) {
    link(d.name, any_switch());
    if (coin(rng) < 0.3) link(d.name, any_switch());
  }
  for (int i = 0; i < n / 16; ++i) {
    const std::string a = any_switch(), b = any_switch();
    if (a != b) link(a, b);
  }
  return m;
}

void BM_RouteMachine(benchmark::State& state) {
  const int devices = static_cast<int>(smoke_size(state.range(0), 100));
  const Machine base = random_machine(devices, 99);
  for (auto _ : state) {
    Machine m = base;
    m.finalize();
    benchmark::DoNotOptimize(m.route(0, 1).latency_s);
  }
  state.counters["devices"] = static_cast<double>(devices);
}
BENCHMARK(BM_RouteMachine)->Arg(100)->Arg(1000)->Arg(2000)->Arg(4096)->Unit(benchmark::kMillisecond)->Iterations(1);

// Reading a graph JSON of N ops (a chain with a side edge every 16 ops, as placelab export writes
// it): the loader's growth with size (issue "Hostile input, third round": every pass near-linear).
//   build/bench/sim_bench --benchmark_filter=BM_ParseGraphJson
void BM_ParseGraphJson(benchmark::State& state) {
  const int64_t n = smoke_size(state.range(0), 1000);
  std::string text = R"({"format": "placelab-graph", "version": 1, "ops": [)";
  for (int64_t i = 0; i < n; ++i)
    text += fmt::format(R"({}{{"name": "s{}/op{}", "type": "MatMul", "flops": 1000, "output_bytes": 64}})", i ? "," : "",
                        i / 100, i);
  text += R"(], "edges": [)";
  for (int64_t i = 0; i + 1 < n; ++i) {
    text += fmt::format(R"({}{{"src": "s{}/op{}", "dst": "s{}/op{}", "bytes": 64}})", i ? "," : "", i / 100, i,
                        (i + 1) / 100, i + 1);
    if (i % 16 == 0 && i + 3 < n)
      text += fmt::format(R"(,{{"src": "s{}/op{}", "dst": "s{}/op{}", "bytes": 64}})", i / 100, i, (i + 3) / 100, i + 3);
  }
  text += "]}";
  for (auto _ : state) benchmark::DoNotOptimize(parse_graph_json(text, "bench.json").num_ops());
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
}
BENCHMARK(BM_ParseGraphJson)->Arg(10'000)->Arg(100'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond)->Iterations(1);

// The Python module's reference (python/bench/simulate_batch_bench.py runs the same batch through
// placelab.Simulator.simulate_batch): 1,000 placements of op-level inception_v3:batch=32 on the
// k80x4 preset with the analytic cost model, op i of placement k on device
// splitmix64(k · ops + i) mod 5. The label is the sum of the step times in placement order, 17
// digits, which the Python script prints too: equal labels mean bit-identical results.
uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void BM_SimulateBatch_Inception(benchmark::State& state) {
  static const models::Model model = models::make_model(models::ModelSpec::parse("inception_v3:batch=32"));
  static const Machine machine = load_machine("k80x4");
  static const AnalyticCostModel cost(machine);
  static const Simulator sim(model.graph, cost);
  const int threads = static_cast<int>(state.range(0));
  const std::size_t ops = model.graph.num_ops(), devices = machine.num_devices();
  std::vector<Placement> batch(1000, Placement(ops));
  for (std::size_t k = 0; k < batch.size(); ++k)
    for (std::size_t i = 0; i < ops; ++i) batch[k][i] = static_cast<DeviceId>(splitmix64(k * ops + i) % devices);
  std::vector<SimResult> results(batch.size());
  for (auto _ : state) {
    sim.simulate_batch(batch, results, threads);
    benchmark::DoNotOptimize(results.data());
  }
  double sum = 0;
  for (const SimResult& r : results) sum += r.step_time_s;
  state.SetLabel(fmt::format("sum {:.17g}", sum));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch.size()));
}
BENCHMARK(BM_SimulateBatch_Inception)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// The eager model's cost against the dataflow model's on one graph (issue: within 1.5× per op):
// op-level Inception-V3 at batch 32 on k80x4, in TensorFlow form (17,203 ops; state.range(1) = 0)
// and PyTorch form (1,789 ops; 1), simulated as PyTorch runs it (state.range(0) = 1,
// Execution::kEager) and as TF's executor would (0), for 64 pseudo-random placements in turn on
// one thread. Items are simulated ops, so items/s is the per-op rate.
void BM_SimulateExecution_Inception(benchmark::State& state) {
  static const models::Model tf = models::make_model(models::ModelSpec::parse("inception_v3:batch=32"));
  static const models::Model torch =
      models::make_model(models::ModelSpec::parse("inception_v3:batch=32,framework=pytorch"));
  static const Machine machine = load_machine("k80x4");
  static const AnalyticCostModel cost(machine);
  OpGraph graph = state.range(1) ? torch.graph : tf.graph;
  graph.set_execution(state.range(0) ? Execution::kEager : Execution::kDataflow);
  const Simulator sim(graph, cost);
  const std::size_t ops = graph.num_ops(), devices = machine.num_devices();
  std::vector<Placement> batch(64, Placement(ops));
  for (std::size_t k = 0; k < batch.size(); ++k)
    for (std::size_t i = 0; i < ops; ++i) batch[k][i] = static_cast<DeviceId>(splitmix64(k * ops + i) % devices);
  SimWorkspace workspace;
  SimResult result;
  double sum = 0;
  for (auto _ : state) {
    sum = 0;
    for (const Placement& p : batch) {
      sim.simulate(p, workspace, result);
      sum += result.step_time_s;
    }
  }
  state.SetLabel(fmt::format("{} ops, {}, sum {:.6g} s", ops, state.range(0) ? "eager" : "dataflow", sum));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch.size() * ops));
}
BENCHMARK(BM_SimulateExecution_Inception)
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond);

// What critpath pays once per pass: one step of op-level inception_v3:batch=32 on k80x4 simulated
// with its timeline (state.range(0) = 1) and its critical path read back (2), for a placement of
// blocks of 200 ops on pseudo-random GPUs. The label: the path's events.
void BM_CriticalPath_Inception(benchmark::State& state) {
  static const models::Model model = models::make_model(models::ModelSpec::parse("inception_v3:batch=32"));
  static const Machine machine = load_machine("k80x4");
  static const AnalyticCostModel cost(machine);
  static const Simulator sim(model.graph, cost);
  Placement p(model.graph.num_ops());
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<DeviceId>(1 + splitmix64(i / 200) % 4);
  std::size_t events = 0;
  for (auto _ : state) {
    const SimResult r = sim.simulate(p, SimOptions{.record_timeline = true});
    if (state.range(0) == 2) events = critical_path(model.graph, sim, r).size();
    benchmark::DoNotOptimize(r.step_time_s);
  }
  if (state.range(0) == 2) state.SetLabel(fmt::format("{} events", events));
}
BENCHMARK(BM_CriticalPath_Inception)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// ---- Clusters: N × dgx1 on EDR InfiniBand, op-level GNMT ---------------------------------------

// N DGX-1 nodes, four NICs each on the PCIe switches, as the dgx1x*-ib100 presets compose them.
Machine dgx1_cluster(int nodes) {
  static const Machine node = load_machine("dgx1");
  std::vector<ClusterNode> list;
  for (int i = 0; i < nodes; ++i) list.push_back({"node" + std::to_string(i), node});
  const NetworkSpec net{.bandwidth_Bps = 10.2e9, .latency_s = 1.29e-6, .nics = {{"plx:0"}, {"plx:1"}, {"plx:2"}, {"plx:3"}}};
  return compose_cluster("dgx1x" + std::to_string(nodes), list, net);
}

// Op-level GNMT (the zoo's defaults: 4 layers, batch 256) with `seq` steps: 10,682 ops at 12,
// 22,057 at 25, 43,932 at 50.
const OpGraph& gnmt(int seq) {
  static std::vector<std::pair<int, std::unique_ptr<models::Model>>> cache;
  for (auto& [s, m] : cache)
    if (s == seq) return m->graph;
  cache.emplace_back(seq, std::make_unique<models::Model>(
                              models::make_model(models::ModelSpec::parse("gnmt:seq=" + std::to_string(seq)))));
  return cache.back().second->graph;
}

// Op i on the (i mod G)-th GPU: every GPU of the cluster busy, most tensors crossing nodes.
Placement spread_over_gpus(const OpGraph& graph, const Machine& m) {
  std::vector<DeviceId> gpus;
  for (std::size_t d = 0; d < m.num_devices(); ++d)
    if (m.devices[d].kind == DeviceKind::kGpu) gpus.push_back(static_cast<DeviceId>(d));
  Placement p(graph.num_ops());
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = gpus[i % gpus.size()];
  return p;
}

// Composing and routing the machine (Machine::finalize: one route per ordered device pair).
void BM_ClusterLoad(benchmark::State& state) {
  const int nodes = static_cast<int>(smoke_size(state.range(0), 1));
  std::size_t devices = 0;
  for (auto _ : state) {
    Machine m = dgx1_cluster(nodes);
    devices = m.num_devices();
    benchmark::DoNotOptimize(m.route(0, 1).latency_s);
  }
  state.counters["devices"] = static_cast<double>(devices);
}
BENCHMARK(BM_ClusterLoad)->Arg(1)->Arg(8)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);

// The 64-node preset as the CLI loads it: YAML, the dgx1 node, composition, routes.
void BM_ClusterLoadPreset(benchmark::State& state) {
  for (auto _ : state) {
    Machine m = load_machine("dgx1x64-ib100");
    benchmark::DoNotOptimize(m.route(0, 1).latency_s);
  }
}
BENCHMARK(BM_ClusterLoadPreset)->Unit(benchmark::kMillisecond);

// Preparing the simulator (op-time tables per cost class, the per-pair route table) for
// range(0) nodes and GNMT of range(1) steps.
void BM_ClusterPrepare(benchmark::State& state) {
  const Machine m = dgx1_cluster(static_cast<int>(smoke_size(state.range(0), 1)));
  const AnalyticCostModel cost(m);
  const OpGraph& g = gnmt(static_cast<int>(smoke_size(state.range(1), 12)));
  for (auto _ : state) {
    Simulator sim(g, cost);
    benchmark::DoNotOptimize(sim.num_ops());
  }
  state.counters["devices"] = static_cast<double>(m.num_devices());
  state.counters["ops"] = static_cast<double>(g.num_ops());
}
BENCHMARK(BM_ClusterPrepare)
    ->ArgsProduct({{1, 8, 64}, {12, 25, 50}})
    ->Unit(benchmark::kMillisecond);

// One simulated step with every GPU of the cluster in use, prepared simulator and warm workspace.
void BM_SimulateCluster(benchmark::State& state) {
  const Machine m = dgx1_cluster(static_cast<int>(smoke_size(state.range(0), 1)));
  const AnalyticCostModel cost(m);
  const OpGraph& g = gnmt(static_cast<int>(smoke_size(state.range(1), 12)));
  const Simulator sim(g, cost);
  const Placement p = spread_over_gpus(g, m);
  SimWorkspace ws;
  SimResult result;
  sim.simulate(p, ws, result);
  const long before = g_allocations.load();
  for (auto _ : state) {
    sim.simulate(p, ws, result);
    benchmark::DoNotOptimize(result);
  }
  const long allocations = g_allocations.load() - before;  // before the counters below allocate
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(g.num_ops()));
  state.counters["allocs_per_eval"] = static_cast<double>(allocations) / static_cast<double>(state.iterations());
  state.counters["devices"] = static_cast<double>(m.num_devices());
  state.counters["transfers"] = static_cast<double>(result.transfers);
  state.counters["step_ms"] = result.step_time_s * 1e3;
}
BENCHMARK(BM_SimulateCluster)
    ->ArgsProduct({{1, 8, 64}, {12, 25, 50}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace placelab

BENCHMARK_MAIN();
