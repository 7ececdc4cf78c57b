// The op graph of one training step: ops (vertices) and tensors (edges) on Boost.Graph, with
// dense uint32_t ids. Models, importers and the JSON loader build it; the simulator flattens it.
//
//   OpGraph g;
//   OpId a = g.add_op({.name = "x", .type = "MatMul", .kernel = KernelSignature::gemm(64, 64, 64)});
//   OpId b = g.add_op({.name = "y", .type = "Relu"});
//   g.add_edge(a, b, {.bytes = 64 * 64 * 4});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "placelab/graph/kernel.h"

namespace placelab {

using OpId = uint32_t;

// Which part of a training step an op belongs to.
enum class Phase : uint8_t { kForward, kBackward, kUpdate, kOther };
std::string_view phase_name(Phase phase);                       // "forward", …
std::optional<Phase> phase_from_name(std::string_view name);    // inverse; nullopt if unknown

// A time the user measured for an op (a profile of their own model): `device` is a device name
// of the machine ("gpu:1") or a device kind ("cpu", "gpu"); a name wins over its kind. Cost
// models answer it before anything else (CostModel::op_time_s).
struct MeasuredTime {
  std::string device;
  double time_s = 0;  // one execution, launch overhead included; finite, >= 0
  friend bool operator==(const MeasuredTime&, const MeasuredTime&) = default;
};

// One operation. Sizes are bytes, work is FP32 floating-point operations.
struct Op {
  std::string name;                 // unique within the graph
  std::string type;                 // TF-style op type: Conv2D, MatMul, ApplyAdam, …
  Phase phase = Phase::kForward;
  KernelSignature kernel;           // what runs; the cost model and executors key on it
  double flops = 0;                 // floating-point operations of one execution
  double bytes_accessed = 0;        // bytes read + written by one execution
  int64_t output_bytes = 0;         // size of the op's output buffer (allocated while it runs)
  int64_t persistent_bytes = 0;     // variables / optimizer slots living on the op's device
  bool cpu_only = false;            // no GPU kernel: TF soft placement keeps it on a CPU
  int32_t layer = -1;               // model layer, for expert placements and layer grouping; -1 none
  std::string colocation;           // TF colocation key; ops sharing a key must share a device
  std::vector<MeasuredTime> measured_s;  // by device key, sorted, keys unique; usually empty
  // PyTorch graphs (captured or imported): the module whose forward ran the op, as
  // `named_modules()` spells its path ("" = the root module), and which call of that module it
  // belongs to (0-based: a module called twice in one step has calls 0 and 1). A backward op
  // belongs to the call its forward op came from; an update op to its parameter's owner. They let
  // a placement move whole modules, as PyTorch can; empty/0 for TF graphs.
  std::string module;
  int32_t call = 0;
};

// How a framework runs the graph, which decides the simulator's rules (docs/simulator.md).
// kDataflow: TensorFlow 1.x's executor — every device launches its own ready ops, across streams.
// kEager: PyTorch eager — one host thread issues the ops in program order (op id order), each
// with a host cost; backward ops on a GPU are issued by autograd's thread for that GPU.
enum class Execution : uint8_t { kDataflow, kEager };
std::string_view execution_name(Execution execution);                     // "dataflow", "eager"
std::optional<Execution> execution_from_name(std::string_view name);      // inverse; nullopt if unknown

// One edge: a tensor from producer to consumer, or a control dependency (no data).
struct Tensor {
  int64_t bytes = 0;
  bool control = false;
};

class OpGraph {
 public:
  using Adjacency = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Op, Tensor>;

  // Adds an op and returns its id (ids are dense, in insertion order). Throws Error when the name
  // is empty or already used.
  OpId add_op(Op op);
  // Adds an edge src → dst. Throws Error for an unknown id or a self loop. Parallel edges are
  // allowed (one per consumed tensor).
  void add_edge(OpId src, OpId dst, Tensor tensor = {});

  std::size_t num_ops() const { return boost::num_vertices(g_); }
  std::size_t num_edges() const { return boost::num_edges(g_); }
  const Op& op(OpId id) const { return g_[id]; }
  Op& op(OpId id) { return g_[id]; }
  // The op with this name, if any.
  std::optional<OpId> find(std::string_view name) const;

  // Calls f(dst, const Tensor&) for each out edge of `id`, in insertion order.
  template <typename F>
  void for_each_out_edge(OpId id, F&& f) const {
    for (auto [it, end] = boost::out_edges(id, g_); it != end; ++it)
      f(static_cast<OpId>(boost::target(*it, g_)), g_[*it]);
  }
  // Calls f(src, const Tensor&) for each in edge of `id`, in insertion order.
  template <typename F>
  void for_each_in_edge(OpId id, F&& f) const {
    for (auto [it, end] = boost::in_edges(id, g_); it != end; ++it)
      f(static_cast<OpId>(boost::source(*it, g_)), g_[*it]);
  }
  std::size_t out_degree(OpId id) const { return boost::out_degree(id, g_); }
  std::size_t in_degree(OpId id) const { return boost::in_degree(id, g_); }

  // A topological order of all ops (Kahn's algorithm, smallest id first among ready ops, so the
  // order is deterministic). Throws InputError naming the ops of a cycle when there is one.
  std::vector<OpId> topological_order() const;
  // The ops of one cycle in edge order, or empty when the graph is acyclic.
  std::vector<OpId> find_cycle() const;

  // Totals over all ops.
  double total_flops() const;
  int64_t total_persistent_bytes() const;

  const Adjacency& adjacency() const { return g_; }

  // How the graph is executed (Execution). Eager graphs list their ops in program order, so an
  // eager graph's every edge must go from a smaller id to a larger one (io checks files).
  Execution execution() const { return execution_; }
  void set_execution(Execution execution) { execution_ = execution; }

 private:
  Adjacency g_;
  Execution execution_ = Execution::kDataflow;
  std::unordered_map<std::string, OpId> by_name_;
};

}  // namespace placelab
