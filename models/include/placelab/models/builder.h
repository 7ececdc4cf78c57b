// TrainingGraphBuilder: describe a network's forward pass layer by layer with shapes, and get the
// whole TensorFlow-1.x-style training step as an OpGraph — forward ops, synthesised gradient ops
// (separate input- and weight-gradient ops that read the forward activations they need, so an
// activation lives until its last gradient reader), gradient aggregation (AddN), optimizer update
// ops with their slot memory, and batch-norm moving-average updates. The model zoo's generators and
// the ONNX importer both describe networks through this one API.
//
//   TrainingGraphBuilder b({.optimizer = Optimizer::kMomentum});
//   auto in = b.input_pipeline({{32, 224, 224, 3}, {32}});      // images NHWC, labels
//   { auto layer = b.layer("conv1", 0);
//     Value w = b.variable("weights", {7, 7, 3, 64});             // r, s, c, k
//     Value y = b.relu(b.batch_norm(b.conv2d(in[0], w, 2, 3, 3), true)); … }
//   b.minimize(b.softmax_cross_entropy(logits, in[1]));
//   OpGraph g = std::move(b).finish();
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/graph/op_graph.h"

namespace placelab::models {

// `op`: one node per TensorFlow 1.x op that runs in a training step. `layer`: the ops of one
// layer scope and phase merged into one node (flops and bytes summed, the kernel of its heaviest
// member), for quick runs.
enum class Granularity : uint8_t { kOp, kLayer };
// kAdamWeightDecay: BERT's optimizer, built from elementwise TF ops per variable (not one
// fused Apply op), with its m and v as slot variables.
enum class Optimizer : uint8_t { kSgd, kMomentum, kRmsProp, kAdam, kAdamWeightDecay };
// kFused: one FusedBatchNorm / FusedBatchNormGrad op (as the TF official ResNet models ran it).
// kDecomposed: moments + batch_normalization elementwise ops and their gradients (TF 1.0 slim).
enum class BatchNormStyle : uint8_t { kFused, kDecomposed };

// Which framework's program the graph is. kTensorFlow: the TF-1 graphs the placement papers ran.
// kPyTorch: the ops a PyTorch training step launches (docs/models.md), so that a prediction can be
// compared with a PyTorch profiler trace op for op: no shape bookkeeping ops, a linear layer is one
// addmm, batch norm updates its running statistics inside its kernel, the loss is log_softmax +
// nll_loss. Op types keep the TF names (Conv2D, FusedBatchNorm, MatMul …) the trace importer maps
// aten ops to.
enum class Framework : uint8_t { kTensorFlow, kPyTorch };
std::string_view framework_name(Framework f);  // "tensorflow", "pytorch"
std::optional<Framework> framework_from_name(std::string_view name);

std::string_view granularity_name(Granularity g);      // "op", "layer"
std::optional<Granularity> granularity_from_name(std::string_view name);
std::string_view optimizer_name(Optimizer o);          // "sgd", "momentum", "rmsprop", "adam", "adamw"
std::optional<Optimizer> optimizer_from_name(std::string_view name);
// Optimizer slot variables per parameter (momentum 1, RMSProp 2: ms and mom, Adam and AdamW 2: m and v).
int optimizer_slots(Optimizer o);

struct BuilderOptions {
  Granularity granularity = Granularity::kOp;
  Optimizer optimizer = Optimizer::kSgd;
  BatchNormStyle batch_norm = BatchNormStyle::kFused;
  // kPyTorch requires batch_norm kFused, shape_ops false and no TF-only bookkeeping (moving
  // averages, global step, TF's AdamWeightDecay ops); TrainingGraphBuilder checks. Gradient
  // clipping stays: torch.nn.utils.clip_grad_norm_ computes the same global norm.
  Framework framework = Framework::kTensorFlow;
  // TF's colocate_gradients_with_ops: each gradient op gets the colocation key of the forward op
  // it differentiates (forward ops then carry their own name as key).
  bool colocate_gradients_with_ops = false;
  // tf.train.ExponentialMovingAverage over the trainable variables after each update (the
  // CIFAR-10 tutorial and tensorflow/models/inception did): a shadow variable and 3 ops per variable.
  bool variable_moving_averages = false;
  // tf.clip_by_global_norm of all gradients before the updates (the seq2seq and BERT scripts).
  bool clip_gradients = false;
  // Emit the shape bookkeeping ops TF 1.0–1.2 gradient functions built and ran every step before
  // Grappler folded them: Shape, BroadcastGradientArgs and the reduction-index ops, plus the
  // Sum/Reshape pair on each side of every binary op's gradient even when nothing broadcasts.
  // They carry noop kernels (no FLOPs) but are real ops with data edges.
  bool shape_ops = false;
  // Optimizer.apply_gradients(grads, global_step=global_step) as cifar10.train() calls it: an int64
  // `global_step` variable (tf.train.get_or_create_global_step), a NoOp grouping the update ops and
  // global_step's AssignAdd after that NoOp. With variable_moving_averages the averages decay with
  // num_updates = global_step (decay = min(d, (1 + n) / (10 + n)): Cast, add, add, truediv, Minimum
  // once, and 1 - decay, a Sub, per variable), are grouped by a NoOp, and a final NoOp (`train`)
  // waits for the updates and the averages.
  bool global_step = false;
  // tf.train.exponential_decay(lr, global_step, …, staircase=True) computed every step (Cast,
  // truediv, Floor, Pow, Mul) and read by every update op. Needs global_step and a fused Apply
  // optimizer (not kAdamWeightDecay).
  bool exponential_decay_learning_rate = false;
  // The CIFAR-10 tutorial's _add_loss_summaries: tf.train.ExponentialMovingAverage(0.9) of each
  // term of the total loss and of the total loss (a shadow variable with sub, mul, AssignSub each),
  // grouped by a NoOp that the gradient ops wait for (they are built under its control
  // dependency). The summaries that read the averages do not run in a step and are not emitted.
  bool loss_moving_averages = false;
};

// Dimensions of a tensor, outermost first (NHWC for images, [batch, features] for dense layers).
using Shape = std::vector<int64_t>;
int64_t num_elements(const Shape& shape);
// "[32,224,224,3]": a shape in messages.
std::string shape_text(const Shape& shape);

// A forward tensor handle; valid only with the builder that returned it.
struct Value {
  uint32_t id = UINT32_MAX;
  bool valid() const { return id != UINT32_MAX; }
};

// Summary of what the builder produced, for reports and tests.
struct BuildStats {
  int64_t parameters = 0;          // elements of trainable variables
  double forward_flops = 0;        // FP32 flops of forward ops (multiply-add = 2)
};

class TrainingGraphBuilder {
 public:
  explicit TrainingGraphBuilder(BuilderOptions options = {});
  ~TrainingGraphBuilder();
  TrainingGraphBuilder(TrainingGraphBuilder&&) noexcept;
  TrainingGraphBuilder& operator=(TrainingGraphBuilder&&) noexcept;

  const BuilderOptions& options() const;

  // --- Scopes. Both prefix op names ("mixed_5b/branch1x1/Conv2D"); they nest and end when the
  // returned guard is destroyed.
  class ScopeGuard {
   public:
    explicit ScopeGuard(TrainingGraphBuilder* b) : b_(b) {}
    ScopeGuard(ScopeGuard&& o) noexcept : b_(o.b_) { o.b_ = nullptr; }
    ScopeGuard(const ScopeGuard&) = delete;
    ScopeGuard& operator=(const ScopeGuard&) = delete;
    ScopeGuard& operator=(ScopeGuard&&) = delete;
    ~ScopeGuard();

   private:
    TrainingGraphBuilder* b_;
  };
  // A name scope only.
  [[nodiscard]] ScopeGuard scope(std::string_view name);
  // A layer: a name scope that is also the unit of `layer` granularity, and sets Op::layer (the
  // model layer used by expert placements; -1 keeps the enclosing one). The gradient and update
  // ops of the layer's forward ops and variables inherit both.
  [[nodiscard]] ScopeGuard layer(std::string_view name, int32_t layer_id = -1);

  // --- Inputs and variables.
  // One cpu_only input-pipeline op producing one tensor per shape: by default a tf.data
  // IteratorGetNext; a queue-based pipeline passes its dequeue op's type (QueueDequeueManyV2) and
  // the queue's handle as `inputs`.
  std::vector<Value> input_pipeline(const std::vector<Shape>& shapes, std::string_view type = "IteratorGetNext",
                                    const std::vector<Value>& inputs = {});
  // One op of a TF 1.x queue runner's producer graph (reader, decoding, preprocessing, enqueue):
  // cpu_only, forward phase, no gradient, not counted in BuildStats::forward_flops. Those threads
  // run concurrently with every step, so the graph holds each op once with the work of one step's
  // worth of examples in `kernel`; nothing in the step waits for it (the dequeue reads the queue,
  // not the enqueue). Outputs have `element_bytes` per element (1 for uint8 records, 0 for
  // resource handles).
  std::vector<Value> queue_runner_op(std::string_view type, KernelSignature kernel, const std::vector<Value>& inputs,
                                     const std::vector<Shape>& outputs, int64_t element_bytes = 4);
  // A trainable variable (VariableV2 with its bytes as persistent memory, colocated with its
  // Identity read, its gradient aggregation and its update op); returns the read.
  // Its gradient is applied with options().optimizer; the update op holds the slot memory.
  Value variable(std::string_view name, const Shape& shape);
  // A non-trainable variable (e.g. batch-norm moving statistics): persistent, never updated by
  // the optimizer, not counted as a parameter.
  Value non_trainable_variable(std::string_view name, const Shape& shape);
  // L2 weight decay on a trainable variable (its read), as the TF 1.x models added it:
  // L2Loss · decay added to the loss at minimize(); its gradient ops run every step.
  void add_weight_decay(Value variable_read, double decay);

  // --- Forward ops. Each records how to differentiate itself; shapes are checked with
  // PLACELAB_CHECK (a generator bug, not user input). Scalar constants (a scale factor, a dropout
  // rate, a decay) document the computation only: no op's cost depends on their value.
  // x NHWC [n,h,w,c], w [r,s,c,k]; zero padding pad_h/pad_w on both sides.
  Value conv2d(Value x, Value w, int64_t stride, int64_t pad_h, int64_t pad_w);
  // A convolution with a bias: TF Conv2D + BiasAdd; PyTorch one Conv2D (cuDNN adds the bias).
  Value conv2d_bias(Value x, Value w, Value bias, int64_t stride, int64_t pad_h, int64_t pad_w);
  // a [..., m, k] · b [k, n] (a 2-D b is shared across the leading dims of a, as a dense layer),
  // or batched a [B..., m, k] · b [B..., k, n]; transpose_b takes b as [..., n, k].
  Value matmul(Value a, Value b, bool transpose_b = false);
  Value bias_add(Value x, Value bias);  // bias over the last dimension
  // TF: MatMul + BiasAdd. PyTorch: one addmm ("MatMul", bias folded in; its gradient: two
  // MatMuls and the bias's Sum over the batch, as AddmmBackward0 runs them).
  Value dense(Value x, Value w, Value bias);
  // Batch normalisation over all but the last axis, training mode; creates beta (and gamma when
  // `scale`), moving_mean and moving_variance in the current scope plus their moving-average
  // update ops. Style per options().batch_norm.
  Value batch_norm(Value x, bool scale);
  // Layer normalisation over the last axis (decomposed as tf.contrib.layers.layer_norm), with
  // gamma and beta variables.
  Value layer_norm(Value x);
  Value relu(Value x);
  Value sigmoid(Value x);
  Value tanh(Value x);
  // PyTorch form only: F.gelu, one kernel (its gradient one more).
  Value gelu(Value x);
  Value rsqrt(Value x);
  Value add(Value a, Value b);         // numpy broadcasting on every binary op
  Value sub(Value a, Value b);
  Value mul(Value a, Value b);
  Value squared_difference(Value a, Value b);
  Value scale(Value x, double factor);  // x * constant
  Value add_constant(Value x, double c);
  Value pow(Value x, double exponent);
  Value zeros(const Shape& shape);  // a tensor of zeros (TF's zeros / Fill), no gradient
  // tf.cast (an elementwise Cast), e.g. of labels to int64; the gradient passes through a Cast.
  Value cast(Value x);
  Value stop_gradient(Value x);
  // tf.nn.dropout in training: random_uniform, add keep_prob, floor, x / keep_prob · mask. The
  // mask lives until the gradient reads it.
  Value dropout(Value x, double rate);
  Value add_n(const std::vector<Value>& values);
  Value reduce_mean(Value x, const std::vector<int>& axes, bool keep_dims);
  Value reduce_sum(Value x, const std::vector<int>& axes, bool keep_dims);
  Value softmax(Value x);               // over the last axis
  Value concat(const std::vector<Value>& values, int axis);
  std::vector<Value> split(Value x, int axis, int parts);
  Value reshape(Value x, const Shape& shape);
  Value transpose(Value x, const std::vector<int>& perm);
  // tf.slice: the block of `size` elements per axis starting at `begin` (a copy of the block);
  // its gradient is a Pad of dy back to x's shape. begin[i] + size[i] <= x's dimension i.
  Value slice(Value x, const Shape& begin, const Shape& size);
  // tf.broadcast_to: x repeated to `shape` (numpy broadcasting; a copy of the result); its
  // gradient sums dy back to x's shape.
  Value broadcast_to(Value x, const Shape& shape);
  // tf.where(cond, a, c): elementwise choice of a or c where cond holds, all three broadcast
  // together (numpy). cond gets no gradient; a's and c's are Selects of dy summed to their shapes.
  Value select(Value cond, Value a, Value c);
  // tf.pad with zeros: `before[i]` and `after[i]` elements added on axis i (a copy into the larger
  // tensor); its gradient is a Slice of dy. One entry per axis, each >= 0.
  Value pad(Value x, const Shape& before, const Shape& after);
  // Pooling over NHWC windows k×k.
  Value max_pool(Value x, int64_t k, int64_t stride, int64_t pad);
  Value avg_pool(Value x, int64_t k, int64_t stride, int64_t pad);
  // Local response normalisation over the channels (depth_radius each side), NHWC.
  Value lrn(Value x, int64_t depth_radius);
  // Rows of `table` [rows, dim] at `ids` (any shape); result shape ids ++ [dim]. The table's
  // gradient is sparse (IndexedSlices), applied by a SparseApply op.
  Value gather(Value table, Value ids);
  // Mean sparse softmax cross-entropy of logits [n, classes] against labels [n]; a scalar.
  Value softmax_cross_entropy(Value logits, Value labels);

  // --- Composites of the ops above, as TensorFlow 1.x built them.
  struct LstmState {
    Value h, c;
  };
  // BasicLSTMCell: concat([x, h]) · kernel [in+units, 4·units] + bias, split i, j, f, o;
  // c' = c·σ(f + 1) + σ(i)·tanh(j), h' = σ(o)·tanh(c'). An invalid state means zeros.
  LstmState lstm_cell(Value x, LstmState state, Value kernel, Value bias);

  // Marks the scalar `loss` as the training objective. Call once.
  void minimize(Value loss);

  Shape shape(Value v) const;
  // Finishes the graph: gradients from the loss back to every variable, aggregation and update
  // ops; then merges to layer granularity when asked. The builder is empty afterwards.
  OpGraph finish() &&;
  // Available after finish() too.
  BuildStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace placelab::models
