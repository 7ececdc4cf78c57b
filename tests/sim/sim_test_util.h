// Helpers for the simulator tests: machines built in code and a cost model whose op times are
// read from the op itself, so every expected number can be computed by hand; and the exact
// comparison of two results.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/hwmodels/cost_model.h"
#include "placelab/hwmodels/machine.h"
#include "placelab/sim/simulator.h"

namespace placelab::testing {

// op_time_s(op, d) = op.flops / speed[d]: a test states an op's duration in seconds as its flops.
class FixedCostModel : public CostModel {
 public:
  explicit FixedCostModel(const Machine& machine, std::vector<double> speed = {})
      : CostModel(machine), speed_(std::move(speed)) {
    speed_.resize(machine.num_devices(), 1.0);
  }
  double model_op_time_s(const Op& op, DeviceId device) const override { return op.flops / speed_[device]; }
  std::string describe() const override { return "fixed test times"; }

 private:
  std::vector<double> speed_;
};

// The analytic model's op times with none of its promises: no device shares another's costs
// (op_time_representative) and no copy is promised affine, so the simulator prices every device
// and probes every pair, as it does for a model it knows nothing of.
class UnpromisingCost : public CostModel {
 public:
  explicit UnpromisingCost(const AnalyticCostModel& inner) : CostModel(inner.machine()), inner_(inner) {}
  double model_op_time_s(const Op& op, DeviceId device) const override { return inner_.op_time_s(op, device); }
  std::string describe() const override { return "the analytic model, unpromising"; }

 private:
  const AnalyticCostModel& inner_;
};

inline Device device(std::string name, DeviceKind kind, int64_t memory_bytes = int64_t{1} << 40, int streams = 1) {
  Device d;
  d.name = std::move(name);
  d.kind = kind;
  d.peak_flops_per_s = 1e12;
  d.memory_bandwidth_Bps = 1e11;
  d.memory_bytes = memory_bytes;
  d.streams = streams;
  return d;
}

inline Link link(std::string a, std::string b, double bandwidth_Bps, double latency_s) {
  Link l;
  l.a = std::move(a);
  l.b = std::move(b);
  l.bandwidth_Bps = bandwidth_Bps;
  l.latency_s = latency_s;
  return l;
}

// `gpus` GPUs "gpu:i", each joined directly to every other by its own link (1000 B/s, 1 s latency),
// so routes are single hops and times are round numbers.
inline Machine mesh_machine(int gpus, int streams = 1, int64_t memory_bytes = int64_t{1} << 40) {
  Machine m;
  m.name = "mesh";
  for (int i = 0; i < gpus; ++i) m.devices.push_back(device("gpu:" + std::to_string(i), DeviceKind::kGpu, memory_bytes, streams));
  for (int i = 0; i < gpus; ++i)
    for (int j = i + 1; j < gpus; ++j) m.links.push_back(link("gpu:" + std::to_string(i), "gpu:" + std::to_string(j), 1000, 1));
  m.finalize();
  return m;
}

// `m` with every device running `full_speed` ops at full speed at once (Device::full_speed_ops):
// its streams are independent slots when full_speed equals them, shared otherwise.
inline Machine with_full_speed(Machine m, int full_speed) {
  for (Device& d : m.devices) d.full_speed_ops = full_speed;
  m.finalize();
  return m;
}

// cpu:0 + gpu:0..3 where every device hangs off one switch (sw) with its own 1000 B/s, 1 s link:
// a transfer takes two hops (device→sw, sw→device), latency 2 s.
inline Machine switch_machine() {
  Machine m;
  m.name = "switch";
  m.devices.push_back(device("cpu:0", DeviceKind::kCpu));
  for (int i = 0; i < 4; ++i) m.devices.push_back(device("gpu:" + std::to_string(i), DeviceKind::kGpu));
  m.switches = {"sw"};
  for (const Device& d : m.devices) m.links.push_back(link(d.name, "sw", 1000, 1));
  m.finalize();
  return m;
}

inline OpId add(OpGraph& g, const std::string& name, double seconds, int64_t output_bytes = 0,
                int64_t persistent_bytes = 0, bool cpu_only = false) {
  Op op;
  op.name = name;
  op.type = "Test";
  op.flops = seconds;
  op.output_bytes = output_bytes;
  op.persistent_bytes = persistent_bytes;
  op.cpu_only = cpu_only;
  return g.add_op(std::move(op));
}

// A seeded random layered DAG: `layers` × `width` ops, each op after the first layer reading 1–3
// ops of the previous two layers; times 0.5–2 s, sizes 1–1000 bytes, some control edges.
inline OpGraph random_dag(uint32_t seed, int layers, int width) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> time(0.5, 2.0);
  std::uniform_int_distribution<int64_t> bytes(1, 1000);
  OpGraph g;
  for (int l = 0; l < layers; ++l)
    for (int i = 0; i < width; ++i)
      add(g, "op" + std::to_string(l) + "_" + std::to_string(i), time(rng), bytes(rng), bytes(rng));
  for (int l = 1; l < layers; ++l) {
    for (int i = 0; i < width; ++i) {
      const auto dst = static_cast<OpId>(l * width + i);
      const int fan_in = std::uniform_int_distribution<int>(1, 3)(rng);
      for (int k = 0; k < fan_in; ++k) {
        const int src_layer = std::max(0, l - std::uniform_int_distribution<int>(1, 2)(rng));
        const auto src = static_cast<OpId>(src_layer * width + std::uniform_int_distribution<int>(0, width - 1)(rng));
        Tensor t;
        t.bytes = bytes(rng);
        t.control = std::uniform_int_distribution<int>(0, 9)(rng) == 0;
        g.add_edge(src, dst, t);
      }
    }
  }
  return g;
}

inline Placement random_placement(uint32_t seed, std::size_t ops, std::size_t devices) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(devices) - 1);
  Placement p(ops);
  for (auto& d : p) d = static_cast<DeviceId>(pick(rng));
  return p;
}

// Exact equality of every field, doubles compared bit for bit (==).
inline void expect_identical(const SimResult& a, const SimResult& b) {
  EXPECT_EQ(a.step_time_s, b.step_time_s);
  EXPECT_EQ(a.transfers, b.transfers);
  EXPECT_EQ(a.oom, b.oom);
  EXPECT_EQ(a.oom_device, b.oom_device);
  EXPECT_EQ(a.oom_excess_bytes, b.oom_excess_bytes);
  ASSERT_EQ(a.devices.size(), b.devices.size());
  for (std::size_t d = 0; d < a.devices.size(); ++d) {
    EXPECT_EQ(a.devices[d].busy_s, b.devices[d].busy_s);
    EXPECT_EQ(a.devices[d].peak_memory_bytes, b.devices[d].peak_memory_bytes);
    EXPECT_EQ(a.devices[d].persistent_bytes, b.devices[d].persistent_bytes);
    EXPECT_EQ(a.devices[d].num_ops, b.devices[d].num_ops);
  }
  ASSERT_EQ(a.links.size(), b.links.size());
  for (std::size_t l = 0; l < a.links.size(); ++l) {
    EXPECT_EQ(a.links[l].bytes, b.links[l].bytes);
    EXPECT_EQ(a.links[l].busy_s, b.links[l].busy_s);
  }
  ASSERT_EQ(a.timeline.size(), b.timeline.size());
  for (std::size_t i = 0; i < a.timeline.size(); ++i) {
    const TimelineEvent &x = a.timeline[i], &y = b.timeline[i];
    EXPECT_TRUE(x.kind == y.kind && x.op == y.op && x.device == y.device && x.src_device == y.src_device &&
                x.stream == y.stream && x.start_s == y.start_s && x.end_s == y.end_s && x.bytes == y.bytes)
        << "timeline event " << i;
  }
  ASSERT_EQ(a.memory_timeline.size(), b.memory_timeline.size());
  for (std::size_t i = 0; i < a.memory_timeline.size(); ++i) {
    EXPECT_EQ(a.memory_timeline[i].time_s, b.memory_timeline[i].time_s);
    EXPECT_EQ(a.memory_timeline[i].device, b.memory_timeline[i].device);
    EXPECT_EQ(a.memory_timeline[i].bytes, b.memory_timeline[i].bytes);
  }
}

}  // namespace placelab::testing
