// The model builder's names and shape helpers, the backward pass (gradient ops, variable gradients),
// the optimizer's updates and bookkeeping ops, and the OpGraph out of the nodes; the forward op
// API is in builder_layers.cpp, the state both share in builder_impl.h.
#include "placelab/models/builder.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <utility>

#include "builder_impl.h"
#include "placelab/core/error.h"

namespace placelab::models {
namespace {

std::string_view kGranularityNames[] = {"op", "layer"};
std::string_view kOptimizerNames[] = {"sgd", "momentum", "rmsprop", "adam", "adamw"};
std::string_view kFrameworkNames[] = {"tensorflow", "pytorch"};

}  // namespace

namespace builder_detail {

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

}  // namespace builder_detail

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

// --- updates and bookkeeping ops --------------------------------------------------------------
// tf.train.assign_moving_average(shadow, value, decay): sub, mul, AssignSub, colocated with
// `shadow`. A constant decay is folded into the mul; a decay tensor (`decay` valid) adds the
// 1 - decay Sub. Returns the AssignSub's node.
uint32_t TrainingGraphBuilder::Impl::moving_average(uint32_t shadow_var, Value value, Value decay) {
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
uint32_t TrainingGraphBuilder::Impl::group(std::string_view name, const std::vector<uint32_t>& after) {
  emit("NoOp", name, KernelSignature::noop(), {}, {});
  nodes.back().controls = after;
  return static_cast<uint32_t>(nodes.size() - 1);
}
// Sets the emission context of the step's bookkeeping ops (update phase, no layer).
void TrainingGraphBuilder::Impl::bookkeeping(std::string_view block, std::string_view prefix) {
  phase = Phase::kUpdate;
  overriding = true;
  override_block = std::string(block);
  override_prefix = std::string(prefix);
  override_layer = -1;
  override_colocation.clear();
}

// tf.train.get_or_create_global_step(): an int64 scalar variable.
void TrainingGraphBuilder::Impl::create_global_step() {
  bookkeeping("global_step", "");
  global_step_read = variable("global_step", Shape{}, false);
  global_step_node = vars[static_cast<std::size_t>(values[global_step_read.id].var)].node;
  nodes[global_step_node].op.persistent_bytes = 8;
  values[global_step_read.id].bytes = 8;
}
// tf.train.exponential_decay(lr, global_step, decay_steps, rate, staircase=True):
// lr · rate ^ floor(float(global_step) / decay_steps); the constants are folded.
void TrainingGraphBuilder::Impl::create_learning_rate() {
  bookkeeping("ExponentialDecay", "ExponentialDecay");
  Value step = emit1("Cast", ew(1, 1), {global_step_read}, Shape{});
  Value p = emit1("Floor", ew(1, 1), {emit1("truediv", ew(1, 1), {step}, Shape{})}, Shape{});
  Value power = emit1("Pow", ew(1, 1), {p}, Shape{});
  override_prefix.clear();
  learning_rate = emit("Mul", "ExponentialDecay", ew(1, 1), {power}, {Shape{}})[0];
}
// ExponentialMovingAverage(decay, num_updates=global_step): min(decay, (1 + n) / (10 + n)).
void TrainingGraphBuilder::Impl::create_average_decay() {
  bookkeeping("ExponentialMovingAverage", "ExponentialMovingAverage");
  Value n = emit("Cast", "num_updates", ew(1, 1), {global_step_read}, {Shape{}})[0];
  Value ratio = emit1("truediv", ew(1, 2), {emit1("add", ew(1, 1), {n}, Shape{}), emit1("add", ew(1, 1), {n}, Shape{})},
                      Shape{});
  average_decay = emit1("Minimum", ew(1, 1), {ratio}, Shape{});
}
// _add_loss_summaries: ExponentialMovingAverage(0.9, name='avg') of every loss term and the
// total loss; returns the NoOp grouping the updates.
uint32_t TrainingGraphBuilder::Impl::loss_averages() {
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

// tf.clip_by_global_norm over every variable gradient: an L2Loss per gradient, the global norm,
// the scale, then gradient · scale. Every update therefore waits for every gradient.
void TrainingGraphBuilder::Impl::clip_by_global_norm(std::vector<uint32_t>& var_grad) {
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
  Value stacked = emit1("stack", KernelSignature::copy(k * builder_detail::kFloatBytes), norms, Shape{k});
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
void TrainingGraphBuilder::Impl::apply_update(uint32_t vi, uint32_t grad) {
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
    apply.op.persistent_bytes = static_cast<int64_t>(slots) * params * builder_detail::kFloatBytes;
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
uint32_t TrainingGraphBuilder::Impl::adam_weight_decay(uint32_t vi, uint32_t grad) {
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
void TrainingGraphBuilder::Impl::shadow_average(uint32_t vi, uint32_t after) {
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

// --- backward ---------------------------------------------------------------------------------
// The backward pass, in named steps: the gradient ops of every forward node on the loss's path, the
// variables' gradients (clipped when asked), then the optimizer's updates and bookkeeping ops.
void TrainingGraphBuilder::Impl::backward() {
  PLACELAB_CHECK(loss != UINT32_MAX) << "minimize() was not called";
  const std::size_t num_forward_values = values.size();
  const std::size_t num_forward_nodes = nodes.size();
  Contributions contrib(num_forward_values);
  phase = Phase::kBackward;
  overriding = true;

  // The gradients are built under control_dependencies([loss averages]): each gradient op none
  // of whose inputs is another gradient op waits for the averages' NoOp.
  const uint32_t loss_averages_group = options.loss_moving_averages ? loss_averages() : UINT32_MAX;
  phase = Phase::kBackward;
  const std::size_t first_gradient_node = nodes.size();
  backpropagate(contrib, num_forward_nodes);
  if (loss_averages_group != UINT32_MAX) wait_for_loss_averages(loss_averages_group, first_gradient_node);

  // Variable gradients: aggregated per variable, optionally clipped by their global norm.
  std::vector<uint32_t> var_grad = variable_gradients(contrib);
  if (options.clip_gradients) clip_by_global_norm(var_grad);
  apply_gradients(var_grad);
  overriding = false;
  phase = Phase::kForward;
}

// The emission context of `node`'s gradient ops: its block and layer under the name prefix `p`;
// with colocate_gradients_with_ops, the forward op's colocation group too.
void TrainingGraphBuilder::Impl::set_gradient_context(uint32_t node, std::string p) {
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
}

// Sums the gradient contributions of a forward value (TF's AddN), or concatenates the
// IndexedSlices of a sparse variable.
uint32_t TrainingGraphBuilder::Impl::aggregate(Contributions& contrib, uint32_t value) {
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
}

// Seeds the loss's gradient, then runs the gradient function of every forward node, last node
// first, on the sums of its outputs' gradients; what it gives its inputs goes into `contrib`.
void TrainingGraphBuilder::Impl::backpropagate(Contributions& contrib, std::size_t num_forward_nodes) {
  set_gradient_context(values[loss].node, "gradients");
  Value seed = emit1("Fill", ew(1, 1), {}, values[loss].shape);
  contrib[loss].push_back(seed.id);

  for (std::size_t i = num_forward_nodes; i-- > 0;) {
    uint32_t node = static_cast<uint32_t>(i);
    if (!nodes[node].grad) continue;
    GradCtx g{node, {}, {}};
    set_gradient_context(node, "gradients");
    bool any = false;
    std::vector<uint32_t> outs = nodes[node].outputs;
    for (uint32_t o : outs) {
      g.dy.push_back(aggregate(contrib, o));
      any = any || g.dy.back() != UINT32_MAX;
    }
    if (!any) continue;
    set_gradient_context(node, "gradients/" + nodes[node].op.name + "_grad");
    GradFn fn = nodes[node].grad;  // a copy: emitting may reallocate `nodes`
    fn(*this, g);
    for (auto [input, grad] : g.given) {
      uint32_t target = nodes[node].inputs[input];
      if (values[target].requires_grad) contrib[target].push_back(grad);
    }
  }
}

// Under control_dependencies([loss averages]): the gradient ops from `first_gradient_node` on none
// of whose inputs is another gradient op wait for the averages' NoOp.
void TrainingGraphBuilder::Impl::wait_for_loss_averages(uint32_t loss_averages_group, std::size_t first_gradient_node) {
  for (std::size_t n = first_gradient_node; n < nodes.size(); ++n) {
    bool dominated = false;
    for (uint32_t in : nodes[n].inputs) dominated = dominated || values[in].node >= first_gradient_node;
    if (!dominated) nodes[n].controls.push_back(loss_averages_group);
  }
}

// The aggregated gradient of every trainable variable; UINT32_MAX where it has none.
std::vector<uint32_t> TrainingGraphBuilder::Impl::variable_gradients(Contributions& contrib) {
  const std::size_t num_vars = vars.size();
  std::vector<uint32_t> var_grad(num_vars, UINT32_MAX);
  for (std::size_t vi = 0; vi < num_vars; ++vi) {
    if (!vars[vi].trainable) continue;
    set_gradient_context(vars[vi].node, "gradients");
    override_colocation.clear();
    var_grad[vi] = aggregate(contrib, vars[vi].read);  // UINT32_MAX: not on the loss's path, TF applies nothing
  }
  return var_grad;
}

// The optimizer's step after the gradients: the global step and what is computed from it, one
// update per variable gradient, the variables' moving averages, then global_step += 1.
void TrainingGraphBuilder::Impl::apply_gradients(const std::vector<uint32_t>& var_grad) {
  const std::size_t num_vars = var_grad.size();  // the variables before the optimizer's slots and shadows
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
  if (options.global_step) increment_global_step();
}

// Optimizer.apply_gradients: group(updates, name="update"), then global_step += 1.
void TrainingGraphBuilder::Impl::increment_global_step() {
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

}  // namespace placelab::models
