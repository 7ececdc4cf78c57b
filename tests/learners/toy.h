// Test fixtures for the learner tests: a synthetic environment with a known optimum, a toy
// machine, and a cost model whose numbers are easy to compute by hand.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine.h"
#include "placelab/learners/grouping.h"
#include "placelab/learners/trainer.h"
#include "placelab/sim/environment.h"

namespace placelab::testing {

// Step time = Σ_op cost[op][device]; optionally OOM when more than `capacity` ops share a device.
// Its optimum is known: every op on its cheapest device (when that respects the capacity).
class AdditiveEnv : public Environment {
 public:
  AdditiveEnv(std::vector<std::vector<double>> cost, int capacity = 0) : cost_(std::move(cost)), capacity_(capacity) {}
  std::vector<Measurement> evaluate(std::span<const Placement> placements) override {
    std::vector<Measurement> out;
    for (const Placement& p : placements) {
      Measurement m;
      m.source = "toy";
      std::vector<int> load(cost_.front().size(), 0);
      for (std::size_t op = 0; op < p.size(); ++op) {
        m.step_time_s += cost_[op][p[op]];
        ++load[p[op]];
      }
      if (capacity_ > 0 && *std::max_element(load.begin(), load.end()) > capacity_) m.oom = true;
      if (predicted_scale > 0) m.predicted_s = predicted_scale * m.step_time_s;  // an environment's own prediction, if any
      out.push_back(m);
      ++evaluated;
    }
    return out;
  }
  std::string name() const override { return "additive"; }
  double predicted_scale = 0;  // > 0: also "predict" each placement as this multiple of its time
  double optimum() const {
    double t = 0;
    for (const auto& row : cost_) t += *std::min_element(row.begin(), row.end());
    return t;
  }
  Placement argmin() const {
    Placement p;
    for (const auto& row : cost_) p.push_back(static_cast<DeviceId>(std::min_element(row.begin(), row.end()) - row.begin()));
    return p;
  }
  int64_t evaluated = 0;

 private:
  std::vector<std::vector<double>> cost_;
  int capacity_;
};

// Seeded costs in [0.1, 1.0) s, G rows × D devices.
inline std::vector<std::vector<double>> random_costs(std::size_t groups, std::size_t devices, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<double>> c(groups, std::vector<double>(devices));
  for (auto& row : c)
    for (double& x : row) x = 0.1 + 0.9 * static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return c;
}

inline Grouping identity_grouping(std::size_t n) { return Grouping::identity(n); }

// A training run of `learner` on an additive environment, one group per op: the learners'
// convergence tests all start here.
inline TrainSummary train_on(Learner& learner, AdditiveEnv& env, int64_t budget, int64_t batch = 12) {
  TrainerOptions o;
  o.sample_budget = budget;
  o.batch_size = batch;
  return train(learner, identity_grouping(learner.space().num_groups), env, o);
}

inline std::vector<DeviceId> device_range(std::size_t n) {
  std::vector<DeviceId> d(n);
  std::iota(d.begin(), d.end(), DeviceId{0});
  return d;
}

// cpu:0 (1 TFLOP/s, 4 streams) and `gpus` GPUs (10 TFLOP/s, 1 stream, 8 GB) behind one PCIe switch
// (10 GB/s, 10 µs per hop).
inline Machine toy_machine(int gpus) {
  Machine m;
  m.name = "toy";
  m.devices.push_back({.name = "cpu:0", .kind = DeviceKind::kCpu, .model = "toy cpu", .peak_flops_per_s = 1e12,
                       .memory_bandwidth_Bps = 50e9, .memory_bytes = int64_t{64} << 30, .streams = 4,
                       .launch_overhead_s = 0});
  for (int i = 0; i < gpus; ++i)
    m.devices.push_back({.name = "gpu:" + std::to_string(i), .kind = DeviceKind::kGpu, .model = "toy gpu",
                         .peak_flops_per_s = 10e12, .memory_bandwidth_Bps = 500e9, .memory_bytes = int64_t{8} << 30,
                         .streams = 1, .launch_overhead_s = 0});
  m.switches = {"pcie:0"};
  for (const auto& d : m.devices)
    m.links.push_back({.a = d.name, .b = "pcie:0", .kind = LinkKind::kPcie, .bandwidth_Bps = 10e9, .latency_s = 10e-6});
  m.finalize();
  return m;
}

// op time = flops / peak; transfers use the machine's routes (the CostModel default).
class FlopsCostModel : public CostModel {
 public:
  explicit FlopsCostModel(const Machine& machine) : CostModel(machine) {}
  double model_op_time_s(const Op& op, DeviceId device) const override { return op.flops / machine().devices[device].peak_flops_per_s; }
  std::string describe() const override { return "flops / peak (test)"; }
};

// A fork-join graph: src → `branches` chains of `length` ops of `flops` each → sink, tensors of
// `bytes`. Every chain's first op is colocated with a variable op that feeds it. One cpu_only op
// hangs off the sink.
inline OpGraph fork_join(int branches, int length, double flops, int64_t bytes) {
  OpGraph g;
  const OpId src = g.add_op({.name = "src", .type = "Input", .flops = 1e6, .output_bytes = bytes});
  const OpId sink = g.add_op({.name = "sink", .type = "AddN", .flops = 1e6, .output_bytes = bytes});
  for (int b = 0; b < branches; ++b) {
    const std::string key = "branch" + std::to_string(b);
    const OpId var = g.add_op({.name = key + "/w", .type = "VariableV2", .persistent_bytes = 1 << 20, .colocation = key});
    OpId prev = src;
    for (int i = 0; i < length; ++i) {
      const OpId op = g.add_op({.name = key + "/op" + std::to_string(i), .type = "MatMul", .flops = flops,
                                .output_bytes = bytes, .colocation = i == 0 ? key : ""});
      g.add_edge(prev, op, {.bytes = bytes});
      if (i == 0) g.add_edge(var, op, {.bytes = 1 << 20});
      prev = op;
    }
    g.add_edge(prev, sink, {.bytes = bytes});
  }
  const OpId save = g.add_op({.name = "save", .type = "SaveV2", .flops = 1e3, .cpu_only = true});
  g.add_edge(sink, save, {.bytes = 64});
  return g;
}

}  // namespace placelab::testing
