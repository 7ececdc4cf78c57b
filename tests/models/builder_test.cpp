#include "placelab/models/builder.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "placelab/core/error.h"

namespace placelab::models {
namespace {

// A two-layer perceptron: x [8,4] · w1 [4,16] → relu → · w2 [16,3] → cross-entropy.
OpGraph mlp(BuilderOptions options) {
  TrainingGraphBuilder b(options);
  auto in = b.input_pipeline({{8, 4}, {8}});
  Value h;
  {
    auto l = b.layer("fc1", 0);
    h = b.relu(b.dense(in[0], b.variable("weights", {4, 16}), b.variable("biases", {16})));
  }
  Value logits;
  {
    auto l = b.layer("fc2", 1);
    logits = b.dense(h, b.variable("weights", {16, 3}), b.variable("biases", {3}));
  }
  b.minimize(b.softmax_cross_entropy(logits, in[1]));
  return std::move(b).finish();
}

const Op& op_named(const OpGraph& g, std::string_view name) {
  auto id = g.find(name);
  if (!id) throw Error("no op " + std::string(name));
  return g.op(*id);
}

TEST(TrainingGraphBuilder, SynthesisesSeparateInputAndWeightGradients) {
  OpGraph g = mlp({.optimizer = Optimizer::kAdam});
  // fc2's weight gradient is aᵀ·dy: gemm{m=16, n=3, k=8}; its input gradient dy·wᵀ: {8, 16, 3}.
  const Op& dw = op_named(g, "gradients/fc2/MatMul_grad/MatMul_1");
  EXPECT_EQ(dw.kernel, KernelSignature::gemm(16, 3, 8));
  EXPECT_EQ(dw.phase, Phase::kBackward);
  EXPECT_EQ(dw.layer, 1);
  const Op& dx = op_named(g, "gradients/fc2/MatMul_grad/MatMul");
  EXPECT_EQ(dx.kernel, KernelSignature::gemm(8, 16, 3));
  // fc1's input is data: only its weight gradient is computed.
  EXPECT_EQ(op_named(g, "gradients/fc1/MatMul_grad/MatMul").kernel, KernelSignature::gemm(4, 16, 8));
  int fc1_grads = 0;
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).name.starts_with("gradients/fc1/MatMul_grad/")) ++fc1_grads;
  EXPECT_EQ(fc1_grads, 1);
  // The weight gradient reads the forward activation (relu output) it needs.
  bool reads_relu = false;
  g.for_each_in_edge(*g.find("gradients/fc2/MatMul_grad/MatMul_1"),
                     [&](OpId src, const Tensor& t) { reads_relu |= g.op(src).name == "fc1/Relu" && t.bytes == 8 * 16 * 4; });
  EXPECT_TRUE(reads_relu);
}

TEST(TrainingGraphBuilder, UpdatesHoldSlotMemoryAndAreColocatedWithTheirVariable) {
  OpGraph g = mlp({.optimizer = Optimizer::kAdam});
  const Op& var = op_named(g, "fc1/weights");
  const Op& read = op_named(g, "fc1/weights/read");
  const Op& apply = op_named(g, "Adam/update_fc1/weights/ApplyAdam");
  EXPECT_EQ(var.persistent_bytes, 4 * 16 * 4);
  EXPECT_EQ(apply.persistent_bytes, 2 * 4 * 16 * 4);  // m and v
  EXPECT_EQ(apply.phase, Phase::kUpdate);
  EXPECT_EQ(var.colocation, "fc1/weights");
  EXPECT_EQ(read.colocation, var.colocation);
  EXPECT_EQ(apply.colocation, var.colocation);
  OpGraph sgd = mlp({.optimizer = Optimizer::kSgd});
  EXPECT_EQ(op_named(sgd, "GradientDescent/update_fc1/weights/ApplyGradientDescent").persistent_bytes, 0);
  EXPECT_TRUE(op_named(g, "input/IteratorGetNext").cpu_only);
}

TEST(TrainingGraphBuilder, EveryOpFlopsMatchItsKernelAndTheGraphIsAcyclic) {
  OpGraph g = mlp({});
  for (OpId v = 0; v < g.num_ops(); ++v) EXPECT_DOUBLE_EQ(g.op(v).flops, kernel_flops(g.op(v).kernel)) << g.op(v).name;
  EXPECT_NO_THROW(g.topological_order());
}

TEST(TrainingGraphBuilder, LayerGranularityHasOneOpPerLayerAndPhase) {
  OpGraph ops = mlp({.optimizer = Optimizer::kMomentum});
  OpGraph layers = mlp({.granularity = Granularity::kLayer, .optimizer = Optimizer::kMomentum});
  EXPECT_TRUE(layers.find("fc1/forward"));
  EXPECT_TRUE(layers.find("fc1/backward"));
  EXPECT_TRUE(layers.find("fc2/update"));
  EXPECT_LT(layers.num_ops(), ops.num_ops() / 2);
  EXPECT_NEAR(layers.total_flops(), ops.total_flops(), 1e-6 * ops.total_flops());
  EXPECT_EQ(layers.total_persistent_bytes(), ops.total_persistent_bytes());
  EXPECT_NO_THROW(layers.topological_order());
}

TEST(TrainingGraphBuilder, SharedWeightsAccumulateGradientsWithAddN) {
  TrainingGraphBuilder b;
  auto in = b.input_pipeline({{2, 3}, {2}});
  Value w = b.variable("w", {3, 3});
  Value x = b.matmul(b.matmul(in[0], w), w);
  b.minimize(b.softmax_cross_entropy(x, in[1]));
  OpGraph g = std::move(b).finish();
  EXPECT_EQ(op_named(g, "gradients/AddN").kernel, KernelSignature::elementwise(9, 2));
}

TEST(TrainingGraphBuilder, ColocatesGradientsWithTheirForwardOpsWhenAsked) {
  OpGraph g = mlp({.colocate_gradients_with_ops = true});
  EXPECT_EQ(op_named(g, "fc2/MatMul").colocation, "fc2/MatMul");
  EXPECT_EQ(op_named(g, "gradients/fc2/MatMul_grad/MatMul_1").colocation, "fc2/MatMul");
  EXPECT_TRUE(op_named(mlp({}), "gradients/fc2/MatMul_grad/MatMul_1").colocation.empty());
}

TEST(TrainingGraphBuilder, ClippingMakesEveryUpdateWaitForTheGlobalNorm) {
  OpGraph g = mlp({.clip_gradients = true});
  OpId norm = *g.find("global_norm/Sum");
  // Every update is reachable from the global norm.
  std::vector<bool> reach(g.num_ops(), false);
  reach[norm] = true;
  for (OpId v : g.topological_order())
    if (reach[v]) g.for_each_out_edge(v, [&](OpId w, const Tensor&) { reach[w] = true; });
  int updates = 0;
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).type == "ApplyGradientDescent") {
      EXPECT_TRUE(reach[v]) << g.op(v).name;
      ++updates;
    }
  EXPECT_EQ(updates, 4);
}

// Whether `to` is reachable from `from` along data and control edges.
bool reaches(const OpGraph& g, OpId from, OpId to) {
  std::vector<bool> reach(g.num_ops(), false);
  reach[from] = true;
  for (OpId v : g.topological_order())
    if (reach[v]) g.for_each_out_edge(v, [&](OpId w, const Tensor&) { reach[w] = true; });
  return reach[to];
}

TEST(TrainingGraphBuilder, CifarTrainStepBookkeepingRunsInOrder) {
  OpGraph g = mlp({.variable_moving_averages = true, .global_step = true, .exponential_decay_learning_rate = true,
                   .loss_moving_averages = true});
  EXPECT_NO_THROW(g.topological_order());
  // The gradients wait for the loss averages; the step ends with `train` after the global_step
  // increment, which follows every update, and after the variables' averages.
  EXPECT_TRUE(reaches(g, *g.find("avg"), *g.find("gradients/Fill")));
  OpId train = *g.find("train");
  EXPECT_TRUE(reaches(g, *g.find("GradientDescent"), train));
  EXPECT_TRUE(reaches(g, *g.find("ExponentialMovingAverage"), train));
  EXPECT_EQ(op_named(g, "global_step").persistent_bytes, 8);
  int updates = 0;
  for (OpId v = 0; v < g.num_ops(); ++v) {
    if (g.op(v).type != "ApplyGradientDescent") continue;
    ++updates;
    EXPECT_TRUE(reaches(g, *g.find("ExponentialDecay"), v)) << g.op(v).name;  // reads the learning rate
    EXPECT_TRUE(reaches(g, v, *g.find("GradientDescent"))) << g.op(v).name;
  }
  EXPECT_EQ(updates, 4);
  // Without the options none of it.
  OpGraph plain = mlp({});
  EXPECT_FALSE(plain.find("train") || plain.find("global_step") || plain.find("avg"));
}

TEST(TrainingGraphBuilder, QueueRunnerOpsAreCpuOnlyAndOffTheStepsPath) {
  TrainingGraphBuilder b;
  Value queue;
  {
    auto l = b.layer("producer");
    queue = b.queue_runner_op("RandomShuffleQueueV2", KernelSignature::noop(), {}, {{}}, 0)[0];
    Value img = b.queue_runner_op("DecodeRaw", KernelSignature::copy(8 * 16), {}, {{8, 16}}, 1)[0];
    b.queue_runner_op("QueueEnqueueV2", KernelSignature::copy(8 * 16), {queue, img}, {});
  }
  auto in = b.input_pipeline({{8, 4}, {8}}, "QueueDequeueManyV2", {queue});
  b.minimize(b.softmax_cross_entropy(b.dense(in[0], b.variable("w", {4, 3}), b.variable("b", {3})), in[1]));
  EXPECT_EQ(b.stats().forward_flops, 2.0 * 8 * 4 * 3 + 8 * 3 * 2 + 5 * 8 * 3 + 8);  // the network's only
  OpGraph g = std::move(b).finish();
  EXPECT_TRUE(op_named(g, "producer/DecodeRaw").cpu_only);
  EXPECT_EQ(op_named(g, "producer/DecodeRaw").output_bytes, 8 * 16);  // uint8
  EXPECT_TRUE(op_named(g, "input/QueueDequeueManyV2").cpu_only);
  EXPECT_FALSE(reaches(g, *g.find("producer/QueueEnqueueV2"), *g.find("input/QueueDequeueManyV2")));
}

TEST(TrainingGraphBuilder, AdamWeightDecayIsBuiltFromElementwiseOpsWithSlotVariables) {
  OpGraph g = mlp({.optimizer = Optimizer::kAdamWeightDecay});
  EXPECT_EQ(op_named(g, "fc1/weights/adam_m").persistent_bytes, 4 * 16 * 4);
  EXPECT_EQ(op_named(g, "fc1/weights/adam_v").persistent_bytes, 4 * 16 * 4);
  int assigns = 0;
  for (OpId v = 0; v < g.num_ops(); ++v) {
    EXPECT_NE(g.op(v).type, "ApplyAdam");
    if (g.op(v).type == "Assign") ++assigns;
  }
  EXPECT_EQ(assigns, 3 * 4);  // variable, m and v of each of the four variables
}

TEST(TrainingGraphBuilder, TheImageInputGetsNoGradient) {
  TrainingGraphBuilder b;
  auto in = b.input_pipeline({{2, 8, 8, 3}, {2}});
  Value y = b.relu(b.conv2d(in[0], b.variable("w", {3, 3, 3, 4}), 1, 1, 1));
  b.minimize(b.softmax_cross_entropy(b.reshape(y, {2, 8 * 8 * 4}), in[1]));
  OpGraph g = std::move(b).finish();
  int filter = 0, input = 0;
  for (OpId v = 0; v < g.num_ops(); ++v) {
    filter += g.op(v).kernel.cls == KernelClass::kConv2DBackpropFilter;
    input += g.op(v).kernel.cls == KernelClass::kConv2DBackpropInput;
  }
  EXPECT_EQ(filter, 1);
  EXPECT_EQ(input, 0);
}

TEST(TrainingGraphBuilder, SliceAndPadCopyTheirBlockAndGradientsAreEachOther) {
  // x [2,6] · w [6,8] → slice columns 2..5 → pad 1 row above → [3,4] → loss over 3 rows.
  TrainingGraphBuilder b;
  auto in = b.input_pipeline({{2, 6}, {3}});
  Value y = b.matmul(in[0], b.variable("w", {6, 8}));
  Value s = b.slice(y, {0, 2}, {2, 4});
  Value p = b.pad(s, {1, 0}, {0, 0});
  EXPECT_EQ(b.shape(p), (Shape{3, 4}));
  EXPECT_EQ(b.slice(y, {0, 0}, {2, 8}).id, y.id);  // the whole tensor: no op
  EXPECT_THROW(b.slice(y, {0, 6}, {2, 4}), Error);  // past the end
  b.minimize(b.softmax_cross_entropy(p, in[1]));
  OpGraph g = std::move(b).finish();
  std::map<std::string, std::vector<KernelSignature>> copies;  // by type, forward then backward
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).type == "Slice" || g.op(v).type == "Pad") copies[g.op(v).type].push_back(g.op(v).kernel);
  using K = KernelSignature;
  // Slice forward copies 2·4 floats, its gradient pads back to 2·8; Pad forward writes 3·4, its
  // gradient slices 2·4.
  EXPECT_EQ(copies["Slice"], (std::vector<K>{K::copy(32), K::copy(32)}));
  EXPECT_EQ(copies["Pad"], (std::vector<K>{K::copy(48), K::copy(64)}));
}

TEST(TrainingGraphBuilder, BroadcastToAndSelectSumTheirGradientsBackToEachInput) {
  // y [2,4] = x · w; broadcast_to [3,2,4]; select(mask [2,4], that, bias [4]) → loss over 6 rows.
  TrainingGraphBuilder b;
  auto in = b.input_pipeline({{2, 6}, {6}});
  Value y = b.matmul(in[0], b.variable("w", {6, 4}));
  Value wide = b.broadcast_to(y, {3, 2, 4});
  EXPECT_EQ(b.broadcast_to(y, {2, 4}).id, y.id);  // the same shape: no op
  EXPECT_THROW(b.broadcast_to(y, {2, 3}), Error);
  Value mask = b.non_trainable_variable("mask", {2, 4});
  Value picked = b.select(mask, wide, b.variable("bias", {4}));
  EXPECT_EQ(b.shape(picked), (Shape{3, 2, 4}));
  b.minimize(b.softmax_cross_entropy(b.reshape(picked, {6, 4}), in[1]));
  OpGraph g = std::move(b).finish();
  using K = KernelSignature;
  std::map<std::string, std::vector<K>> ops;
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).type == "BroadcastTo" || g.op(v).type == "Select" || g.op(v).type == "Sum")
      ops[g.op(v).type].push_back(g.op(v).kernel);
  EXPECT_EQ(ops["BroadcastTo"], (std::vector<K>{K::copy(96)}));
  // The forward Select and one per side that needs a gradient (not the mask).
  EXPECT_EQ(ops["Select"], (std::vector<K>(3, K::elementwise(24, 3))));
  // Sums: the bias side [3,2,4] → [4], then BroadcastTo's [3,2,4] → [2,4].
  EXPECT_EQ(ops["Sum"], (std::vector<K>{K::reduction(24, 4), K::reduction(24, 8)}));
}

TEST(TrainingGraphBuilder, ShapeErrorsAreReported) {
  TrainingGraphBuilder b;
  auto in = b.input_pipeline({{2, 3}});
  Value w = b.variable("w", {4, 3});
  EXPECT_THROW(b.matmul(in[0], w), Error);
}

}  // namespace
}  // namespace placelab::models
