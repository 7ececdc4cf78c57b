// Model zoo generation time: BM_Generate/<model> builds the default training graph at op
// granularity (forward description, gradient synthesis, updates, OpGraph). The largest zoo graph
// (GNMT, ~44k ops) must build in under one second.
#include <benchmark/benchmark.h>

#include <string>

#include "placelab/models/zoo.h"

namespace {

void BM_Generate(benchmark::State& state, const std::string& spec) {
  const placelab::models::ModelSpec parsed = placelab::models::ModelSpec::parse(spec);
  std::size_t ops = 0;
  for (auto _ : state) {
    placelab::models::Model m = placelab::models::make_model(parsed);
    ops = m.graph.num_ops();
    benchmark::DoNotOptimize(ops);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate);
}

const int kRegistered = [] {
  for (const auto& info : placelab::models::model_zoo()) {
    benchmark::RegisterBenchmark(("BM_Generate/" + info.name).c_str(), BM_Generate, info.name)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_Generate/" + info.name + "_layer").c_str(), BM_Generate,
                                 info.name + ":granularity=layer")
        ->Unit(benchmark::kMillisecond);
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
