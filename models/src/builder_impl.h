// TrainingGraphBuilder::Impl, the builder's state and its op-emission core (emit, gradient helpers,
// variables), shared by builder.cpp (backward pass, optimizer, graph out) and builder_layers.cpp
// (the forward op API). Private to models/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "generators.h"
#include "placelab/core/error.h"
#include "placelab/models/builder.h"

namespace placelab::models {
namespace builder_detail {

// The builder's tensors are float32: bytes per element.
inline constexpr int64_t kFloatBytes = 4;

// numpy broadcasting of two shapes; empty optional when they are incompatible (builder.cpp).
std::optional<Shape> broadcast(const Shape& a, const Shape& b);

}  // namespace builder_detail

// The state of one TrainingGraphBuilder: nodes, values and variables, the emission context, and
// the gradient function of every differentiable forward node.
struct TrainingGraphBuilder::Impl {
  struct ValueRec {
    uint32_t node;
    Shape shape;
    int64_t bytes;
    bool requires_grad;
    int32_t var = -1;  // the variable this value is the read of, or -1
  };
  struct GradCtx;
  using GradFn = std::function<void(Impl&, GradCtx&)>;
  struct NodeRec {
    Op op;
    std::string block;
    std::vector<uint32_t> inputs;    // values consumed (one edge each)
    std::vector<uint32_t> controls;  // nodes that must finish first (control edges)
    std::vector<uint32_t> outputs;   // values produced
    GradFn grad;
  };
  struct VarRec {
    uint32_t node;
    uint32_t read;
    bool trainable;
    bool sparse = false;  // gradient arrives as IndexedSlices (an embedding table)
    bool moving_statistic = false;  // a batch-norm moving mean or variance
  };
  struct Frame {
    std::string prefix;  // full name prefix after this frame
    bool is_layer;
    int32_t layer;       // effective layer id inside this frame
  };
  // Context of the gradient function of one forward node.
  struct GradCtx {
    uint32_t node;
    std::vector<uint32_t> dy;  // aggregated output gradients (UINT32_MAX when none)
    std::vector<std::pair<std::size_t, uint32_t>> given;  // (input index, gradient value)
  };

  BuilderOptions options;
  std::vector<NodeRec> nodes;
  std::vector<ValueRec> values;
  std::vector<VarRec> vars;
  std::vector<Frame> frames;
  std::unordered_map<std::string, int> name_count;
  std::vector<uint32_t> regularized;  // variable reads under weight decay
  std::vector<uint32_t> loss_terms;   // the terms minimize() summed and the total (loss averages)
  uint32_t loss = UINT32_MAX;
  // options.global_step: the global_step variable's node and read; the learning rate and the
  // moving averages' decay computed from it (values), when those options are on.
  uint32_t global_step_node = UINT32_MAX;
  Value global_step_read, learning_rate, average_decay;
  std::vector<uint32_t> update_nodes;   // the optimizer's update ops (grouped with global_step)
  std::vector<uint32_t> average_nodes;  // the AssignSubs of the variables' moving averages
  BuildStats build_stats;
  bool finished = false;

  // Emission context: forward by default; backward/update emission overrides it.
  Phase phase = Phase::kForward;
  const NodeRec* grad_of = nullptr;  // forward node whose gradient is being emitted
  std::string override_prefix;
  std::string override_block;
  int32_t override_layer = -1;
  std::string override_colocation;
  bool overriding = false;

  std::string prefix() const {
    if (overriding) return override_prefix;
    return frames.empty() ? std::string() : frames.back().prefix;
  }
  std::string block() const {
    if (overriding) return override_block;
    for (auto it = frames.rbegin(); it != frames.rend(); ++it)
      if (it->is_layer) return it->prefix;
    return {};
  }
  int32_t layer() const {
    if (overriding) return override_layer;
    return frames.empty() ? -1 : frames.back().layer;
  }

  std::string unique_name(const std::string& base) {
    auto [it, inserted] = name_count.emplace(base, 0);
    if (inserted) return base;
    // TF's uniquifier: name_1, name_2, … skipping names already taken.
    for (;;) {
      std::string candidate = base + "_" + std::to_string(++it->second);
      if (name_count.emplace(candidate, 0).second) return candidate;
    }
  }

  const ValueRec& val(Value v) const {
    PLACELAB_CHECK(v.id < values.size()) << "invalid Value " << v.id;
    return values[v.id];
  }
  const Shape& shp(Value v) const { return val(v).shape; }
  int64_t elems(Value v) const { return num_elements(val(v).shape); }

  // Adds one node; returns its output values; output_bytes is the sum of the outputs.
  std::vector<Value> emit(std::string_view type, std::string_view base, KernelSignature kernel,
                          const std::vector<Value>& inputs, const std::vector<Shape>& outputs,
                          GradFn grad = {}, bool differentiable = true) {
    PLACELAB_CHECK(!finished) << "builder used after finish()";
    check_size();
    NodeRec n;
    std::string p = prefix();
    n.op.name = unique_name(p.empty() ? std::string(base) : p + "/" + std::string(base));
    n.op.type = std::string(type);
    n.op.phase = phase;
    n.op.kernel = kernel;
    n.op.flops = kernel_flops(kernel);
    n.op.bytes_accessed = kernel_bytes(kernel);
    n.op.layer = layer();
    n.block = block();
    if (overriding) n.op.colocation = override_colocation;
    bool any_grad = false;
    for (Value v : inputs) {
      n.inputs.push_back(v.id);
      any_grad = any_grad || val(v).requires_grad;
    }
    uint32_t id = static_cast<uint32_t>(nodes.size());
    std::vector<Value> outs;
    int64_t out_bytes = 0;
    for (const Shape& s : outputs) {
      int64_t bytes = num_elements(s) * builder_detail::kFloatBytes;
      values.push_back({id, s, bytes, phase == Phase::kForward && differentiable && any_grad, -1});
      n.outputs.push_back(static_cast<uint32_t>(values.size() - 1));
      outs.push_back({static_cast<uint32_t>(values.size() - 1)});
      out_bytes += bytes;
    }
    // Views (Reshape, Squeeze, Identity of a transient) carry their output's bytes too: the
    // simulator frees a buffer after its producer's last consumer and knows nothing of aliasing,
    // so a zero here would free the data while the view's consumers still read it.
    n.op.output_bytes = out_bytes;
    if (phase == Phase::kForward && differentiable && any_grad) n.grad = std::move(grad);
    if (phase == Phase::kForward) build_stats.forward_flops += n.op.flops;
    nodes.push_back(std::move(n));
    return outs;
  }
  Value emit1(std::string_view type, KernelSignature kernel, const std::vector<Value>& inputs, const Shape& out,
              GradFn grad = {}) {
    return emit(type, type, kernel, inputs, {out}, std::move(grad))[0];
  }

  static KernelSignature ew(int64_t elements, int64_t inputs) { return KernelSignature::elementwise(elements, inputs); }

  // --- gradient helpers (called inside gradient functions) ---
  static Value dy(const GradCtx& g, std::size_t i = 0) { return {g.dy[i]}; }
  bool needs(const GradCtx& g, std::size_t input) const {
    return values[nodes[g.node].inputs[input]].requires_grad;
  }
  Value in(const GradCtx& g, std::size_t i) const { return {nodes[g.node].inputs[i]}; }
  Value out(const GradCtx& g, std::size_t i = 0) const { return {nodes[g.node].outputs[i]}; }
  static void give(GradCtx& g, std::size_t input, Value grad) { g.given.emplace_back(input, grad.id); }

  // Sums a gradient down to `target` (the shape of a broadcast input), as TF's
  // reduce_sum + reshape after BroadcastGradientArgs.
  Value reduce_to(Value grad, Shape target) {
    if (shp(grad) == target) return grad;
    Value s = emit1("Sum", KernelSignature::reduction(elems(grad), num_elements(target)), {grad}, target);
    return emit1("Reshape", KernelSignature::noop(), {s}, target);
  }
  // --- TF 1.0 shape bookkeeping (options.shape_ops) ---
  // A shape-arithmetic op: noop kernel, a small int32 vector out.
  Value shape_op(std::string_view type, const std::vector<Value>& inputs, int64_t n = 1) {
    return emit1(type, KernelSignature::noop(), inputs, Shape{n});
  }
  Value shape_of(Value v) { return shape_op("Shape", {v}, static_cast<int64_t>(shp(v).size())); }
  // The gradient of a binary op's side: Sum over the broadcast axes and Reshape to the input's
  // shape. With shape_ops they run even when nothing broadcasts (a Sum over no axes copies).
  struct Broadcast {
    Value sx, sy, rx, ry;
  };
  Broadcast broadcast_args(const GradCtx& g) {
    if (!options.shape_ops) return {};
    Value sx = shape_of(in(g, 0)), sy = shape_of(in(g, 1));
    auto r = emit("BroadcastGradientArgs", "BroadcastGradientArgs", KernelSignature::noop(), {sx, sy},
                  {Shape{static_cast<int64_t>(shp(out(g)).size())}, Shape{static_cast<int64_t>(shp(out(g)).size())}});
    return {sx, sy, r[0], r[1]};
  }
  Value sum_to(Value grad, Shape target, Value axes, Value target_shape) {
    if (!options.shape_ops) return reduce_to(grad, std::move(target));
    Value s = emit1("Sum", KernelSignature::reduction(elems(grad), num_elements(target)), {grad, axes}, target);
    return emit1("Reshape", KernelSignature::noop(), {s, target_shape}, target);
  }
  // TF's reshape gradient: Reshape(dy, Shape(x)).
  Value reshape_back(Value dy_value, Value x) {
    std::vector<Value> in{dy_value};
    if (options.shape_ops) in.push_back(shape_of(x));
    return emit1("Reshape", KernelSignature::noop(), in, shp(x));
  }

  Value unary(std::string_view type, Value x, std::string_view grad_type, bool grad_reads_output) {
    const Shape s = shp(x);
    int64_t e = elems(x);
    std::string gt(grad_type);
    return emit1(type, ew(e, 1), {x}, s, [gt, e, grad_reads_output](Impl& b, GradCtx& g) {
      Value saved = grad_reads_output ? b.out(g) : b.in(g, 0);
      b.give(g, 0, b.emit1(gt, ew(e, 2), {b.dy(g), saved}, b.shp(saved)));
    });
  }

  enum class Bin { kAdd, kSub, kMul, kSqDiff };
  Value binary(Bin kind, Value a, Value c) {
    auto s = builder_detail::broadcast(shp(a), shp(c));
    PLACELAB_CHECK(s) << "shapes " << shape_text(shp(a)) << " and " << shape_text(shp(c)) << " do not broadcast";
    const Shape out = *s;
    int64_t e = num_elements(out);
    std::string_view type = kind == Bin::kAdd ? "Add" : kind == Bin::kSub ? "Sub" : kind == Bin::kMul ? "Mul" : "SquaredDifference";
    return emit1(type, ew(e, 2), {a, c}, out, [kind, e](Impl& b, GradCtx& g) {
      Broadcast bc = b.broadcast_args(g);
      Value d = b.dy(g);
      // Copies: emitting grows the value table.
      const Shape sa = b.shp(b.in(g, 0));
      const Shape sc = b.shp(b.in(g, 1));
      const Shape so = b.shp(d);
      switch (kind) {
        case Bin::kAdd:
          if (b.needs(g, 0)) b.give(g, 0, b.sum_to(d, sa, bc.rx, bc.sx));
          if (b.needs(g, 1)) b.give(g, 1, b.sum_to(d, sc, bc.ry, bc.sy));
          break;
        case Bin::kSub:
          if (b.needs(g, 0)) b.give(g, 0, b.sum_to(d, sa, bc.rx, bc.sx));
          if (b.needs(g, 1)) b.give(g, 1, b.sum_to(b.emit1("Neg", ew(e, 1), {d}, so), sc, bc.ry, bc.sy));
          break;
        case Bin::kMul:
          if (b.needs(g, 0)) b.give(g, 0, b.sum_to(b.emit1("Mul", ew(e, 2), {d, b.in(g, 1)}, so), sa, bc.rx, bc.sx));
          if (b.needs(g, 1)) b.give(g, 1, b.sum_to(b.emit1("Mul", ew(e, 2), {d, b.in(g, 0)}, so), sc, bc.ry, bc.sy));
          break;
        case Bin::kSqDiff: {
          // TF: scalar_mul(2, grad) * (x - y), then Neg for y.
          Value two = b.emit1("Mul", ew(e, 1), {d}, so);
          Value diff = b.emit1("sub", ew(e, 2), {b.in(g, 0), b.in(g, 1)}, so);
          Value gx = b.emit1("mul", ew(e, 2), {two, diff}, so);
          if (b.needs(g, 0)) b.give(g, 0, b.sum_to(gx, sa, bc.rx, bc.sx));
          if (b.needs(g, 1)) b.give(g, 1, b.sum_to(b.emit1("Neg", ew(e, 1), {gx}, so), sc, bc.ry, bc.sy));
          break;
        }
      }
    });
  }

  Value reduce(bool mean, Value x, const std::vector<int>& axes, bool keep_dims) {
    const Shape in_shape = shp(x);
    Shape kept = in_shape, out;
    for (int a : axes) {
      int r = a < 0 ? a + static_cast<int>(in_shape.size()) : a;
      PLACELAB_CHECK(r >= 0 && r < static_cast<int>(in_shape.size())) << "axis " << a;
      kept[static_cast<std::size_t>(r)] = 1;
    }
    for (std::size_t i = 0; i < in_shape.size(); ++i) {
      bool reduced = std::find_if(axes.begin(), axes.end(), [&](int a) {
                       return (a < 0 ? a + static_cast<int>(in_shape.size()) : a) == static_cast<int>(i);
                     }) != axes.end();
      if (!reduced || keep_dims) out.push_back(reduced ? 1 : in_shape[i]);
    }
    int64_t ein = num_elements(in_shape);
    return emit1(mean ? "Mean" : "Sum", KernelSignature::reduction(ein, num_elements(out)), {x}, out,
                 [mean, kept, in_shape, ein](Impl& b, GradCtx& g) {
                   // TF's _SumGrad/_MeanGrad: reshape to the kept shape, tile, (divide).
                   if (!b.options.shape_ops) {
                     Value r = b.emit1("Reshape", KernelSignature::noop(), {b.dy(g)}, kept);
                     Value t = b.emit1("Tile", ew(ein, 1), {r}, in_shape);
                     if (mean) t = b.emit1("truediv", ew(ein, 1), {t}, in_shape);
                     b.give(g, 0, t);
                     return;
                   }
                   // reduced_shape(Shape(x), axes) and the tile multiples, as TF 1.0 computed them.
                   const auto rank = static_cast<int64_t>(in_shape.size());
                   Value sx = b.shape_of(b.in(g, 0));
                   Value size = b.shape_op("Size", {sx});
                   Value axis_ids = b.shape_op("mod", {b.shape_op("add", {size})});
                   Value range = b.shape_op("range", {size}, rank);
                   Value ones = b.shape_op("Fill", {b.shape_op("Shape", {axis_ids})});
                   Value kept_shape = b.shape_op("DynamicStitch", {range, axis_ids, sx, ones}, rank);
                   Value multiples = b.shape_op("floordiv", {sx, b.shape_op("Maximum", {kept_shape}, rank)}, rank);
                   Value r = b.emit1("Reshape", KernelSignature::noop(), {b.dy(g), kept_shape}, kept);
                   Value t = b.emit1("Tile", ew(ein, 1), {r, multiples}, in_shape);
                   if (mean) {
                     Value in_size = b.shape_op("Prod", {b.shape_of(b.in(g, 0))});
                     Value out_size = b.shape_op("Prod", {b.shape_of(b.out(g))});
                     Value factor = b.shape_op("Cast", {b.shape_op("floordiv", {in_size, b.shape_op("Maximum", {out_size})})});
                     t = b.emit1("truediv", ew(ein, 1), {t, factor}, in_shape);
                   }
                   b.give(g, 0, t);
                 });
  }

  // A spec can ask for any number of layers or steps: the build stops at kMaxModelOps nodes
  // (with the bound in the message) instead of running until memory is gone.
  void check_size() const {
    if (nodes.size() >= detail::kMaxModelOps)
      throw InputError("more than " + std::to_string(detail::kMaxModelOps) +
                       " ops, the most a training graph is built with (fewer layers, a shorter sequence or a "
                       "smaller vocabulary)");
  }

  Value variable(std::string_view name, Shape shape, bool trainable) {
    PLACELAB_CHECK(phase != Phase::kBackward) << "variables are created in the forward description or by updates";
    check_size();
    int64_t bytes = num_elements(shape) * builder_detail::kFloatBytes;
    std::string p = prefix();
    std::string var_name = unique_name(p.empty() ? std::string(name) : p + "/" + std::string(name));
    NodeRec var;
    var.op = {.name = var_name, .type = "VariableV2", .phase = phase, .persistent_bytes = bytes,
              .layer = layer(), .colocation = var_name};
    var.block = block();
    uint32_t var_node = static_cast<uint32_t>(nodes.size());
    nodes.push_back(std::move(var));
    if (options.framework == Framework::kPyTorch) {
      // A PyTorch parameter is read in place: no Identity op between it and its consumers.
      values.push_back({var_node, shape, bytes, trainable, static_cast<int32_t>(vars.size())});
      const auto value = static_cast<uint32_t>(values.size() - 1);
      nodes[var_node].outputs.push_back(value);
      vars.push_back({var_node, value, trainable});
      if (trainable) build_stats.parameters += num_elements(shape);
      return {value};
    }
    name_count.emplace(var_name + "/read", 0);
    NodeRec read;
    read.op = {.name = var_name + "/read", .type = "Identity", .phase = phase, .layer = layer(),
               .colocation = var_name};
    read.block = block();
    read.controls.push_back(var_node);  // the read aliases the variable's buffer on its device
    uint32_t read_node = static_cast<uint32_t>(nodes.size());
    nodes.push_back(std::move(read));
    values.push_back({read_node, shape, bytes, trainable, static_cast<int32_t>(vars.size())});
    uint32_t read_value = static_cast<uint32_t>(values.size() - 1);
    nodes[read_node].outputs.push_back(read_value);
    vars.push_back({var_node, read_value, trainable});
    if (trainable) {
      build_stats.parameters += num_elements(shape);
    }
    return {read_value};
  }

  // x + constant (the constant is folded into the kernel; its gradient passes through).
  Value add_const(Value x) {
    return emit1("add", ew(elems(x), 1), {x}, shp(x), [](Impl& b, GradCtx& g) {
      // A binary op with a scalar constant: with shape_ops its x side is Sum + Reshape.
      Value d = b.dy(g);
      if (b.options.shape_ops) {
        Value sx = b.shape_of(b.in(g, 0));
        Value bga = b.shape_op("BroadcastGradientArgs", {sx, b.shape_op("Shape", {})});
        d = b.sum_to(d, b.shp(b.in(g, 0)), bga, sx);
      }
      b.give(g, 0, d);
    });
  }
  // The normalisation layers (builder_layers.cpp).
  Value batch_norm(Value x, bool with_scale);
  Value layer_norm(Value x);
  Value norm_decomposed(Value x, const std::vector<int>& axes, Value gamma, Value beta, bool keep_moving,
                        Value moving_mean, Value moving_var);

  // The backward pass in its steps (builder.cpp).
  // Per forward value: the gradient values that flow into it, which aggregate() sums.
  using Contributions = std::vector<std::vector<uint32_t>>;
  void backward();
  void set_gradient_context(uint32_t node, std::string p);
  uint32_t aggregate(Contributions& contrib, uint32_t value);
  void backpropagate(Contributions& contrib, std::size_t num_forward_nodes);
  void wait_for_loss_averages(uint32_t loss_averages_group, std::size_t first_gradient_node);
  std::vector<uint32_t> variable_gradients(Contributions& contrib);
  void apply_gradients(const std::vector<uint32_t>& var_grad);
  void increment_global_step();
  // The optimizer's updates, the step's bookkeeping ops and the graph out of the nodes (builder.cpp).
  uint32_t moving_average(uint32_t shadow_var, Value value, Value decay = {});
  uint32_t group(std::string_view name, const std::vector<uint32_t>& after);
  void bookkeeping(std::string_view block, std::string_view prefix);
  void create_global_step();
  void create_learning_rate();
  void create_average_decay();
  uint32_t loss_averages();
  void clip_by_global_norm(std::vector<uint32_t>& var_grad);
  void apply_update(uint32_t vi, uint32_t grad);
  uint32_t adam_weight_decay(uint32_t vi, uint32_t grad);
  void shadow_average(uint32_t vi, uint32_t after);
  OpGraph to_graph();  // moves the ops out
  OpGraph to_layer_graph() const;
};

}  // namespace placelab::models
