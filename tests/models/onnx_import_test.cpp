// ONNX import: fixtures are ModelProtos built here with the ONNX C++ API and written to a temp
// dir, or the files under tests/data/onnx/ that scripts/make-onnx-fixtures.py writes with
// python3-onnx; real PyTorch exports are read only when their variables name them.
// Expected parameter counts and FLOPs are computed by hand from the kernel formulas of
// graph/kernel.h: gemm 2·m·n·k, conv 2·n·k·c·r·s·ho·wo, elementwise elements·inputs,
// reduction elements, softmax 5·rows·cols.
#include "placelab/models/onnx_import.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "placelab/core/error.h"
#include "placelab/models/zoo.h"
#include "onnx_fixtures.h"

namespace placelab::models {
namespace {

using namespace placelab::models::testing;  // NOLINT: the fixtures' builder and helpers

[[maybe_unused]] ::testing::Environment* const kRemoveTestDir = ::testing::AddGlobalTestEnvironment(new RemoveTestDir);

TEST(OnnxImport, TinyCnnHasHandCountedParametersAndFlops) {
  OnnxImportOptions options;
  options.batch = 2;
  OnnxImportReport report;
  OpGraph g = import_onnx(tiny_cnn().save("tiny_cnn.onnx"), options, &report);
  EXPECT_EQ(report.stats.parameters, kTinyCnnParams);
  EXPECT_DOUBLE_EQ(report.stats.forward_flops, tiny_cnn_flops(2));
  EXPECT_EQ(report.opset, 13);
  EXPECT_EQ(report.producer, "placelab-test");
  EXPECT_EQ(report.inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(report.logits, "logits");
  EXPECT_TRUE(report.approximations.empty()) << report.brief_report();
  std::map<std::string, int64_t> counts{{"Conv", 1}, {"BatchNormalization", 1}, {"Relu", 1}, {"MaxPool", 1},
                                        {"GlobalAveragePool", 1}, {"Flatten", 1}, {"Gemm", 1}};
  EXPECT_EQ(report.op_counts, counts);
  // NCHW [2,3,8,8] with 4 filters 3×3, pad 1 → the builder's NHWC conv of the same size.
  const Op* conv = find_type(g, "Conv2D");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->kernel, KernelSignature::conv2d(KernelClass::kConv2D, 2, 3, 8, 8, 4, 3, 3, 1, 1));
  EXPECT_EQ(count_type(g, "Conv2DBackpropFilter"), 1);
  EXPECT_EQ(count_type(g, "Conv2DBackpropInput"), 0);  // its input is data
  EXPECT_EQ(count_type(g, "FusedBatchNormGrad"), 1);
  // One SGD update per trainable variable: conv w, b; gamma, beta; fc w, b.
  EXPECT_EQ(count_type(g, "ApplyGradientDescent"), 6);
  EXPECT_EQ(count_type(g, "SparseSoftmaxCrossEntropyWithLogits"), 1);
  EXPECT_NO_THROW(g.topological_order());
}

TEST(OnnxImport, EqualsTheSameNetworkDescribedToTheBuilder) {
  OnnxImportOptions options;
  options.batch = 3;
  options.optimizer = Optimizer::kMomentum;
  OnnxImportReport report;
  OpGraph imported = import_onnx(tiny_cnn().save("tiny_cnn_b3.onnx"), options, &report);

  TrainingGraphBuilder b({.optimizer = Optimizer::kMomentum, .shape_ops = options.shape_ops});
  auto in = b.input_pipeline({{3, 8, 8, 3}, {3}});
  Value x = b.conv2d(in[0], b.variable("w", {3, 3, 3, 4}), 1, 1, 1);
  x = b.relu(b.batch_norm(b.bias_add(x, b.variable("b", {4})), true));
  x = b.avg_pool(b.max_pool(x, 2, 2, 0), 4, 1, 0);
  x = b.reshape(x, {3, 4});
  Value logits = b.bias_add(b.matmul(x, b.variable("fc_w", {10, 4}), true), b.variable("fc_b", {10}));
  b.minimize(b.softmax_cross_entropy(logits, in[1]));
  OpGraph direct = std::move(b).finish();

  EXPECT_EQ(imported.num_ops(), direct.num_ops());
  EXPECT_EQ(imported.num_edges(), direct.num_edges());
  EXPECT_DOUBLE_EQ(imported.total_flops(), direct.total_flops());
  EXPECT_EQ(imported.total_persistent_bytes(), direct.total_persistent_bytes());
  EXPECT_EQ(report.stats.parameters, b.stats().parameters);
}

TEST(OnnxImport, BatchOverrideScalesWorkNotParameters) {
  ModelMaker m = tiny_cnn();
  // A static first dimension is replaced too, also where the exporter wrote it into the output's
  // shape (torch.onnx.export without dynamic_axes writes y [1, 10]).
  m.model().mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(1);
  auto* y = m.model().mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  y->add_dim()->set_dim_value(1);
  y->add_dim()->set_dim_value(10);
  fs::path p = m.save("tiny_cnn_static.onnx");
  OnnxImportReport one, eight;
  import_onnx(p, {}, &one);
  OnnxImportOptions options;
  options.batch = 8;
  import_onnx(p, options, &eight);
  EXPECT_EQ(one.stats.parameters, eight.stats.parameters);
  EXPECT_DOUBLE_EQ(one.stats.forward_flops, tiny_cnn_flops(1));
  EXPECT_DOUBLE_EQ(eight.stats.forward_flops, tiny_cnn_flops(8));
}

TEST(OnnxImport, MlpHasHandCountedParametersAndFlops) {
  OnnxImportOptions options;
  options.optimizer = Optimizer::kAdam;
  OnnxImportReport report;
  OpGraph g = import_onnx(mlp().save("mlp.onnx"), options, &report);
  EXPECT_EQ(report.stats.parameters, 512 + 32 + 320 + 10);
  // MatMul 2·4·32·16, Add 128·2, Relu 128, MatMul 2·4·10·32, BiasAdd 40·2, softmax 5·40, Mean 4.
  EXPECT_DOUBLE_EQ(report.stats.forward_flops, 4096 + 256 + 128 + 2560 + 80 + 200 + 4);
  EXPECT_EQ(count_type(g, "ApplyAdam"), 4);
  // Adam keeps m and v: 2 slots of 4 bytes per parameter on the update ops.
  int64_t slots = 0;
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).type == "ApplyAdam") slots += g.op(v).persistent_bytes;
  EXPECT_EQ(slots, 2 * 4 * (512 + 32 + 320 + 10));
  // Both layers' scopes come from the node names.
  EXPECT_TRUE(g.find("fc1/MatMul").has_value());
  EXPECT_TRUE(g.find("fc2/MatMul").has_value());
}

TEST(OnnxImport, LayerGranularityMergesEachNodeScope) {
  fs::path p = mlp().save("mlp_layers.onnx");
  OnnxImportOptions layer;
  layer.granularity = Granularity::kLayer;
  OnnxImportReport r_op, r_layer;
  OpGraph ops = import_onnx(p, {}, &r_op);
  OpGraph layers = import_onnx(p, layer, &r_layer);
  EXPECT_LT(layers.num_ops(), ops.num_ops());
  EXPECT_DOUBLE_EQ(layers.total_flops(), ops.total_flops());
  EXPECT_TRUE(layers.find("fc1/forward").has_value());
  EXPECT_TRUE(layers.find("fc2/backward").has_value());
}

TEST(OnnxImport, MapsElementwiseShapeAndNormalisationOps) {
  // x [2,6] · w → Mul 0.5 → Erf (approximated) → Add → Unsqueeze → Transpose → Squeeze → Softmax.
  ModelMaker m;
  m.input("x", {2, 6});
  m.init("half", {});
  m.init("w", {6, 6});
  m.init_ints("axes", {1});
  m.node("MatMul", {"x", "w"}, {"xw"});
  m.node("Mul", {"xw", "half"}, {"a"});
  m.node("Erf", {"a"}, {"e"});
  m.node("Add", {"e", "xw"}, {"s"});
  m.node("Unsqueeze", {"s", "axes"}, {"u"});  // [2,1,6]
  auto& t = m.node("Transpose", {"u"}, {"t"});
  ModelMaker::ints(t, "perm", {1, 0, 2});  // [1,2,6]
  m.init_ints("axes0", {0});
  m.node("Squeeze", {"t", "axes0"}, {"sq"});  // [2,6]
  m.node("Softmax", {"sq"}, {"y"});
  m.output("y");
  OnnxImportReport report;
  OpGraph g = import_onnx(m.save("elementwise.onnx"), {}, &report);
  ASSERT_EQ(report.approximations.size(), 1u) << report.brief_report();
  EXPECT_EQ(report.approximations[0].op_type, "Erf");
  EXPECT_NE(report.approximations[0].how.find("Tanh"), std::string::npos);
  EXPECT_EQ(count_type(g, "Tanh"), 1);
  EXPECT_EQ(count_type(g, "TanhGrad"), 1);
  EXPECT_EQ(count_type(g, "Transpose"), 2);  // forward and its gradient
  EXPECT_EQ(count_type(g, "Softmax"), 1);
  // Only w is a parameter: the scalar 0.5 is folded into the Mul kernel, axes are shape data.
  EXPECT_EQ(report.stats.parameters, 36);
}

TEST(OnnxImport, ChannelsFirstOpsMapToTheBuilderChannelsLastLayout) {
  // Concat on channels, Add of a per-channel constant [C,1,1], and a NCHW→NHWC Transpose that the
  // builder's channels-last value already satisfies (no op).
  ModelMaker m;
  m.input("x", {2, 3, 4, 4});
  m.init("wa", {5, 3, 1, 1});
  m.init("wb", {2, 3, 1, 1});
  m.init("bias", {7, 1, 1});
  m.init("fc", {7, 3});
  m.node("Conv", {"x", "wa"}, {"a"});
  m.node("Conv", {"x", "wb"}, {"b"});
  auto& cat = m.node("Concat", {"a", "b"}, {"c"});
  ModelMaker::integer(cat, "axis", 1);
  m.node("Add", {"c", "bias"}, {"d"});
  auto& t = m.node("Transpose", {"d"}, {"nhwc"});
  ModelMaker::ints(t, "perm", {0, 2, 3, 1});  // [2,4,4,7]
  m.node("MatMul", {"nhwc", "fc"}, {"y"});    // [2,4,4,3]
  m.output("y");
  OnnxImportReport report;
  OpGraph g = import_onnx(m.save("channels.onnx"), {}, &report);
  EXPECT_EQ(report.stats.parameters, 15 + 6 + 7 + 21);
  const Op* cat_op = find_type(g, "ConcatV2");
  ASSERT_NE(cat_op, nullptr);
  EXPECT_EQ(cat_op->output_bytes, 2 * 4 * 4 * 7 * 4);
  EXPECT_EQ(count_type(g, "Transpose"), 0);
  // The loss flattens [2,4,4,3] into 32 rows of 3 classes.
  const Op* xent = find_type(g, "SparseSoftmaxCrossEntropyWithLogits");
  ASSERT_NE(xent, nullptr);
  EXPECT_EQ(xent->kernel, KernelSignature::softmax(32, 3));
  EXPECT_EQ(find_type(g, "MatMul")->kernel, KernelSignature::gemm(32, 3, 7));
}

TEST(OnnxImport, GroupedConvolutionKeepsParametersAndFlops) {
  ModelMaker m;
  m.input("x", {1, 4, 6, 6});
  m.init("w", {8, 2, 3, 3});  // group 2: 8 filters over 2 channels each
  auto& conv = m.node("Conv", {"x", "w"}, {"c"}, "/g/Conv");
  ModelMaker::integer(conv, "group", 2);
  ModelMaker::ints(conv, "pads", {1, 1, 1, 1});
  m.node("GlobalAveragePool", {"c"}, {"p"});
  m.node("Flatten", {"p"}, {"y"});
  m.output("y");
  OnnxImportReport report;
  OpGraph g = import_onnx(m.save("grouped.onnx"), {}, &report);
  EXPECT_EQ(report.stats.parameters, 8 * 2 * 3 * 3);
  EXPECT_EQ(count_type(g, "Conv2D"), 2);
  double conv_flops = 0;
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).type == "Conv2D") conv_flops += g.op(v).flops;
  EXPECT_DOUBLE_EQ(conv_flops, 2.0 * 8 * 2 * 9 * 36);  // 2·k·(c/g)·r·s·ho·wo
  ASSERT_EQ(report.approximations.size(), 1u);
  EXPECT_EQ(report.approximations[0].node, "/g/Conv");
}

TEST(OnnxImport, EmbeddingAndLstmHaveTheFilesParameterCounts) {
  // ids [2,3] → Gather table [50,8] → Transpose to [3,2,8] → LSTM hidden 4 → Y_h [1,2,4] → Flatten.
  ModelMaker m;
  m.input("ids", {2, 3}, onnx::TensorProto::INT64);
  m.init("table", {50, 8});
  m.init("W", {1, 16, 8});
  m.init("R", {1, 16, 4});
  m.init("B", {1, 32});
  m.node("Gather", {"table", "ids"}, {"emb"});  // [2,3,8]
  auto& t = m.node("Transpose", {"emb"}, {"seq"});
  ModelMaker::ints(t, "perm", {1, 0, 2});
  auto& lstm = m.node("LSTM", {"seq", "W", "R", "B"}, {"", "h"}, "/rnn/LSTM");
  ModelMaker::integer(lstm, "hidden_size", 4);
  m.node("Flatten", {"h"}, {"y"});
  m.output("y");
  OnnxImportReport report;
  OpGraph g = import_onnx(m.save("lstm.onnx"), {}, &report);
  // table 400, LSTM W 128 + R 64 + B 32.
  EXPECT_EQ(report.stats.parameters, 400 + 128 + 64 + 32);
  const Op* emb = find_type(g, "GatherV2");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->kernel, KernelSignature::embedding(50, 8, 6));
  EXPECT_EQ(count_type(g, "ScatterSub"), 1);  // the table's sparse SGD update
  // Three unrolled steps, each one gate MatMul [2, 12]·[12, 16].
  int gate_matmuls = 0;
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).type == "MatMul" && g.op(v).phase == Phase::kForward) {
      ++gate_matmuls;
      EXPECT_EQ(g.op(v).kernel, KernelSignature::gemm(2, 16, 12));
    }
  EXPECT_EQ(gate_matmuls, 3);
  EXPECT_TRUE(report.approximations.empty()) << report.brief_report();
}

TEST(OnnxImport, ReadsTheCommittedPythonFixture) {
  // tests/data/onnx/tiny_cnn.onnx: see tests/data/onnx/README.md (same network as tiny_cnn(),
  // exported with a symbolic batch).
  fs::path p = fs::path(PLACELAB_SOURCE_DIR) / "tests/data/onnx/tiny_cnn.onnx";
  OnnxImportOptions options;
  options.batch = 2;
  OnnxImportReport report;
  OpGraph g = import_onnx(p, options, &report);
  EXPECT_EQ(report.stats.parameters, kTinyCnnParams);
  EXPECT_DOUBLE_EQ(report.stats.forward_flops, tiny_cnn_flops(2));
  EXPECT_EQ(report.producer.rfind("placelab make-onnx-fixtures", 0), 0u) << report.producer;
}

// The committed fixtures of scripts/make-onnx-fixtures.py (tests/data/onnx/README.md).
fs::path fixture(const std::string& name) { return fs::path(PLACELAB_SOURCE_DIR) / "tests/data/onnx" / name; }

int count_forward(const OpGraph& g, std::string_view type) {
  int c = 0;
  for (OpId v = 0; v < g.num_ops(); ++v) c += g.op(v).type == type && g.op(v).phase == Phase::kForward ? 1 : 0;
  return c;
}

TEST(OnnxImport, PadBeforePoolingBecomesThePoolsPadding) {
  // Pad 1 + AveragePool 3/1 (no pads) is one AvgPool with padding 1, as TF's SAME pooling; the
  // second Pad reads into a Relu and stays a tf.pad [2,4,8,8] → [2,4,9,9].
  OnnxImportOptions options;
  options.batch = 2;
  OnnxImportReport report;
  OpGraph g = import_onnx(fixture("tiny_pad_pool.onnx"), options, &report);
  EXPECT_EQ(report.stats.parameters, 12 + 40 + 10);
  EXPECT_TRUE(report.approximations.empty()) << report.brief_report();
  EXPECT_EQ(count_forward(g, "AvgPool"), 2);  // the branch pool and the global pool
  EXPECT_EQ(count_forward(g, "Pad"), 1);
  const Op* pad = nullptr;
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).type == "Pad" && g.op(v).phase == Phase::kForward) pad = &g.op(v);
  ASSERT_NE(pad, nullptr);
  EXPECT_EQ(pad->kernel, KernelSignature::copy(2 * 9 * 9 * 4 * 4));
  // Forward FLOPs: AvgPool 3×3 over [2,8,8,3] padded 2·8·8·3·9 = 3456; Conv 1×1 2·2·4·3·64 = 3072;
  // Relu 2·9·9·4 = 648; global AvgPool 2·4·81 = 648; MatMul 2·2·10·4 = 160; BiasAdd 2·20 = 40;
  // loss 5·2·10 + 2 = 102 (the Pad copies, no FLOPs).
  EXPECT_DOUBLE_EQ(report.stats.forward_flops, 3456 + 3072 + 648 + 648 + 160 + 40 + 102);
}

TEST(OnnxImport, AttentionShapeArithmeticIsFoldedOnceDimsAreKnown) {
  // nn.MultiheadAttention's export: Shape → Gather → Div/Mul → Slice bounds and Shape → Gather →
  // Unsqueeze → Concat → Reshape shapes, all constants once S and N are given.
  OnnxImportOptions options;
  options.dim_values = {{"S", 5}, {"N", 3}};
  OnnxImportReport report;
  OpGraph g = import_onnx(fixture("tiny_attention.onnx"), options, &report);
  EXPECT_EQ(report.stats.parameters, 8 * 24 + 24 + 8 * 8 + 8 + 8 * 10 + 10);
  EXPECT_TRUE(report.approximations.empty()) << report.brief_report();
  EXPECT_EQ(count_forward(g, "Slice"), 3);  // q, k and v out of the packed projection
  EXPECT_EQ(report.op_counts.at("Shape"), 3);  // counted as in the file, though folded
  EXPECT_GE(report.folded_nodes, 25);
  // The two batched products over N·heads = 6 matrices: scores [5,4]·[4,5] and context [5,5]·[5,4].
  int batched = 0;
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).phase == Phase::kForward && g.op(v).type == "BatchMatMul") ++batched;
  EXPECT_EQ(batched, 2);
  // Another sequence length folds to other shapes: the projections' work grows with S.
  options.dim_values["S"] = 10;
  OnnxImportReport longer;
  import_onnx(fixture("tiny_attention.onnx"), options, &longer);
  EXPECT_EQ(longer.stats.parameters, report.stats.parameters);
  EXPECT_GT(longer.stats.forward_flops, 1.9 * report.stats.forward_flops);
  // Without the sizes the symbolic dimension is named.
  std::string e = import_error(fixture("tiny_attention.onnx"));
  EXPECT_NE(e.find("graph input 'x' dimension 0 is symbolic ('S')"), std::string::npos) << e;
}

TEST(OnnxImport, LstmInitialStatesSeedTheFirstCells) {
  // Two LSTM layers with (h0, c0) sliced per layer from graph inputs: no zero states, no
  // approximation, the file's parameters.
  OnnxImportReport report;
  OpGraph g = import_onnx(fixture("tiny_lstm_lm.onnx"), {}, &report);
  EXPECT_EQ(report.stats.parameters, 80 + 2 * (64 + 64 + 32) + 80 + 20);
  EXPECT_TRUE(report.approximations.empty()) << report.brief_report();
  EXPECT_EQ(count_type(g, "zeros"), 0);
  EXPECT_EQ(count_forward(g, "Slice"), 4);  // h0[l], c0[l] for each layer
  EXPECT_EQ(report.inputs, (std::vector<std::string>{"ids", "h0", "c0"}));
  // Without initial states each layer starts from zeros (one zeros op per state and layer).
  ModelMaker m;
  m.input("x", {3, 2, 4});
  m.init("W", {1, 16, 4});
  m.init("R", {1, 16, 4});
  m.node("LSTM", {"x", "W", "R"}, {"y"}, "/rnn/LSTM").add_attribute()->set_name("hidden_size");
  auto& attr = *m.model().mutable_graph()->mutable_node(0)->mutable_attribute(0);
  attr.set_type(onnx::AttributeProto::INT);
  attr.set_i(4);
  m.node("Flatten", {"y"}, {"f"});
  m.output("f");
  OpGraph zero = import_onnx(m.save("lstm_zero_state.onnx"));
  EXPECT_EQ(count_type(zero, "zeros"), 2);
}

TEST(OnnxImport, GruIsUnrolledIntoGruCellsWithTheFilesParameters) {
  // nn.GRU(4, 3) as PyTorch exports it (linear_before_reset = 1) with h0 a graph input, over 4 steps.
  OnnxImportReport report;
  OpGraph g = import_onnx(fixture("tiny_gru.onnx"), {}, &report);
  // Table 80; GRU W 3·3·4 = 36, R 3·3·3 = 27, B 6·3 = 18; classifier 60 + 20.
  EXPECT_EQ(report.stats.parameters, 80 + 36 + 27 + 18 + 60 + 20);
  EXPECT_TRUE(report.approximations.empty()) << report.brief_report();
  EXPECT_EQ(count_type(g, "zeros"), 0);  // the first step reads h0
  // Per step: gates [2,7]·[7,6], candidate input [2,4]·[4,3] and hidden [2,3]·[3,3].
  std::map<std::string, int> products;
  for (OpId v = 0; v < g.num_ops(); ++v) {
    const Op& op = g.op(v);
    if (op.phase != Phase::kForward || op.type != "MatMul") continue;
    if (op.kernel == KernelSignature::gemm(2, 6, 7)) ++products["gates"];
    if (op.kernel == KernelSignature::gemm(2, 3, 4)) ++products["input"];
    if (op.kernel == KernelSignature::gemm(2, 3, 3)) ++products["hidden"];
  }
  EXPECT_EQ(products, (std::map<std::string, int>{{"gates", 4}, {"hidden", 4}, {"input", 4}}));
}

TEST(OnnxImport, MaskedScoresUseWhereAndExpand) {
  // A causal mask as GPT-2 exports it: scores [2,4,4] = x·w, Where(mask [4,4] (bool), scores,
  // -1e4) with the fill a constant; plus the first row block of relu(scores) Expanded back to
  // [2,4,4] and a per-row scale [2,1,4] added.
  ModelMaker m;
  m.input("x", {2, 4, 8});
  m.init("w", {8, 4});
  auto* mask = m.model().mutable_graph()->add_initializer();
  mask->set_name("mask");
  mask->set_data_type(onnx::TensorProto::BOOL);
  mask->add_dims(4);
  mask->add_dims(4);
  for (int i = 0; i < 16; ++i) mask->add_int32_data(i % 5 == 0 ? 1 : 0);
  m.init("fill", {});
  m.init("row_scale", {2, 1, 4});
  m.init_ints("shape", {2, 4, 4});
  m.node("MatMul", {"x", "w"}, {"scores"}, "/attn/MatMul");
  m.node("Where", {"mask", "scores", "fill"}, {"masked"}, "/attn/Where");
  m.node("Relu", {"scores"}, {"r"}, "/attn/Relu");
  m.node("Slice", {"r", "zero", "one", "zero"}, {"r0"}, "/attn/Slice");
  m.init_ints("zero", {0});
  m.init_ints("one", {1});
  m.node("Expand", {"r0", "shape"}, {"r2"}, "/attn/Expand_1");  // [1,4,4] → [2,4,4]
  m.node("Add", {"masked", "r2"}, {"sum"}, "/attn/Add");
  m.node("Add", {"sum", "row_scale"}, {"y"}, "/attn/Add_1");
  m.output("y");
  OnnxImportReport report;
  OpGraph g = import_onnx(m.save("masked.onnx"), {}, &report);
  // w 32 and the row scale 8 are weights; the mask and the fill are not.
  EXPECT_EQ(report.stats.parameters, 32 + 8);
  EXPECT_TRUE(report.approximations.empty()) << report.brief_report();
  const Op* select = find_type(g, "Select");
  ASSERT_NE(select, nullptr);
  EXPECT_EQ(select->kernel, KernelSignature::elementwise(32, 3));
  EXPECT_EQ(count_forward(g, "BroadcastTo"), 1);
  EXPECT_EQ(count_type(g, "Select"), 2);  // forward, and the gradient of the scores side
}

TEST(OnnxImport, APartOfAWeightTrainsTheWholeWeight) {
  // x [2,4,8] + pos[:, :4] with pos [1,16,8] (a learned positional table cut to the sequence, as
  // `self.pos[:, :n]` exports): the variable is the whole table, sliced each step; a row of a
  // [3,8] table picked by a constant index is a lookup in the whole table.
  ModelMaker m;
  m.input("x", {2, 4, 8});
  m.init("pos", {1, 16, 8});
  m.init("rows", {3, 8});
  m.init_ints("zero", {0});
  m.init_ints("four", {4});
  m.init_ints("one", {1});
  m.node("Slice", {"pos", "zero", "four", "one"}, {"p"}, "/pos/Slice");
  m.node("Add", {"x", "p"}, {"y"}, "/Add");
  auto* idx = m.model().mutable_graph()->add_initializer();
  idx->set_name("idx");
  idx->set_data_type(onnx::TensorProto::INT64);
  idx->add_int64_data(2);  // a scalar index
  m.node("Gather", {"rows", "idx"}, {"row"}, "/row/Gather");
  m.node("Add", {"y", "row"}, {"z"}, "/Add_1");
  m.output("z");
  OnnxImportReport report;
  OpGraph g = import_onnx(m.save("weight_part.onnx"), {}, &report);
  EXPECT_EQ(report.stats.parameters, 16 * 8 + 3 * 8);
  EXPECT_EQ(count_forward(g, "Slice"), 1);
  EXPECT_EQ(count_forward(g, "GatherV2"), 1);
  EXPECT_TRUE(report.approximations.empty()) << report.brief_report();
}

TEST(OnnxImport, BakedBatchIsRewrittenInReshapeLiterals) {
  // Traced at batch 1: Reshape(x, [1, -1]). With batch 8 the literal becomes [8, -1] (listed).
  OnnxImportOptions options;
  options.batch = 8;
  OnnxImportReport report;
  OpGraph g = import_onnx(fixture("tiny_baked_batch.onnx"), options, &report);
  EXPECT_EQ(report.stats.parameters, 6 + 320 + 10);
  ASSERT_EQ(report.approximations.size(), 1u) << report.brief_report();
  EXPECT_EQ(report.approximations[0].node, "/Reshape");
  EXPECT_NE(report.approximations[0].how.find("[1,-1] rewritten to [8,-1]"), std::string::npos)
      << report.approximations[0].how;
  const Op* mm = find_type(g, "MatMul");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->kernel, KernelSignature::gemm(8, 10, 32));

  // A literal that holds the batch elsewhere cannot be rewritten: the error says what to do.
  ModelMaker m;
  m.input("x", {1, 4, 6});
  m.init_ints("shape", {4, 6});
  m.node("Reshape", {"x", "shape"}, {"r"}, "/view/Reshape");
  m.node("Relu", {"r"}, {"y"});
  m.output("y");
  options.batch = 3;
  std::string e = import_error(m.save("baked_elsewhere.onnx"), options);
  EXPECT_NE(e.find("node '/view/Reshape' (Reshape): reshapes [3,4,6] (72 elements) to [4,6] (24)"), std::string::npos) << e;
  EXPECT_NE(e.find("exported with a fixed batch of 1"), std::string::npos) << e;
  EXPECT_NE(e.find("dynamic_axes"), std::string::npos) << e;
}

TEST(OnnxImportErrors, SlicesAndGathersOnActivationsNameWhatIsMissing) {
  ModelMaker m;
  m.input("x", {2, 8});
  m.init_ints("starts", {0});
  m.init_ints("ends", {8});
  m.init_ints("axes", {1});
  m.init_ints("steps", {2});
  m.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"}, "/s/Slice");
  m.output("y");
  std::string e = import_error(m.save("strided_slice.onnx"));
  EXPECT_NE(e.find("node '/s/Slice' (Slice): step 2 on axis 1: only step 1 is supported"), std::string::npos) << e;

  ModelMaker g;
  g.input("x", {2, 8});
  g.input("i", {3}, onnx::TensorProto::INT64);
  auto& gather = g.node("Gather", {"x", "i"}, {"y"}, "/g/Gather");
  ModelMaker::integer(gather, "axis", 1);
  g.output("y");
  e = import_error(g.save("runtime_gather.onnx"));
  EXPECT_NE(e.find("node '/g/Gather' (Gather): gathering a runtime tensor at runtime indices"), std::string::npos) << e;
}

TEST(OnnxImport, BytesInMemoryImportAsTheFileDoes) {
  fs::path p = fs::path(PLACELAB_SOURCE_DIR) / "tests/data/onnx/tiny_cnn.onnx";
  std::ifstream in(p, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  OnnxImportOptions options;
  options.batch = 2;
  OnnxImportReport from_file, from_bytes;
  OpGraph a = import_onnx(p, options, &from_file);
  OpGraph b = import_onnx_bytes(bytes, "memory.onnx", options, &from_bytes);
  EXPECT_EQ(a.num_ops(), b.num_ops());
  EXPECT_EQ(from_bytes.stats.parameters, from_file.stats.parameters);
  EXPECT_DOUBLE_EQ(from_bytes.stats.forward_flops, from_file.stats.forward_flops);
  try {
    import_onnx_bytes("not a model", "memory.onnx");
    ADD_FAILURE() << "garbage imported";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("memory.onnx: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace placelab::models
