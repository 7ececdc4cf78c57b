// Model zoo generation time: BM_Generate/<model> builds the default training graph at op
// granularity (forward description, gradient synthesis, updates, OpGraph). The largest zoo graph
// (GNMT, ~44k ops) must build in under one second.
#include <benchmark/benchmark.h>
#include <onnx/onnx_pb.h>

#include <string>

#include "bench_util.h"
#include "placelab/models/onnx_import.h"
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

// An ONNX MLP of `nodes` nodes (MatMul, Add, Relu per layer, 8 × 8 weights), serialized.
std::string mlp_onnx(int64_t nodes) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("mlp");
  auto value = [](onnx::ValueInfoProto* v, const std::string& name) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(32);
    t->mutable_shape()->add_dim()->set_dim_value(8);
  };
  value(g.add_input(), "x");
  std::string prev = "x";
  for (int64_t i = 0; i < nodes; ++i) {
    const std::string id = std::to_string(i / 3);
    onnx::NodeProto& n = *g.add_node();
    std::string out = "t";  // appended: GCC 12 warns falsely (-Wrestrict) on "t" + string
    out += std::to_string(i);
    if (i % 3 == 2) {
      n.set_op_type("Relu");
      n.add_input(prev);
    } else {
      const bool matmul = i % 3 == 0;
      n.set_op_type(matmul ? "MatMul" : "Add");
      const std::string w = (matmul ? "w" : "b") + id;
      onnx::TensorProto& init = *g.add_initializer();
      init.set_name(w);
      init.set_data_type(onnx::TensorProto::FLOAT);
      if (matmul) init.add_dims(8);
      init.add_dims(8);
      init.mutable_float_data()->Resize(matmul ? 64 : 8, 0.f);
      n.add_input(prev);
      n.add_input(w);
    }
    n.set_name("layer" + id + "/" + n.op_type());
    n.add_output(out);
    prev = out;
  }
  value(g.add_output(), prev);
  return m.SerializeAsString();
}

// Importing an ONNX MLP of N nodes (issue "Hostile input, third round": every pass near-linear):
// 1,580, 15,800 and 150,000 nodes become about 10k, 100k and 950k training ops (a MatMul and its
// weight: the forward op, two gradient products and the update), the most a graph holds.
//   build/bench/models_bench --benchmark_filter=BM_ImportOnnx
void BM_ImportOnnx(benchmark::State& state) {
  const int64_t nodes = placelab::bench::smoke_size(state.range(0), 300);
  const std::string bytes = mlp_onnx(nodes);
  std::size_t ops = 0;
  for (auto _ : state) {
    ops = placelab::models::import_onnx_bytes(bytes, "bench.onnx").num_ops();
    benchmark::DoNotOptimize(ops);
  }
  state.SetItemsProcessed(state.iterations() * nodes);
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["MB"] = static_cast<double>(bytes.size()) / 1e6;
}
BENCHMARK(BM_ImportOnnx)->Arg(1'580)->Arg(15'800)->Arg(150'000)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
