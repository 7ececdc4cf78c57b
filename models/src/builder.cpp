#include "placelab/models/builder.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>

#include "generators.h"
#include "placelab/graph/error.h"

namespace placelab::models {
namespace {

constexpr int64_t kFloatBytes = 4;

std::string_view kGranularityNames[] = {"op", "layer"};
std::string_view kOptimizerNames[] = {"sgd", "momentum", "rmsprop", "adam", "adamw"};
std::string_view kFrameworkNames[] = {"tensorflow", "pytorch"};

// numpy broadcasting of two shapes; empty optional when they are incompatible.
std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  std::size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (std::size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = std::max(da, db);
  }
  return out;
}

}  // namespace

std::string_view granularity_name(Granularity g) { return kGranularityNames[static_cast<int>(g)]; }
std::optional<Granularity> granularity_from_name(std::string_view name) {
  for (int i = 0; i < 2; ++i)
    if (kGranularityNames[i] == name) return static_cast<Granularity>(i);
  return std::nullopt;
}
std::string_view optimizer_name(Optimizer o) { return kOptimizerNames[static_cast<int>(o)]; }
std::optional<Optimizer> optimizer_from_name(std::string_view name) {
  for (int i = 0; i < 5; ++i)
    if (kOptimizerNames[i] == name) return static_cast<Optimizer>(i);
  return std::nullopt;
}
std::string_view framework_name(Framework f) { return kFrameworkNames[static_cast<int>(f)]; }
std::optional<Framework> framework_from_name(std::string_view name) {
  for (int i = 0; i < 2; ++i)
    if (kFrameworkNames[i] == name) return static_cast<Framework>(i);
  return std::nullopt;
}
int optimizer_slots(Optimizer o) {
  switch (o) {
    case Optimizer::kSgd: return 0;
    case Optimizer::kMomentum: return 1;
    case Optimizer::kRmsProp: return 2;
    case Optimizer::kAdam: return 2;
    case Optimizer::kAdamWeightDecay: return 2;
  }
  return 0;
}

std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) t += ',';
    t += std::to_string(s[i]);
  }
  t += ']';
  return t;
}

int64_t num_elements(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// ---------------------------------------------------------------------------------------------
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
      int64_t bytes = num_elements(s) * kFloatBytes;
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
    auto s = broadcast(shp(a), shp(c));
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
    int64_t bytes = num_elements(shape) * kFloatBytes;
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

  // tf.train.assign_moving_average(shadow, value, decay): sub, mul, AssignSub, colocated with
  // `shadow`. A constant decay is folded into the mul; a decay tensor (`decay` valid) adds the
  // 1 - decay Sub. Returns the AssignSub's node.
  uint32_t moving_average(uint32_t shadow_var, Value value, Value decay = {}) {
    const VarRec& v = vars[static_cast<std::size_t>(shadow_var)];
    const std::string colocation = nodes[v.node].op.colocation;  // a copy: emit() grows `nodes`
    const Shape shape = values[v.read].shape;
    const uint32_t shadow_node = v.node, shadow_read = v.read;
    int64_t e = num_elements(shape);
    Phase saved_phase = phase;
    phase = Phase::kUpdate;
    std::vector<Value> made;
    Value one_minus_decay;
    if (decay.valid()) made.push_back(one_minus_decay = emit("Sub", "sub", ew(1, 1), {decay}, {Shape{}})[0]);
    Value diff = emit1("Sub", ew(e, 2), {Value{shadow_read}, value}, shape);
    std::vector<Value> mul_in{diff};
    if (decay.valid()) mul_in.push_back(one_minus_decay);
    Value scaled = emit1("Mul", ew(e, 1), mul_in, shape);
    std::vector<Value> assign = emit("AssignSub", "AssignMovingAvg", ew(e, 2), {scaled}, {shape});
    const uint32_t assign_node = values[assign[0].id].node;
    nodes[assign_node].controls.push_back(shadow_node);
    nodes[assign_node].op.output_bytes = 0;  // updates the shadow in place
    made.insert(made.end(), {diff, scaled, assign[0]});
    for (Value x : made) nodes[values[x.id].node].op.colocation = colocation;
    phase = saved_phase;
    return assign_node;
  }

  // A NoOp that runs after `after` (tf.group, tf.no_op under control dependencies).
  uint32_t group(std::string_view name, const std::vector<uint32_t>& after) {
    emit("NoOp", name, KernelSignature::noop(), {}, {});
    nodes.back().controls = after;
    return static_cast<uint32_t>(nodes.size() - 1);
  }
  // Sets the emission context of the step's bookkeeping ops (update phase, no layer).
  void bookkeeping(std::string_view block, std::string_view prefix) {
    phase = Phase::kUpdate;
    overriding = true;
    override_block = std::string(block);
    override_prefix = std::string(prefix);
    override_layer = -1;
    override_colocation.clear();
  }

  // tf.train.get_or_create_global_step(): an int64 scalar variable.
  void create_global_step() {
    bookkeeping("global_step", "");
    global_step_read = variable("global_step", Shape{}, false);
    global_step_node = vars[static_cast<std::size_t>(values[global_step_read.id].var)].node;
    nodes[global_step_node].op.persistent_bytes = 8;
    values[global_step_read.id].bytes = 8;
  }
  // tf.train.exponential_decay(lr, global_step, decay_steps, rate, staircase=True):
  // lr · rate ^ floor(float(global_step) / decay_steps); the constants are folded.
  void create_learning_rate() {
    bookkeeping("ExponentialDecay", "ExponentialDecay");
    Value step = emit1("Cast", ew(1, 1), {global_step_read}, Shape{});
    Value p = emit1("Floor", ew(1, 1), {emit1("truediv", ew(1, 1), {step}, Shape{})}, Shape{});
    Value power = emit1("Pow", ew(1, 1), {p}, Shape{});
    override_prefix.clear();
    learning_rate = emit("Mul", "ExponentialDecay", ew(1, 1), {power}, {Shape{}})[0];
  }
  // ExponentialMovingAverage(decay, num_updates=global_step): min(decay, (1 + n) / (10 + n)).
  void create_average_decay() {
    bookkeeping("ExponentialMovingAverage", "ExponentialMovingAverage");
    Value n = emit("Cast", "num_updates", ew(1, 1), {global_step_read}, {Shape{}})[0];
    Value ratio = emit1("truediv", ew(1, 2), {emit1("add", ew(1, 1), {n}, Shape{}), emit1("add", ew(1, 1), {n}, Shape{})},
                        Shape{});
    average_decay = emit1("Minimum", ew(1, 1), {ratio}, Shape{});
  }
  // _add_loss_summaries: ExponentialMovingAverage(0.9, name='avg') of every loss term and the
  // total loss; returns the NoOp grouping the updates.
  uint32_t loss_averages() {
    std::vector<uint32_t> assigns;
    for (uint32_t term : loss_terms) {
      bookkeeping("avg", "");
      std::string name = nodes[values[term].node].op.name + "/avg";
      Value shadow = variable(name, values[term].shape, false);
      override_prefix = "avg";
      assigns.push_back(moving_average(static_cast<uint32_t>(values[shadow.id].var), Value{term}));
    }
    override_prefix.clear();
    return group("avg", assigns);
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
  Value batch_norm(Value x, bool with_scale);
  Value layer_norm(Value x);
  Value norm_decomposed(Value x, const std::vector<int>& axes, Value gamma, Value beta, bool keep_moving,
                        Value moving_mean, Value moving_var);
  void backward();

  // tf.clip_by_global_norm over every variable gradient: an L2Loss per gradient, the global norm,
  // the scale, then gradient · scale. Every update therefore waits for every gradient.
  void clip_by_global_norm(std::vector<uint32_t>& var_grad) {
    phase = Phase::kBackward;
    overriding = true;
    override_block = "clip_by_global_norm";
    override_layer = -1;
    override_colocation.clear();
    std::vector<Value> norms;
    for (uint32_t& g : var_grad) {
      if (g == UINT32_MAX) continue;
      override_prefix = "global_norm";
      norms.push_back(emit1("L2Loss", KernelSignature::reduction(num_elements(values[g].shape), 1), {Value{g}}, Shape{}));
    }
    if (norms.empty()) return;
    const auto k = static_cast<int64_t>(norms.size());
    override_prefix = "global_norm";
    Value stacked = emit1("stack", KernelSignature::copy(k * kFloatBytes), norms, Shape{k});
    Value total = emit1("Sum", KernelSignature::reduction(k, 1), {stacked}, Shape{});
    Value norm = emit1("global_norm", ew(1, 1), {emit1("mul", ew(1, 1), {total}, Shape{})}, Shape{});
    override_prefix = "clip_by_global_norm";
    Value scale = emit1("mul", ew(1, 2), {emit1("Minimum", ew(1, 2), {emit1("truediv", ew(1, 1), {norm}, Shape{})}, Shape{})},
                        Shape{});
    for (uint32_t& g : var_grad) {
      if (g == UINT32_MAX) continue;
      Shape gs = values[g].shape;
      Value clipped = emit1("mul", ew(num_elements(gs), 2), {Value{g}, scale}, gs);
      // TF names the clipped gradient with an Identity; PyTorch scales the gradient in place.
      g = options.framework == Framework::kPyTorch ? clipped.id : emit1("Identity", KernelSignature::noop(), {clipped}, gs).id;
    }
  }

  // The optimizer's update of variable `vi` with gradient `grad`, colocated with the variable.
  void apply_update(uint32_t vi, uint32_t grad) {
    static constexpr std::string_view kApply[] = {"ApplyGradientDescent", "ApplyMomentum", "ApplyRMSProp", "ApplyAdam"};
    static constexpr std::string_view kSparseApply[] = {"ScatterSub", "SparseApplyMomentum", "SparseApplyRMSProp",
                                                        "SparseApplyAdam"};
    static constexpr std::string_view kPrefix[] = {"GradientDescent", "Momentum", "RMSProp", "Adam", "AdamWeightDecay"};
    const VarRec v = vars[vi];
    const std::string var_name = nodes[v.node].op.name;
    const Shape shape = values[v.read].shape;
    const int64_t params = num_elements(shape);
    const int slots = optimizer_slots(options.optimizer);
    const auto opt = static_cast<std::size_t>(options.optimizer);
    phase = Phase::kUpdate;
    overriding = true;
    override_prefix = std::string(kPrefix[opt]) + "/update_" + var_name;
    override_block = nodes[v.node].block;
    override_layer = nodes[v.node].op.layer;
    override_colocation = var_name;
    uint32_t last = UINT32_MAX;
    if (options.optimizer == Optimizer::kAdamWeightDecay) {
      last = adam_weight_decay(vi, grad);
    } else {
      // Sparse updates touch the looked-up rows, except TF 1.x Adam, which decays all of m and v.
      int64_t e = v.sparse && options.optimizer != Optimizer::kAdam ? num_elements(values[grad].shape) : params;
      std::string_view type = v.sparse ? kSparseApply[opt] : kApply[opt];
      std::vector<Value> inputs{Value{grad}};
      if (learning_rate.valid()) inputs.push_back(learning_rate);
      Value applied = emit1(type, ew(e, 2 + slots), inputs, shape);
      NodeRec& apply = nodes[values[applied.id].node];
      apply.op.output_bytes = 0;  // updates the variable in place
      apply.op.persistent_bytes = static_cast<int64_t>(slots) * params * kFloatBytes;
      apply.controls.push_back(v.node);
      last = values[applied.id].node;
    }
    update_nodes.push_back(last);
    if (options.variable_moving_averages) shadow_average(vi, last);
  }

  // BERT's AdamWeightDecayOptimizer, which is written with TF ops per variable: m and v slot
  // variables, the moment updates, the decoupled weight decay (not for LayerNorm and biases, i.e.
  // rank-1 variables) and three Assigns. A sparse gradient is first densified
  // (UnsortedSegmentSum), as TF does when Python arithmetic meets IndexedSlices.
  uint32_t adam_weight_decay(uint32_t vi, uint32_t grad) {
    const VarRec v = vars[vi];
    const Shape shape = values[v.read].shape;
    const int64_t e = num_elements(shape);
    const std::string var_name = nodes[v.node].op.name;
    const std::string prefix = override_prefix;
    override_prefix.clear();
    Value m = variable(var_name + "/adam_m", shape, false);
    Value vv = variable(var_name + "/adam_v", shape, false);
    override_prefix = prefix;
    Value g{grad};
    if (v.sparse)
      g = emit1("UnsortedSegmentSum", KernelSignature::embedding(shape[0], shape[1], values[grad].shape[0]), {g}, shape);
    Value m_new = emit1("add", ew(e, 2), {emit1("mul", ew(e, 1), {m}, shape), emit1("mul", ew(e, 1), {g}, shape)}, shape);
    Value v_new = emit1("add", ew(e, 2),
                        {emit1("mul", ew(e, 1), {vv}, shape), emit1("mul", ew(e, 1), {emit1("Square", ew(e, 1), {g}, shape)}, shape)},
                        shape);
    Value update = emit1("truediv", ew(e, 2), {m_new, emit1("add", ew(e, 1), {emit1("Sqrt", ew(e, 1), {v_new}, shape)}, shape)}, shape);
    if (shape.size() >= 2) update = emit1("add", ew(e, 2), {update, emit1("mul", ew(e, 1), {Value{v.read}}, shape)}, shape);
    Value next = emit1("sub", ew(e, 2), {Value{v.read}, emit1("mul", ew(e, 1), {update}, shape)}, shape);
    uint32_t last = UINT32_MAX;
    for (auto [src, target] : {std::pair{next, v.node}, std::pair{m_new, values[m.id].node}, std::pair{v_new, values[vv.id].node}}) {
      Value assigned = emit1("Assign", ew(e, 1), {src}, shape);
      NodeRec& a = nodes[values[assigned.id].node];
      a.op.output_bytes = 0;
      a.controls.push_back(target);
      last = values[assigned.id].node;
    }
    return last;
  }

  // tf.train.ExponentialMovingAverage of variable `vi`: a shadow variable and sub, mul, AssignSub,
  // after `after` (the variable's update) when given.
  void shadow_average(uint32_t vi, uint32_t after) {
    const VarRec v = vars[vi];
    const std::string var_name = nodes[v.node].op.name;
    phase = Phase::kUpdate;
    overriding = true;
    override_prefix.clear();
    override_block = nodes[v.node].block;
    override_layer = nodes[v.node].op.layer;
    override_colocation = var_name;
    Value shadow = variable(var_name + "/ExponentialMovingAverage", values[v.read].shape, false);
    // The shadow is a slot colocated with its primary (moving_averages.py: create_slot(...,
    // colocate_with_primary=True)), so it and its update share the variable's device.
    const VarRec& sv = vars[static_cast<std::size_t>(values[shadow.id].var)];
    nodes[sv.node].op.colocation = var_name;
    nodes[values[sv.read].node].op.colocation = var_name;
    if (after != UINT32_MAX) nodes[values[shadow.id].node].controls.push_back(after);
    average_nodes.push_back(moving_average(static_cast<uint32_t>(values[shadow.id].var), Value{v.read}, average_decay));
    if (after != UINT32_MAX) nodes.back().controls.push_back(after);
  }
  OpGraph to_graph();  // moves the ops out
  OpGraph to_layer_graph() const;
};

// --- batch / layer norm -----------------------------------------------------------------------
Value TrainingGraphBuilder::Impl::norm_decomposed(Value x, const std::vector<int>& axes, Value gamma, Value beta,
                                                  bool keep_moving, Value moving_mean, Value moving_var) {
  // tf.nn.moments + tf.nn.batch_normalization as TF 1.x built them.
  Value mean = reduce(true, x, axes, true);
  Value sg = emit1("StopGradient", KernelSignature::noop(), {mean}, shp(mean));
  values[sg.id].requires_grad = false;
  nodes[values[sg.id].node].grad = {};
  Value sq = binary(Bin::kSqDiff, x, sg);
  Value var = reduce(true, sq, axes, true);
  Shape stat = shp(beta);
  bool squeeze = keep_moving;  // batch norm squeezes the statistics to [C]
  if (squeeze) {
    mean = emit1("Squeeze", KernelSignature::noop(), {mean}, stat,
                 [](Impl& b, GradCtx& g) { b.give(g, 0, b.reshape_back(b.dy(g), b.in(g, 0))); });
    var = emit1("Squeeze", KernelSignature::noop(), {var}, stat,
                [](Impl& b, GradCtx& g) { b.give(g, 0, b.reshape_back(b.dy(g), b.in(g, 0))); });
  }
  Value inv = unary("Rsqrt", add_const(var), "RsqrtGrad", true);
  if (gamma.valid()) inv = binary(Bin::kMul, inv, gamma);
  Value y = binary(Bin::kAdd, binary(Bin::kMul, x, inv), binary(Bin::kSub, beta, binary(Bin::kMul, mean, inv)));
  if (keep_moving) {
    moving_average(values[moving_mean.id].var, mean);
    moving_average(values[moving_var.id].var, var);
  }
  return y;
}

Value TrainingGraphBuilder::Impl::batch_norm(Value x, bool with_scale) {
  const Shape xs = shp(x);
  PLACELAB_CHECK(xs.size() >= 2) << "batch_norm of " << shape_text(xs);
  Shape c{xs.back()};
  Value gamma = with_scale ? variable("gamma", c, true) : Value{};
  Value beta = variable("beta", c, true);
  Value mm = variable("moving_mean", c, false);
  Value mv = variable("moving_variance", c, false);
  vars[static_cast<std::size_t>(values[mm.id].var)].moving_statistic = true;
  vars[static_cast<std::size_t>(values[mv.id].var)].moving_statistic = true;
  std::vector<int> axes;
  for (int i = 0; i + 1 < static_cast<int>(xs.size()); ++i) axes.push_back(i);
  if (options.batch_norm == BatchNormStyle::kDecomposed) return norm_decomposed(x, axes, gamma, beta, true, mm, mv);
  if (options.framework == Framework::kPyTorch) {
    // nn.BatchNorm2d in training: num_batches_tracked.add_(1), one tiny kernel before the norm.
    Value counter = variable("num_batches_tracked", Shape{}, false);
    Value counted = emit1("Add", ew(1, 1), {counter}, Shape{});
    nodes[values[counted.id].node].op.output_bytes = 0;  // in place
  }
  std::vector<Value> in{x, beta};
  if (gamma.valid()) in.push_back(gamma);
  int64_t e = elems(x);
  bool has_gamma = gamma.valid();
  // FusedBatchNorm: y, batch mean, batch variance (the saved statistics its gradient reads).
  std::vector<Value> outs = emit("FusedBatchNorm", "FusedBatchNorm", ew(e, 2), in, {xs, c, c},
                                 [e, has_gamma](Impl& b, GradCtx& g) {
                                   // The saved statistics (2 × C floats) come in by a control edge, not
                                   // a data edge: the simulator keeps an op's whole output alive for its
                                   // last data consumer, and a data edge here would hold y ([N,H,W,C],
                                   // freed by TF after the ReLU) until the backward pass — 3.8 GiB too
                                   // much at ResNet-200's peak. The few bytes a remote gradient would
                                   // receive are left out.
                                   std::vector<Value> reads{b.dy(g), b.in(g, 0)};
                                   if (has_gamma) reads.push_back(b.in(g, 2));
                                   Shape cs = b.shp(b.in(g, 1));
                                   std::vector<Shape> shapes{b.shp(b.in(g, 0)), cs, cs};
                                   const uint32_t forward = b.values[b.out(g, 1).id].node;
                                   auto gs = b.emit("FusedBatchNormGrad", "FusedBatchNormGrad", ew(e, 3), reads, shapes);
                                   b.nodes[b.values[gs[0].id].node].controls.push_back(forward);
                                   if (b.needs(g, 0)) b.give(g, 0, gs[0]);
                                   b.give(g, 1, gs[2]);
                                   if (has_gamma) b.give(g, 2, gs[1]);
                                 });
  // PyTorch's batch-norm kernel updates the running statistics itself; TF adds the ops.
  if (options.framework == Framework::kTensorFlow) {
    moving_average(values[mm.id].var, outs[1]);
    moving_average(values[mv.id].var, outs[2]);
  }
  return outs[0];
}

Value TrainingGraphBuilder::Impl::layer_norm(Value x) {
  Shape h{shp(x).back()};
  Value gamma = variable("gamma", h, true);
  Value beta = variable("beta", h, true);
  if (options.framework == Framework::kTensorFlow) return norm_decomposed(x, {-1}, gamma, beta, false, {}, {});
  // aten::native_layer_norm: one kernel computes the statistics and normalises (it reads x twice);
  // its backward one kernel for the input gradient and the parameters' sums.
  const int64_t e = elems(x);
  const Shape xs = shp(x);
  return emit1("LayerNorm", ew(e, 2), {x, gamma, beta}, xs, [e](Impl& b, GradCtx& g) {
    Shape hs = b.shp(b.in(g, 1));
    auto gs = b.emit("LayerNormGrad", "LayerNormGrad", ew(e, 3), {b.dy(g), b.in(g, 0), b.in(g, 1)},
                     {b.shp(b.in(g, 0)), hs, hs});
    b.give(g, 0, gs[0]);
    b.give(g, 1, gs[1]);
    b.give(g, 2, gs[2]);
  });
}

// --- backward ---------------------------------------------------------------------------------
void TrainingGraphBuilder::Impl::backward() {
  PLACELAB_CHECK(loss != UINT32_MAX) << "minimize() was not called";
  const std::size_t num_forward_values = values.size();
  const std::size_t num_forward_nodes = nodes.size();
  std::vector<std::vector<uint32_t>> contrib(num_forward_values);
  phase = Phase::kBackward;
  overriding = true;

  auto set_context = [&](uint32_t node, std::string p) {
    const NodeRec& n = nodes[node];
    override_prefix = std::move(p);
    override_block = n.block;
    override_layer = n.op.layer;
    override_colocation.clear();
    if (options.colocate_gradients_with_ops && n.grad) {
      // The forward op joins the group its gradient ops are in.
      if (n.op.colocation.empty()) nodes[node].op.colocation = n.op.name;
      override_colocation = nodes[node].op.colocation;
    }
  };
  // Sums the gradient contributions of a forward value (TF's AddN), or concatenates the
  // IndexedSlices of a sparse variable.
  auto aggregate = [&](uint32_t value) -> uint32_t {
    std::vector<uint32_t>& c = contrib[value];
    if (c.empty()) return UINT32_MAX;
    if (c.size() == 1) return c[0];
    std::vector<Value> parts;
    for (uint32_t v : c) parts.push_back({v});
    int32_t var = values[value].var;
    if (var >= 0 && vars[static_cast<std::size_t>(var)].sparse) {
      Shape s = values[c[0]].shape;
      int64_t bytes = 0;
      s[0] = 0;
      for (uint32_t v : c) {
        s[0] += values[v].shape[0];
        bytes += values[v].bytes;
      }
      return emit1("ConcatV2", KernelSignature::copy(bytes), parts, s).id;
    }
    int64_t e = num_elements(values[value].shape);
    return emit1("AddN", ew(e, static_cast<int64_t>(parts.size())), parts, values[value].shape).id;
  };

  // The gradients are built under control_dependencies([loss averages]): each gradient op none
  // of whose inputs is another gradient op waits for the averages' NoOp.
  const uint32_t loss_averages_group = options.loss_moving_averages ? loss_averages() : UINT32_MAX;
  phase = Phase::kBackward;
  const std::size_t first_gradient_node = nodes.size();
  set_context(values[loss].node, "gradients");
  Value seed = emit1("Fill", ew(1, 1), {}, values[loss].shape);
  contrib[loss].push_back(seed.id);

  for (std::size_t i = num_forward_nodes; i-- > 0;) {
    uint32_t node = static_cast<uint32_t>(i);
    if (!nodes[node].grad) continue;
    GradCtx g{node, {}, {}};
    set_context(node, "gradients");
    bool any = false;
    std::vector<uint32_t> outs = nodes[node].outputs;
    for (uint32_t o : outs) {
      g.dy.push_back(aggregate(o));
      any = any || g.dy.back() != UINT32_MAX;
    }
    if (!any) continue;
    set_context(node, "gradients/" + nodes[node].op.name + "_grad");
    GradFn fn = nodes[node].grad;  // a copy: emitting may reallocate `nodes`
    fn(*this, g);
    for (auto [input, grad] : g.given) {
      uint32_t target = nodes[node].inputs[input];
      if (values[target].requires_grad) contrib[target].push_back(grad);
    }
  }

  if (loss_averages_group != UINT32_MAX) {
    for (std::size_t n = first_gradient_node; n < nodes.size(); ++n) {
      bool dominated = false;
      for (uint32_t in : nodes[n].inputs) dominated = dominated || values[in].node >= first_gradient_node;
      if (!dominated) nodes[n].controls.push_back(loss_averages_group);
    }
  }

  // Variable gradients: aggregated per variable, optionally clipped by their global norm.
  const std::size_t num_vars = vars.size();
  std::vector<uint32_t> var_grad(num_vars, UINT32_MAX);
  for (std::size_t vi = 0; vi < num_vars; ++vi) {
    if (!vars[vi].trainable) continue;
    set_context(vars[vi].node, "gradients");
    override_colocation.clear();
    var_grad[vi] = aggregate(vars[vi].read);  // UINT32_MAX: not on the loss's path, TF applies nothing
  }
  if (options.clip_gradients) clip_by_global_norm(var_grad);
  if (options.global_step) {
    create_global_step();
    if (options.exponential_decay_learning_rate) create_learning_rate();
    if (options.variable_moving_averages) create_average_decay();
  }
  for (std::size_t vi = 0; vi < num_vars; ++vi)
    if (var_grad[vi] != UINT32_MAX) apply_update(static_cast<uint32_t>(vi), var_grad[vi]);
  if (options.variable_moving_averages) {
    // Shadows of the batch-norm statistics too: tensorflow/models/inception averages
    // trainable_variables() + moving_average_variables().
    for (std::size_t vi = 0; vi < num_vars; ++vi)
      if (vars[vi].moving_statistic) shadow_average(static_cast<uint32_t>(vi), UINT32_MAX);
  }
  if (options.global_step) {
    // Optimizer.apply_gradients: group(updates, name="update"), then global_step += 1.
    static constexpr std::string_view kName[] = {"GradientDescent", "Momentum", "RMSProp", "Adam", "AdamWeightDecay"};
    const std::string opt(kName[static_cast<std::size_t>(options.optimizer)]);
    // Own blocks, so that the layer-granularity graph stays acyclic: the global_step's block
    // feeds the learning rate and the decay that the updates and averages read.
    bookkeeping(opt, opt);
    uint32_t updates = group("update", update_nodes);
    override_prefix.clear();
    emit("AssignAdd", opt, ew(1, 1), {}, {});
    const auto increment = static_cast<uint32_t>(nodes.size() - 1);
    nodes[increment].controls = {updates, global_step_node};
    nodes[increment].op.colocation = nodes[global_step_node].op.colocation;
    if (options.variable_moving_averages) {
      bookkeeping("train", "");
      uint32_t averages = group("ExponentialMovingAverage", average_nodes);
      group("train", {increment, averages});
    }
  }
  overriding = false;
  phase = Phase::kForward;
}

OpGraph TrainingGraphBuilder::Impl::to_graph() {
  OpGraph g;
  for (NodeRec& n : nodes) g.add_op(std::move(n.op));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto dst = static_cast<OpId>(i);
    for (uint32_t v : nodes[i].inputs) g.add_edge(values[v].node, dst, {.bytes = values[v].bytes});
    for (uint32_t c : nodes[i].controls) g.add_edge(c, dst, {.bytes = 0, .control = true});
  }
  return g;
}

// Merges the ops of one (layer scope, phase) into one op. An op outside any layer scope stays alone.
OpGraph TrainingGraphBuilder::Impl::to_layer_graph() const {
  std::map<std::pair<std::string, int>, OpId> group_of_key;
  std::vector<OpId> group(nodes.size());
  std::vector<Op> merged;
  std::vector<double> heaviest;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeRec& n = nodes[i];
    std::string key = n.block.empty() ? n.op.name : n.block;
    auto [it, inserted] =
        group_of_key.emplace(std::make_pair(key, static_cast<int>(n.op.phase)), static_cast<OpId>(merged.size()));
    group[i] = it->second;
    if (inserted) {
      Op op = n.op;
      op.name = n.block.empty() ? n.op.name : n.block + "/" + std::string(phase_name(n.op.phase));
      op.output_bytes = 0;
      op.flops = op.bytes_accessed = 0;
      op.persistent_bytes = 0;
      op.colocation = n.block.empty() ? n.op.colocation : std::string();
      op.cpu_only = false;
      merged.push_back(std::move(op));
      heaviest.push_back(-1);
    }
    Op& m = merged[it->second];
    m.flops += n.op.flops;
    m.bytes_accessed += n.op.bytes_accessed;
    m.persistent_bytes += n.op.persistent_bytes;
    m.cpu_only = m.cpu_only || n.op.cpu_only;
    // A layer holding a variable keeps TF's colocation of the variable with its readers and
    // updaters: all phases of the layer share the key.
    if (!n.block.empty() && !n.op.colocation.empty()) m.colocation = n.block;
    if (n.op.flops > heaviest[it->second]) {
      heaviest[it->second] = n.op.flops;
      m.kernel = n.op.kernel;
      m.type = n.op.type;
    }
  }
  // Output bytes of a merged op: the tensors that leave it (the ones that stay inside are
  // temporaries of the fused layer).
  std::map<std::pair<OpId, OpId>, Tensor> edges;
  std::map<std::pair<uint32_t, OpId>, bool> sent;  // (value, destination group) counted once
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    OpId dst = group[i];
    for (uint32_t v : nodes[i].inputs) {
      OpId src = group[values[v].node];
      if (src == dst) continue;
      if (!sent.emplace(std::make_pair(v, dst), true).second) continue;
      Tensor& t = edges[{src, dst}];
      t.bytes += values[v].bytes;
      t.control = false;
      if (sent.emplace(std::make_pair(v, static_cast<OpId>(UINT32_MAX)), true).second &&
          nodes[values[v].node].op.output_bytes > 0)
        merged[src].output_bytes += values[v].bytes;
    }
    for (uint32_t c : nodes[i].controls) {
      OpId src = group[c];
      if (src == dst) continue;
      auto [it, inserted] = edges.try_emplace({src, dst}, Tensor{.bytes = 0, .control = true});
      (void)it;
      (void)inserted;
    }
  }
  OpGraph out;
  for (Op& op : merged) out.add_op(std::move(op));
  for (auto& [key, t] : edges) out.add_edge(key.first, key.second, t);
  return out;
}

// --- public API -------------------------------------------------------------------------------
TrainingGraphBuilder::TrainingGraphBuilder(BuilderOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.framework == Framework::kPyTorch) {
    PLACELAB_CHECK(options.batch_norm == BatchNormStyle::kFused && !options.shape_ops &&
                   !options.variable_moving_averages && !options.global_step &&
                   !options.exponential_decay_learning_rate && !options.loss_moving_averages &&
                   options.optimizer != Optimizer::kAdamWeightDecay && !options.colocate_gradients_with_ops)
        << "the PyTorch form has fused batch norm and none of TensorFlow's bookkeeping ops";
  }
  impl_->options = options;
}
TrainingGraphBuilder::~TrainingGraphBuilder() = default;
TrainingGraphBuilder::TrainingGraphBuilder(TrainingGraphBuilder&&) noexcept = default;
TrainingGraphBuilder& TrainingGraphBuilder::operator=(TrainingGraphBuilder&&) noexcept = default;
const BuilderOptions& TrainingGraphBuilder::options() const { return impl_->options; }

TrainingGraphBuilder::ScopeGuard::~ScopeGuard() {
  if (b_) b_->impl_->frames.pop_back();
}
TrainingGraphBuilder::ScopeGuard TrainingGraphBuilder::scope(std::string_view name) {
  std::string p = impl_->prefix();
  impl_->frames.push_back({p.empty() ? std::string(name) : p + "/" + std::string(name), false, impl_->layer()});
  return ScopeGuard(this);
}
TrainingGraphBuilder::ScopeGuard TrainingGraphBuilder::layer(std::string_view name, int32_t layer_id) {
  std::string p = impl_->prefix();
  impl_->frames.push_back({p.empty() ? std::string(name) : p + "/" + std::string(name), true,
                           layer_id >= 0 ? layer_id : impl_->layer()});
  return ScopeGuard(this);
}

std::vector<Value> TrainingGraphBuilder::input_pipeline(const std::vector<Shape>& shapes, std::string_view type,
                                                        const std::vector<Value>& inputs) {
  auto s = layer("input");
  int64_t bytes = 0;
  for (const Shape& sh : shapes) bytes += num_elements(sh) * kFloatBytes;
  std::vector<Value> out = impl_->emit(type, type, KernelSignature::copy(bytes), inputs, shapes);
  impl_->nodes.back().op.cpu_only = true;
  return out;
}
std::vector<Value> TrainingGraphBuilder::queue_runner_op(std::string_view type, KernelSignature kernel,
                                                         const std::vector<Value>& inputs,
                                                         const std::vector<Shape>& outputs, int64_t element_bytes) {
  Impl& b = *impl_;
  PLACELAB_CHECK(b.phase == Phase::kForward && element_bytes >= 0) << "queue_runner_op " << type;
  std::vector<Value> out = b.emit(type, type, kernel, inputs, outputs, {}, false);
  Op& op = b.nodes.back().op;
  op.cpu_only = true;
  op.output_bytes = 0;
  for (Value v : out) {
    b.values[v.id].bytes = num_elements(b.values[v.id].shape) * element_bytes;
    op.output_bytes += b.values[v.id].bytes;
  }
  b.build_stats.forward_flops -= op.flops;  // input work, not the network's
  return out;
}
Value TrainingGraphBuilder::variable(std::string_view name, const Shape& shape) {
  return impl_->variable(name, shape, true);
}
Value TrainingGraphBuilder::non_trainable_variable(std::string_view name, const Shape& shape) {
  return impl_->variable(name, shape, false);
}

Value TrainingGraphBuilder::conv2d(Value x, Value w, int64_t stride, int64_t pad_h, int64_t pad_w) {
  return conv2d_bias(x, w, Value{}, stride, pad_h, pad_w);
}

Value TrainingGraphBuilder::conv2d_bias(Value x, Value w, Value bias, int64_t stride, int64_t pad_h, int64_t pad_w) {
  Impl& b = *impl_;
  if (bias.valid() && b.options.framework == Framework::kTensorFlow)
    return bias_add(conv2d(x, w, stride, pad_h, pad_w), bias);
  const Shape xs = b.shp(x), ws = b.shp(w);
  PLACELAB_CHECK(xs.size() == 4 && ws.size() == 4 && xs[3] == ws[2])
      << "conv2d of " << shape_text(xs) << " with filter " << shape_text(ws);
  int64_t n = xs[0], h = xs[1], wd = xs[2], c = xs[3], r = ws[0], s = ws[1], k = ws[3];
  int64_t ho = (h + 2 * pad_h - r) / stride + 1, wo = (wd + 2 * pad_w - s) / stride + 1;
  PLACELAB_CHECK(ho > 0 && wo > 0) << "conv2d output of " << shape_text(xs);
  // The signature has one padding for both axes; an asymmetric padding (1×7 convolutions) is
  // described by the padded input with pad 0, which gives the same output size and work.
  bool sym = pad_h == pad_w;
  int64_t sh = sym ? h : h + 2 * pad_h, sw = sym ? wd : wd + 2 * pad_w, sp = sym ? pad_h : 0;
  auto sig = [=](KernelClass cls) { return KernelSignature::conv2d(cls, n, c, sh, sw, k, r, s, stride, sp); };
  // PyTorch: cudnn_convolution adds the bias inside aten::conv2d; its gradient is a sum over N, H, W.
  std::vector<Value> inputs{x, w};
  if (bias.valid()) {
    PLACELAB_CHECK(b.shp(bias) == Shape{k}) << "conv bias " << shape_text(b.shp(bias)) << " for " << k << " filters";
    inputs.push_back(bias);
  }
  const int64_t out_elems = n * ho * wo * k;
  return b.emit1("Conv2D", sig(KernelClass::kConv2D), inputs, {n, ho, wo, k}, [sig, out_elems, k](Impl& bb, Impl::GradCtx& g) {
    // TF 1.x passes the input and filter sizes as Shape ops (shape_ops).
    if (bb.needs(g, 0)) {
      std::vector<Value> in{bb.in(g, 1), bb.dy(g)};
      if (bb.options.shape_ops) in.push_back(bb.shape_of(bb.in(g, 0)));
      bb.give(g, 0, bb.emit1("Conv2DBackpropInput", sig(KernelClass::kConv2DBackpropInput), in, bb.shp(bb.in(g, 0))));
    }
    if (bb.needs(g, 1)) {
      std::vector<Value> in{bb.in(g, 0), bb.dy(g)};
      if (bb.options.shape_ops) in.push_back(bb.shape_of(bb.in(g, 1)));
      bb.give(g, 1, bb.emit1("Conv2DBackpropFilter", sig(KernelClass::kConv2DBackpropFilter), in, bb.shp(bb.in(g, 1))));
    }
    if (bb.nodes[g.node].inputs.size() > 2)
      bb.give(g, 2, bb.emit1("Sum", KernelSignature::reduction(out_elems, k), {bb.dy(g)}, Shape{k}));
  });
}

Value TrainingGraphBuilder::matmul(Value a, Value bv, bool transpose_b) {
  Impl& b = *impl_;
  const Shape sa = b.shp(a), sb = b.shp(bv);
  PLACELAB_CHECK(sa.size() >= 2 && sb.size() >= 2) << "matmul of " << shape_text(sa) << " and " << shape_text(sb);
  int64_t k = sa.back();
  int64_t kb = transpose_b ? sb[sb.size() - 1] : sb[sb.size() - 2];
  int64_t n = transpose_b ? sb[sb.size() - 2] : sb[sb.size() - 1];
  PLACELAB_CHECK(k == kb) << "matmul inner dimensions of " << shape_text(sa) << " and " << shape_text(sb);
  Shape out = sa;
  out.back() = n;
  if (sb.size() == 2) {
    int64_t m = num_elements(sa) / k;
    return b.emit1("MatMul", KernelSignature::gemm(m, n, k), {a, bv}, out, [m, n, k, transpose_b](Impl& bb, Impl::GradCtx& g) {
      if (bb.needs(g, 0))
        bb.give(g, 0, bb.emit1("MatMul", KernelSignature::gemm(m, k, n), {bb.dy(g), bb.in(g, 1)}, bb.shp(bb.in(g, 0))));
      if (bb.needs(g, 1))
        bb.give(g, 1, bb.emit1("MatMul", transpose_b ? KernelSignature::gemm(n, k, m) : KernelSignature::gemm(k, n, m),
                               {bb.in(g, 0), bb.dy(g)}, bb.shp(bb.in(g, 1))));
    });
  }
  PLACELAB_CHECK(sa.size() == sb.size() && std::equal(sa.begin(), sa.end() - 2, sb.begin()))
      << "batched matmul of " << shape_text(sa) << " and " << shape_text(sb);
  int64_t m = sa[sa.size() - 2];
  int64_t batch = num_elements(sa) / (m * k);
  return b.emit1("BatchMatMul", KernelSignature::gemm(m, n, k, batch), {a, bv}, out,
                 [m, n, k, batch, transpose_b](Impl& bb, Impl::GradCtx& g) {
                   if (bb.needs(g, 0))
                     bb.give(g, 0, bb.emit1("BatchMatMul", KernelSignature::gemm(m, k, n, batch), {bb.dy(g), bb.in(g, 1)},
                                            bb.shp(bb.in(g, 0))));
                   if (bb.needs(g, 1))
                     bb.give(g, 1, bb.emit1("BatchMatMul",
                                            transpose_b ? KernelSignature::gemm(n, k, m, batch)
                                                        : KernelSignature::gemm(k, n, m, batch),
                                            {bb.in(g, 0), bb.dy(g)}, bb.shp(bb.in(g, 1))));
                 });
}

Value TrainingGraphBuilder::dense(Value x, Value w, Value bias) {
  Impl& b = *impl_;
  if (b.options.framework == Framework::kTensorFlow) return bias_add(matmul(x, w), bias);
  const Shape sx = b.shp(x), sw = b.shp(w);
  PLACELAB_CHECK(sx.size() == 2 && sw.size() == 2 && sx[1] == sw[0] && b.shp(bias) == Shape{sw[1]})
      << "dense of " << shape_text(sx) << ", " << shape_text(sw) << ", " << shape_text(b.shp(bias));
  const int64_t m = sx[0], k = sx[1], n = sw[1];
  // aten::addmm(bias, x, w): one GEMM that starts from the broadcast bias.
  return b.emit1("MatMul", KernelSignature::gemm(m, n, k), {x, w, bias}, Shape{m, n}, [m, n, k](Impl& bb, Impl::GradCtx& g) {
    if (bb.needs(g, 0))
      bb.give(g, 0, bb.emit1("MatMul", KernelSignature::gemm(m, k, n), {bb.dy(g), bb.in(g, 1)}, Shape{m, k}));
    bb.give(g, 1, bb.emit1("MatMul", KernelSignature::gemm(k, n, m), {bb.in(g, 0), bb.dy(g)}, Shape{k, n}));
    bb.give(g, 2, bb.emit1("Sum", KernelSignature::reduction(m * n, n), {bb.dy(g)}, Shape{n}));
  });
}

Value TrainingGraphBuilder::bias_add(Value x, Value bias) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  PLACELAB_CHECK(b.shp(bias) == Shape{xs.back()}) << "bias " << shape_text(b.shp(bias)) << " for " << shape_text(xs);
  int64_t e = b.elems(x), c = xs.back();
  return b.emit1("BiasAdd", Impl::ew(e, 2), {x, bias}, xs, [e, c](Impl& bb, Impl::GradCtx& g) {
    if (bb.needs(g, 0)) bb.give(g, 0, bb.dy(g));
    bb.give(g, 1, bb.emit1("BiasAddGrad", KernelSignature::reduction(e, c), {bb.dy(g)}, Shape{c}));
  });
}

Value TrainingGraphBuilder::batch_norm(Value x, bool scale) { return impl_->batch_norm(x, scale); }
Value TrainingGraphBuilder::layer_norm(Value x) { return impl_->layer_norm(x); }
Value TrainingGraphBuilder::relu(Value x) { return impl_->unary("Relu", x, "ReluGrad", true); }
Value TrainingGraphBuilder::sigmoid(Value x) { return impl_->unary("Sigmoid", x, "SigmoidGrad", true); }
Value TrainingGraphBuilder::tanh(Value x) { return impl_->unary("Tanh", x, "TanhGrad", true); }
Value TrainingGraphBuilder::gelu(Value x) {
  PLACELAB_CHECK(impl_->options.framework == Framework::kPyTorch) << "TF 1.x builds GELU from its elementwise ops";
  return impl_->unary("Gelu", x, "GeluGrad", false);
}
Value TrainingGraphBuilder::rsqrt(Value x) { return impl_->unary("Rsqrt", x, "RsqrtGrad", true); }
Value TrainingGraphBuilder::add(Value a, Value b) { return impl_->binary(Impl::Bin::kAdd, a, b); }
Value TrainingGraphBuilder::sub(Value a, Value b) { return impl_->binary(Impl::Bin::kSub, a, b); }
Value TrainingGraphBuilder::mul(Value a, Value b) { return impl_->binary(Impl::Bin::kMul, a, b); }
Value TrainingGraphBuilder::squared_difference(Value a, Value b) { return impl_->binary(Impl::Bin::kSqDiff, a, b); }

Value TrainingGraphBuilder::scale(Value x, double /*factor*/) {
  Impl& b = *impl_;
  int64_t e = b.elems(x);
  return b.emit1("Mul", Impl::ew(e, 1), {x}, b.shp(x), [e](Impl& bb, Impl::GradCtx& g) {
    Value d = bb.emit1("Mul", Impl::ew(e, 1), {bb.dy(g)}, bb.shp(bb.dy(g)));
    if (bb.options.shape_ops) {
      Value sx = bb.shape_of(bb.in(g, 0));
      Value bga = bb.shape_op("BroadcastGradientArgs", {sx, bb.shape_op("Shape", {})});
      d = bb.sum_to(d, bb.shp(bb.in(g, 0)), bga, sx);
    }
    bb.give(g, 0, d);
  });
}
Value TrainingGraphBuilder::add_constant(Value x, double /*c*/) { return impl_->add_const(x); }
Value TrainingGraphBuilder::pow(Value x, double /*exponent*/) {
  Impl& b = *impl_;
  int64_t e = b.elems(x);
  return b.emit1("Pow", Impl::ew(e, 1), {x}, b.shp(x), [e](Impl& bb, Impl::GradCtx& g) {
    // d(x^p) = p · x^(p-1) · dy
    Shape s = bb.shp(bb.in(g, 0));
    Value p1 = bb.emit1("Pow", Impl::ew(e, 1), {bb.in(g, 0)}, s);
    Value scaled = bb.emit1("mul", Impl::ew(e, 1), {p1}, s);
    Value d = bb.emit1("mul", Impl::ew(e, 2), {bb.dy(g), scaled}, s);
    if (bb.options.shape_ops) {
      Value sx = bb.shape_of(bb.in(g, 0));
      Value bga = bb.shape_op("BroadcastGradientArgs", {sx, bb.shape_op("Shape", {})});
      d = bb.sum_to(d, s, bga, sx);
    }
    bb.give(g, 0, d);
  });
}
Value TrainingGraphBuilder::zeros(const Shape& shape) {
  return impl_->emit1("zeros", Impl::ew(num_elements(shape), 1), {}, shape);
}
Value TrainingGraphBuilder::cast(Value x) {
  Impl& b = *impl_;
  int64_t e = b.elems(x);
  return b.emit1("Cast", Impl::ew(e, 1), {x}, b.shp(x), [e](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.emit1("Cast", Impl::ew(e, 1), {bb.dy(g)}, bb.shp(bb.dy(g))));
  });
}
Value TrainingGraphBuilder::stop_gradient(Value x) {
  Impl& b = *impl_;
  Value y = b.emit1("StopGradient", KernelSignature::noop(), {x}, b.shp(x));
  b.values[y.id].requires_grad = false;
  b.nodes[b.values[y.id].node].grad = {};
  return y;
}
Value TrainingGraphBuilder::add_n(const std::vector<Value>& vs) {
  Impl& b = *impl_;
  PLACELAB_CHECK(!vs.empty()) << "add_n of nothing";
  for (Value v : vs) PLACELAB_CHECK(b.shp(v) == b.shp(vs[0])) << "add_n shapes differ";
  if (vs.size() == 1) return vs[0];
  int64_t e = b.elems(vs[0]);
  return b.emit1("AddN", Impl::ew(e, static_cast<int64_t>(vs.size())), vs, b.shp(vs[0]),
                 [n = vs.size()](Impl& bb, Impl::GradCtx& g) {
                   for (std::size_t i = 0; i < n; ++i)
                     if (bb.needs(g, i)) bb.give(g, i, bb.dy(g));
                 });
}
Value TrainingGraphBuilder::reduce_mean(Value x, const std::vector<int>& axes, bool keep_dims) {
  return impl_->reduce(true, x, axes, keep_dims);
}
Value TrainingGraphBuilder::reduce_sum(Value x, const std::vector<int>& axes, bool keep_dims) {
  return impl_->reduce(false, x, axes, keep_dims);
}

Value TrainingGraphBuilder::softmax(Value x) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  int64_t cols = xs.back(), e = b.elems(x), rows = e / cols;
  return b.emit1("Softmax", KernelSignature::softmax(rows, cols), {x}, xs, [e, rows](Impl& bb, Impl::GradCtx& g) {
    // TF's _SoftmaxGrad: (dy - sum(dy · y, -1)) · y
    Shape s = bb.shp(bb.out(g));
    Shape r = s;
    r.back() = 1;
    Value prod = bb.emit1("mul", Impl::ew(e, 2), {bb.dy(g), bb.out(g)}, s);
    Value sum = bb.emit1("Sum", KernelSignature::reduction(e, rows), {prod}, r);
    Value diff = bb.emit1("sub", Impl::ew(e, 2), {bb.dy(g), sum}, s);
    bb.give(g, 0, bb.emit1("mul", Impl::ew(e, 2), {diff, bb.out(g)}, s));
  });
}

Value TrainingGraphBuilder::concat(const std::vector<Value>& vs, int axis) {
  Impl& b = *impl_;
  PLACELAB_CHECK(!vs.empty()) << "concat of nothing";
  Shape out = b.shp(vs[0]);
  auto ax = static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(out.size()) : axis);
  PLACELAB_CHECK(ax < out.size()) << "concat axis " << axis;
  out[ax] = 0;
  int64_t bytes = 0;
  for (Value v : vs) {
    Shape s = b.shp(v);
    PLACELAB_CHECK(s.size() == out.size()) << "concat ranks differ";
    out[ax] += s[ax];
    bytes += b.val(v).bytes;
  }
  if (vs.size() == 1) return vs[0];
  return b.emit1("ConcatV2", KernelSignature::copy(bytes), vs, out, [n = vs.size()](Impl& bb, Impl::GradCtx& g) {
    std::vector<Value> shapes;
    if (bb.options.shape_ops)
      for (std::size_t i = 0; i < n; ++i) shapes.push_back(bb.shape_of(bb.in(g, i)));
    // ConcatOffset gives each input's offset; a Slice of dy per input that needs a gradient.
    Value offsets = bb.emit1("ConcatOffset", KernelSignature::noop(), shapes, Shape{static_cast<int64_t>(n)});
    for (std::size_t i = 0; i < n; ++i)
      if (bb.needs(g, i)) {
        const Shape s = bb.shp(bb.in(g, i));
        bb.give(g, i, bb.emit1("Slice", KernelSignature::copy(num_elements(s) * kFloatBytes), {bb.dy(g), offsets}, s));
      }
  });
}

std::vector<Value> TrainingGraphBuilder::split(Value x, int axis, int parts) {
  Impl& b = *impl_;
  Shape part = b.shp(x);
  auto ax = static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(part.size()) : axis);
  PLACELAB_CHECK(ax < part.size() && parts > 0 && part[ax] % parts == 0) << "split of " << shape_text(part);
  part[ax] /= parts;
  int64_t bytes = b.val(x).bytes;
  return b.emit("Split", "split", KernelSignature::copy(bytes), {x}, std::vector<Shape>(static_cast<std::size_t>(parts), part),
                [bytes](Impl& bb, Impl::GradCtx& g) {
                  // TF's _SplitGrad concatenates the output gradients, zeros for the missing ones.
                  std::vector<Value> parts_grad;
                  for (std::size_t i = 0; i < g.dy.size(); ++i) {
                    if (g.dy[i] != UINT32_MAX) {
                      parts_grad.push_back({g.dy[i]});
                    } else {
                      const Shape s = bb.shp(bb.out(g, i));
                      parts_grad.push_back(bb.emit1("zeros_like", Impl::ew(num_elements(s), 1), {bb.out(g, i)}, s));
                    }
                  }
                  bb.give(g, 0, bb.emit1("concat", KernelSignature::copy(bytes), parts_grad, bb.shp(bb.in(g, 0))));
                });
}

Value TrainingGraphBuilder::reshape(Value x, const Shape& shape) {
  Impl& b = *impl_;
  PLACELAB_CHECK(num_elements(shape) == b.elems(x)) << "reshape " << shape_text(b.shp(x)) << " to " << shape_text(shape);
  return b.emit1("Reshape", KernelSignature::noop(), {x}, shape, [](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.reshape_back(bb.dy(g), bb.in(g, 0)));
  });
}

Value TrainingGraphBuilder::transpose(Value x, const std::vector<int>& perm) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  PLACELAB_CHECK(perm.size() == xs.size()) << "transpose rank";
  Shape out;
  for (int p : perm) out.push_back(xs[static_cast<std::size_t>(p)]);
  int64_t bytes = b.val(x).bytes;
  return b.emit1("Transpose", KernelSignature::copy(bytes), {x}, out, [bytes](Impl& bb, Impl::GradCtx& g) {
    std::vector<Value> in{bb.dy(g)};
    if (bb.options.shape_ops) in.push_back(bb.shape_op("InvertPermutation", {}, static_cast<int64_t>(bb.shp(bb.dy(g)).size())));
    bb.give(g, 0, bb.emit1("Transpose", KernelSignature::copy(bytes), in, bb.shp(bb.in(g, 0))));
  });
}

Value TrainingGraphBuilder::slice(Value x, const Shape& begin, const Shape& size) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  PLACELAB_CHECK(begin.size() == xs.size() && size.size() == xs.size()) << "slice rank of " << shape_text(xs);
  for (std::size_t i = 0; i < xs.size(); ++i)
    PLACELAB_CHECK(begin[i] >= 0 && size[i] >= 0 && begin[i] + size[i] <= xs[i])
        << "slice " << shape_text(begin) << " + " << shape_text(size) << " of " << shape_text(xs);
  if (size == xs) return x;
  return b.emit1("Slice", KernelSignature::copy(num_elements(size) * kFloatBytes), {x}, size,
                 [](Impl& bb, Impl::GradCtx& g) {
                   const Shape s = bb.shp(bb.in(g, 0));
                   bb.give(g, 0, bb.emit1("Pad", KernelSignature::copy(num_elements(s) * kFloatBytes), {bb.dy(g)}, s));
                 });
}

Value TrainingGraphBuilder::broadcast_to(Value x, const Shape& shape) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  auto s = broadcast(xs, shape);
  PLACELAB_CHECK(s && *s == shape) << "broadcast_to " << shape_text(xs) << " to " << shape_text(shape);
  if (xs == shape) return x;
  return b.emit1("BroadcastTo", KernelSignature::copy(num_elements(shape) * kFloatBytes), {x}, shape,
                 [](Impl& bb, Impl::GradCtx& g) { bb.give(g, 0, bb.reduce_to(bb.dy(g), bb.shp(bb.in(g, 0)))); });
}

Value TrainingGraphBuilder::select(Value cond, Value a, Value c) {
  Impl& b = *impl_;
  auto ac = broadcast(b.shp(a), b.shp(c));
  auto s = ac ? broadcast(b.shp(cond), *ac) : std::nullopt;
  PLACELAB_CHECK(s) << "select of " << shape_text(b.shp(cond)) << ", " << shape_text(b.shp(a)) << " and "
                    << shape_text(b.shp(c)) << ": shapes do not broadcast";
  const Shape out = *s;
  const int64_t e = num_elements(out);
  return b.emit1("Select", Impl::ew(e, 3), {cond, a, c}, out, [e, out](Impl& bb, Impl::GradCtx& g) {
    // dy where the branch was taken, zeros elsewhere: one Select per side (TF's zeros_like + select).
    Value zeros = bb.emit1("zeros", Impl::ew(e, 1), {}, out);
    for (std::size_t i = 1; i <= 2; ++i)
      if (bb.needs(g, i)) {
        Value picked = bb.emit1("Select", Impl::ew(e, 3), {bb.in(g, 0), i == 1 ? bb.dy(g) : zeros, i == 1 ? zeros : bb.dy(g)}, out);
        bb.give(g, i, bb.reduce_to(picked, bb.shp(bb.in(g, i))));
      }
  });
}

Value TrainingGraphBuilder::pad(Value x, const Shape& before, const Shape& after) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  PLACELAB_CHECK(before.size() == xs.size() && after.size() == xs.size()) << "pad rank of " << shape_text(xs);
  Shape out = xs;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    PLACELAB_CHECK(before[i] >= 0 && after[i] >= 0) << "pad " << shape_text(before) << " / " << shape_text(after);
    out[i] += before[i] + after[i];
  }
  if (out == xs) return x;
  return b.emit1("Pad", KernelSignature::copy(num_elements(out) * kFloatBytes), {x}, out,
                 [](Impl& bb, Impl::GradCtx& g) {
                   const Shape s = bb.shp(bb.in(g, 0));
                   bb.give(g, 0, bb.emit1("Slice", KernelSignature::copy(num_elements(s) * kFloatBytes), {bb.dy(g)}, s));
                 });
}

namespace {
Shape pool_shape(const Shape& xs, int64_t k, int64_t stride, int64_t pad) {
  PLACELAB_CHECK(xs.size() == 4) << "pooling of " << shape_text(xs);
  return {xs[0], (xs[1] + 2 * pad - k) / stride + 1, (xs[2] + 2 * pad - k) / stride + 1, xs[3]};
}
}  // namespace

Value TrainingGraphBuilder::max_pool(Value x, int64_t k, int64_t stride, int64_t pad) {
  Impl& b = *impl_;
  Shape out = pool_shape(b.shp(x), k, stride, pad);
  int64_t eo = num_elements(out), ei = b.elems(x);
  return b.emit1("MaxPool", KernelSignature::reduction(eo * k * k, eo), {x}, out, [ei](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.emit1("MaxPoolGrad", Impl::ew(ei, 3), {bb.in(g, 0), bb.out(g), bb.dy(g)}, bb.shp(bb.in(g, 0))));
  });
}
Value TrainingGraphBuilder::avg_pool(Value x, int64_t k, int64_t stride, int64_t pad) {
  Impl& b = *impl_;
  Shape out = pool_shape(b.shp(x), k, stride, pad);
  int64_t eo = num_elements(out), ei = b.elems(x);
  return b.emit1("AvgPool", KernelSignature::reduction(eo * k * k, eo), {x}, out, [ei](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.emit1("AvgPoolGrad", Impl::ew(ei, 1), {bb.dy(g)}, bb.shp(bb.in(g, 0))));
  });
}
Value TrainingGraphBuilder::lrn(Value x, int64_t depth_radius) {
  Impl& b = *impl_;
  int64_t e = b.elems(x), window = 2 * depth_radius + 1;
  return b.emit1("LRN", Impl::ew(e, window), {x}, b.shp(x), [e, window](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.emit1("LRNGrad", Impl::ew(e, window + 2), {bb.dy(g), bb.in(g, 0), bb.out(g)}, bb.shp(bb.in(g, 0))));
  });
}

Value TrainingGraphBuilder::gather(Value table, Value ids) {
  Impl& b = *impl_;
  const Shape ts = b.shp(table);
  int32_t var = b.val(table).var;
  PLACELAB_CHECK(ts.size() == 2 && var >= 0) << "gather needs a variable table [rows, dim]";
  Shape out = b.shp(ids);
  int64_t lookups = b.elems(ids);
  out.push_back(ts[1]);
  if (b.options.framework == Framework::kPyTorch) {
    // nn.Embedding (sparse=False): aten::embedding, and embedding_dense_backward scatters the
    // output gradient into a dense [rows, dim] gradient that the optimizer applies whole.
    return b.emit1("GatherV2", KernelSignature::embedding(ts[0], ts[1], lookups), {table, ids}, out,
                   [lookups, rows = ts[0], dim = ts[1]](Impl& bb, Impl::GradCtx& g) {
                     bb.give(g, 0, bb.emit1("EmbeddingGrad", KernelSignature::embedding(rows, dim, lookups),
                                            {bb.dy(g), bb.in(g, 1)}, Shape{rows, dim}));
                   });
  }
  b.vars[static_cast<std::size_t>(var)].sparse = true;
  return b.emit1("GatherV2", KernelSignature::embedding(ts[0], ts[1], lookups), {table, ids}, out,
                 [lookups, dim = ts[1]](Impl& bb, Impl::GradCtx& g) {
                   // IndexedSlices: the output gradient rows, applied sparsely to the table.
                   std::vector<Value> in{bb.dy(g)};
                   if (bb.options.shape_ops) {
                     // values_shape = concat([Size(ids)], Shape(table)[1:]); indices reshaped to it.
                     Value size = bb.shape_op("ExpandDims", {bb.shape_op("Size", {bb.in(g, 1)})});
                     Value tail = bb.shape_op("strided_slice", {bb.shape_op("ToInt32", {bb.shape_of(bb.in(g, 0))})});
                     Value values_shape = bb.shape_op("concat", {size, tail}, 2);
                     bb.emit1("Reshape", KernelSignature::noop(), {bb.in(g, 1), size}, Shape{lookups});
                     in.push_back(values_shape);
                   }
                   bb.give(g, 0, bb.emit1("Reshape", KernelSignature::noop(), in, Shape{lookups, dim}));
                 });
}

Value TrainingGraphBuilder::softmax_cross_entropy(Value logits, Value labels) {
  Impl& b = *impl_;
  const Shape ls = b.shp(logits);
  PLACELAB_CHECK(ls.size() == 2 && b.shp(labels) == Shape{ls[0]})
      << "cross-entropy of logits " << shape_text(ls) << " and labels " << shape_text(b.shp(labels));
  int64_t n = ls[0], c = ls[1];
  if (b.options.framework == Framework::kPyTorch) {
    // F.cross_entropy: log_softmax, then nll_loss with the mean over the batch.
    Value logp = b.emit1("LogSoftmax", KernelSignature::softmax(n, c), {logits}, ls, [n, c](Impl& bb, Impl::GradCtx& g) {
      bb.give(g, 0, bb.emit1("LogSoftmaxGrad", Impl::ew(n * c, 2), {bb.dy(g), bb.out(g)}, Shape{n, c}));
    });
    return b.emit1("NllLoss", KernelSignature::reduction(n, 1), {logp, labels}, Shape{}, [n, c](Impl& bb, Impl::GradCtx& g) {
      bb.give(g, 0, bb.emit1("NllLossGrad", Impl::ew(n * c, 1), {bb.dy(g), bb.in(g, 1)}, Shape{n, c}));
    });
  }
  std::vector<Value> outs =
      b.emit("SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits",
             KernelSignature::softmax(n, c), {logits, labels}, {Shape{n}, ls}, [n, c](Impl& bb, Impl::GradCtx& g) {
               Value e = bb.emit1("ExpandDims", KernelSignature::noop(), {bb.dy(g)}, Shape{n, 1});
               bb.give(g, 0, bb.emit1("mul", Impl::ew(n * c, 2), {e, bb.out(g, 1)}, Shape{n, c}));
             });
  return reduce_mean(outs[0], {0}, false);
}

TrainingGraphBuilder::LstmState TrainingGraphBuilder::lstm_cell(Value x, LstmState state, Value kernel, Value bias) {
  Impl& b = *impl_;
  int64_t batch = b.shp(x)[0];
  int64_t units = b.shp(bias)[0] / 4;
  Shape s{batch, units};
  auto zeros = [&] { return b.emit1("zeros", Impl::ew(batch * units, 1), {}, s); };
  Value h = state.h.valid() ? state.h : zeros();
  Value c = state.c.valid() ? state.c : zeros();
  Value z = dense(concat({x, h}, 1), kernel, bias);
  std::vector<Value> ijfo = split(z, 1, 4);
  Value new_c = add(mul(c, sigmoid(add_constant(ijfo[2], 1.0))), mul(sigmoid(ijfo[0]), tanh(ijfo[1])));
  Value new_h = mul(tanh(new_c), sigmoid(ijfo[3]));
  return {new_h, new_c};
}

void TrainingGraphBuilder::minimize(Value loss) {
  Impl& b = *impl_;
  PLACELAB_CHECK(b.loss == UINT32_MAX) << "minimize() called twice";
  PLACELAB_CHECK(b.elems(loss) == 1) << "loss must be a scalar, got " << shape_text(b.shp(loss));
  std::vector<Value> terms{loss};
  for (uint32_t r : b.regularized) {
    const Impl::ValueRec& v = b.values[r];
    int64_t e = num_elements(v.shape);
    b.overriding = true;
    b.override_prefix = b.nodes[b.vars[static_cast<std::size_t>(v.var)].node].op.name + "/Regularizer";
    b.override_block = b.nodes[v.node].block;
    b.override_layer = b.nodes[v.node].op.layer;
    b.override_colocation.clear();
    Value l2 = b.emit1("L2Loss", KernelSignature::reduction(e, 1), {Value{r}}, Shape{}, [e](Impl& bb, Impl::GradCtx& g) {
      bb.give(g, 0, bb.emit1("mul", Impl::ew(e, 2), {bb.in(g, 0), bb.dy(g)}, bb.shp(bb.in(g, 0))));
    });
    terms.push_back(scale(l2, 0));
    b.overriding = false;
  }
  if (terms.size() > 1) {
    auto s = scope("total_loss");
    loss = add_n(terms);
  }
  for (Value t : terms) b.loss_terms.push_back(t.id);
  if (terms.size() > 1) b.loss_terms.push_back(loss.id);
  b.loss = loss.id;
}

void TrainingGraphBuilder::add_weight_decay(Value variable_read, double /*decay*/) {
  Impl& b = *impl_;
  const Impl::ValueRec& v = b.val(variable_read);
  PLACELAB_CHECK(v.var >= 0 && b.vars[static_cast<std::size_t>(v.var)].trainable) << "weight decay needs a trainable variable";
  PLACELAB_CHECK(b.loss == UINT32_MAX) << "add_weight_decay after minimize()";
  // torch.optim applies weight decay inside the update kernel: no loss terms.
  if (b.options.framework == Framework::kPyTorch) return;
  b.regularized.push_back(variable_read.id);
}

Value TrainingGraphBuilder::dropout(Value x, double /*rate*/) {
  Impl& b = *impl_;
  const Shape s = b.shp(x);
  int64_t e = b.elems(x);
  if (b.options.framework == Framework::kPyTorch) {
    // aten::native_dropout: one fused kernel writes the output and the mask; its backward one
    // multiply (native_dropout_backward).
    return b.emit1("Dropout", Impl::ew(e, 1), {x}, s, [e](Impl& bb, Impl::GradCtx& g) {
      bb.give(g, 0, bb.emit1("DropoutGrad", Impl::ew(e, 2), {bb.dy(g)}, bb.shp(bb.dy(g))));
    });
  }
  auto s1 = scope("dropout");
  Value u = b.emit1("RandomUniform", Impl::ew(e, 1), {}, s);
  Value keep = b.emit1("add", Impl::ew(e, 1), {u}, s);
  Value mask = b.emit1("Floor", Impl::ew(e, 1), {keep}, s);
  Value scaled = b.emit1("div", Impl::ew(e, 1), {x}, s, [e](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.emit1("div", Impl::ew(e, 1), {bb.dy(g)}, bb.shp(bb.dy(g))));
  });
  return mul(scaled, mask);
}

Shape TrainingGraphBuilder::shape(Value v) const { return impl_->shp(v); }

OpGraph TrainingGraphBuilder::finish() && {
  Impl& b = *impl_;
  PLACELAB_CHECK(!b.finished) << "finish() called twice";
  b.backward();
  b.finished = true;
  OpGraph g = b.options.granularity == Granularity::kLayer ? b.to_layer_graph() : b.to_graph();
  // A PyTorch program runs eagerly, its ops in the order they were emitted (docs/simulator.md).
  if (b.options.framework == Framework::kPyTorch) g.set_execution(Execution::kEager);
  b.nodes.clear();
  b.values.clear();
  return g;
}

BuildStats TrainingGraphBuilder::stats() const { return impl_->build_stats; }

}  // namespace placelab::models
