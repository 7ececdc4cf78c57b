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

#include "placelab/graph/error.h"
#include "placelab/models/zoo.h"

namespace placelab::models {
namespace {

namespace fs = std::filesystem;

// Fixture files go to a directory of this process: ctest runs each test as its own process,
// possibly in parallel, and several checkouts may test on one machine.
fs::path test_dir() {
  fs::path dir = fs::temp_directory_path() / ("placelab_onnx_import_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

// Removes this process's fixture directory after the last test.
class RemoveTestDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(test_dir(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kRemoveTestDir = ::testing::AddGlobalTestEnvironment(new RemoveTestDir);

// A ModelProto under construction. Dimensions < 0 are symbolic ("N").
class ModelMaker {
 public:
  explicit ModelMaker(int64_t opset = 13) {
    m_.set_ir_version(8);
    m_.set_producer_name("placelab-test");
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("test");
  }
  void input(const std::string& name, const std::vector<int64_t>& dims,
             int32_t type = onnx::TensorProto::FLOAT) {
    auto* v = m_.mutable_graph()->add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (int64_t d : dims) {
      auto* dim = t->mutable_shape()->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
  }
  void output(const std::string& name) {
    auto* v = m_.mutable_graph()->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  // A float initializer of zeros (values never matter to the importer).
  void init(const std::string& name, const std::vector<int64_t>& dims) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    t->set_raw_data(std::string(static_cast<std::size_t>(n) * 4, '\0'));
  }
  void init_ints(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& in,
                        const std::vector<std::string>& out, const std::string& name = "") {
    auto* n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? out.at(0) + "_node" : name);
    for (const auto& i : in) n->add_input(i);
    for (const auto& o : out) n->add_output(o);
    return *n;
  }
  static void ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void integer(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  fs::path save(const std::string& file) const {
    fs::path p = test_dir() / file;
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    EXPECT_TRUE(m_.SerializeToOstream(&out));
    return p;
  }
  onnx::ModelProto& model() { return m_; }

 private:
  onnx::ModelProto m_;
};

// x [N,3,8,8] → Conv 4×3×3×3 + bias, pad 1 → BatchNorm → Relu → MaxPool 2/2 → GlobalAveragePool
// → Flatten → Gemm [10,4]ᵀ + [10].
ModelMaker tiny_cnn() {
  ModelMaker m;
  m.input("x", {-1, 3, 8, 8});
  m.init("conv.w", {4, 3, 3, 3});
  m.init("conv.b", {4});
  for (const char* p : {"bn.scale", "bn.bias", "bn.mean", "bn.var"}) m.init(p, {4});
  m.init("fc.w", {10, 4});
  m.init("fc.b", {10});
  auto& conv = m.node("Conv", {"x", "conv.w", "conv.b"}, {"c"}, "/conv/Conv");
  ModelMaker::ints(conv, "kernel_shape", {3, 3});
  ModelMaker::ints(conv, "pads", {1, 1, 1, 1});
  m.node("BatchNormalization", {"c", "bn.scale", "bn.bias", "bn.mean", "bn.var"}, {"bn"}, "/bn/BatchNormalization");
  m.node("Relu", {"bn"}, {"r"}, "/relu/Relu");
  auto& pool = m.node("MaxPool", {"r"}, {"p"}, "/pool/MaxPool");
  ModelMaker::ints(pool, "kernel_shape", {2, 2});
  ModelMaker::ints(pool, "strides", {2, 2});
  m.node("GlobalAveragePool", {"p"}, {"g"}, "/gap/GlobalAveragePool");
  m.node("Flatten", {"g"}, {"f"}, "/flatten/Flatten");
  auto& fc = m.node("Gemm", {"f", "fc.w", "fc.b"}, {"logits"}, "/fc/Gemm");
  ModelMaker::integer(fc, "transB", 1);
  m.output("logits");
  return m;
}

// Trainable parameters: conv 4·3·3·3 + 4, batch-norm scale and offset 2·4, fc 10·4 + 10.
constexpr int64_t kTinyCnnParams = 108 + 4 + 8 + 40 + 10;
// Forward FLOPs at batch n: Conv 2·n·4·3·3·3·8·8 = 13824n; BiasAdd 2·256n; FusedBatchNorm 2·256n;
// Relu 256n; MaxPool 64n·4 = 256n; global AvgPool 4n·16 = 64n; MatMul 2·n·10·4 = 80n;
// BiasAdd 2·10n; softmax cross-entropy 5·n·10; loss Mean n.
double tiny_cnn_flops(double n) { return n * (13824 + 512 + 512 + 256 + 256 + 64 + 80 + 20 + 50 + 1); }

int count_type(const OpGraph& g, std::string_view type) {
  int c = 0;
  for (OpId v = 0; v < g.num_ops(); ++v) c += g.op(v).type == type ? 1 : 0;
  return c;
}
const Op* find_type(const OpGraph& g, std::string_view type) {
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).type == type) return &g.op(v);
  return nullptr;
}

// Runs import_onnx and returns the InputError message ("" when nothing was thrown).
std::string import_error(const fs::path& p, OnnxImportOptions options = {}) {
  try {
    import_onnx(p, options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

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

// x [4,16] · W1 [16,32] + b1 → Relu → Gemm W2 [32,10] + b2: parameters 512 + 32 + 320 + 10.
ModelMaker mlp() {
  ModelMaker m;
  m.input("x", {4, 16});
  m.init("w1", {16, 32});
  m.init("b1", {32});
  m.init("w2", {32, 10});
  m.init("b2", {10});
  m.node("MatMul", {"x", "w1"}, {"h0"}, "/fc1/MatMul");
  m.node("Add", {"h0", "b1"}, {"h1"}, "/fc1/Add");
  m.node("Relu", {"h1"}, {"h"}, "/fc1/Relu");
  m.node("Gemm", {"h", "w2", "b2"}, {"y"}, "/fc2/Gemm");
  m.output("y");
  return m;
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

// --- errors ---------------------------------------------------------------------------------------

fs::path write_bytes(const std::string& file, const std::string& bytes) {
  fs::path p = test_dir() / file;
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  return p;
}

// A file of more nodes than a training graph can hold is refused before any pass runs (a
// million-node file built for 30 s and 2.2 GB before the builder's op bound stopped it).
TEST(OnnxImportErrors, MoreNodesThanATrainingGraphHoldsAreRefusedAtOnce) {
  ModelMaker m;
  m.input("x", {2, 4});
  std::string prev = "x";
  for (int i = 0; i < 500'001; ++i) {
    std::string out = "t";  // appended: GCC 12 warns falsely (-Wrestrict) on "t" + string
    out += std::to_string(i);
    m.node("Relu", {prev}, {out}, "r");
    prev = out;
  }
  m.output(prev);
  std::string e;
  try {
    import_onnx_bytes(m.model().SerializeAsString(), "long.onnx");
  } catch (const InputError& error) {
    e = error.what();
  }
  EXPECT_NE(e.find("long.onnx: 500001 nodes: at most 500000"), std::string::npos) << e;
  EXPECT_NE(e.find("at most 1000000 ops"), std::string::npos) << e;
}

// Found by onnx_fuzz in CI: an int64 initializer of 63 raw bytes (the shape of a Reshape) made
// ONNX 1.12's shape inference copy 63 bytes into a buffer of 7 elements (heap overflow). Raw data
// must fill its tensor's shape exactly, checked before inference.
TEST(OnnxImportErrors, RawDataThatDoesNotFillItsShapeIsRejectedBeforeShapeInference) {
  ModelMaker m;
  m.input("x", {2, 4});
  m.init_ints("shape", {4, 2});
  m.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  m.output("y");
  for (auto& t : *m.model().mutable_graph()->mutable_initializer()) {
    t.clear_int64_data();
    t.set_raw_data(std::string(63, '\x01'));
  }
  std::string e;
  try {
    import_onnx_bytes(m.model().SerializeAsString(), "raw.onnx");
  } catch (const InputError& error) {
    e = error.what();
  }
  EXPECT_NE(e.find("raw.onnx: tensor 'shape' is [2]: 63 bytes of raw_data, not the 16 its shape and type take"),
            std::string::npos)
      << e;
}

TEST(OnnxImportErrors, MissingFileNamesTheFile) {
  std::string e = import_error("/nonexistent/model.onnx");
  EXPECT_NE(e.find("/nonexistent/model.onnx"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot read"), std::string::npos) << e;
}

TEST(OnnxImportErrors, GarbageBytesAreNotAModel) {
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage.push_back(static_cast<char>((i * 7919 + 13) % 251));
  fs::path p = write_bytes("garbage.onnx", garbage);
  std::string e = import_error(p);
  EXPECT_NE(e.find(p.string()), std::string::npos) << e;
  EXPECT_FALSE(e.empty());
  // Text that happens to parse as protobuf fields still has no graph.
  std::string text_error = import_error(write_bytes("text.onnx", "hello, this is not a model\n"));
  EXPECT_FALSE(text_error.empty());
  EXPECT_NE(import_error(write_bytes("empty.onnx", "")).find("no graph"), std::string::npos);
}

TEST(OnnxImportErrors, TruncatedFileIsRejected) {
  ModelMaker m = tiny_cnn();
  std::string bytes;
  ASSERT_TRUE(m.model().SerializeToString(&bytes));
  for (std::size_t cut : {bytes.size() / 2, bytes.size() - 3}) {
    std::string e = import_error(write_bytes("truncated.onnx", bytes.substr(0, cut)));
    EXPECT_NE(e.find("truncated.onnx"), std::string::npos) << "cut at " << cut << ": " << e;
  }
}

TEST(OnnxImportErrors, EveryTruncatedGraphImportsOrThrowsInputError) {
  // The graph is serialized before opset_import, so a file prefix already fails for the missing
  // opset. Truncating the GraphProto itself instead: a prefix that ends on a field boundary
  // parses as a graph with nodes, initializers, inputs or outputs missing. Each must give a clean
  // InputError (or import), never another exception or a crash.
  ModelMaker full = tiny_cnn();
  std::string graph_bytes;
  ASSERT_TRUE(full.model().graph().SerializeToString(&graph_bytes));
  OnnxImportOptions options;
  options.batch = 2;
  int parsed = 0, imported = 0, rejected = 0;
  for (std::size_t cut = 0; cut < graph_bytes.size(); ++cut) {
    onnx::GraphProto g;
    if (!g.ParseFromString(graph_bytes.substr(0, cut))) continue;
    ++parsed;
    ModelMaker m = tiny_cnn();
    *m.model().mutable_graph() = g;
    fs::path p = m.save("truncated_graph.onnx");
    try {
      import_onnx(p, options);
      ++imported;
    } catch (const InputError&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "graph prefix of " << cut << " bytes: " << e.what();
    }
  }
  std::cout << parsed << " graph prefixes parse, " << rejected << " rejected\n";
  EXPECT_GT(parsed, 10);
  EXPECT_GT(rejected, 10);
  EXPECT_EQ(imported + rejected, parsed);
}

TEST(OnnxImportErrors, SymbolicBatchWithoutABatchNamesTheInput) {
  std::string e = import_error(tiny_cnn().save("symbolic.onnx"));
  EXPECT_NE(e.find("graph input 'x' dimension 0 is symbolic ('N')"), std::string::npos) << e;
  EXPECT_NE(e.find("OnnxImportOptions::batch"), std::string::npos) << e;
}

TEST(OnnxImportErrors, UnknownAndUnsupportedOpsNameTheNode) {
  ModelMaker unknown = mlp();
  unknown.node("FancyAttention", {"y"}, {"z"}, "/block/FancyAttention");
  std::string e = import_error(unknown.save("unknown_op.onnx"));
  EXPECT_NE(e.find("node '/block/FancyAttention' (FancyAttention)"), std::string::npos) << e;
  EXPECT_NE(e.find("not an ONNX operator"), std::string::npos) << e;

  ModelMaker foreign = mlp();
  foreign.node("FusedMatMul", {"y"}, {"z"}, "/ms/FusedMatMul").set_domain("com.microsoft");
  e = import_error(foreign.save("foreign_op.onnx"));
  EXPECT_NE(e.find("domain 'com.microsoft'"), std::string::npos) << e;

  // A real ONNX op the importer cannot model on runtime data.
  ModelMaker topk;
  topk.input("x", {2, 8});
  topk.init_ints("k", {3});
  topk.node("TopK", {"x", "k"}, {"v", "i"}, "/head/TopK");
  topk.output("v");
  e = import_error(topk.save("topk.onnx"));
  EXPECT_NE(e.find("node '/head/TopK' (TopK): the importer cannot model 'TopK'"), std::string::npos) << e;
}

TEST(OnnxImportErrors, ShapesThatCannotBeInferredAreReported) {
  // Reshape to a shape read from a runtime tensor: inference cannot give a static output shape.
  ModelMaker m;
  m.input("x", {2, 6});
  m.input("shape", {2}, onnx::TensorProto::INT64);
  m.node("Reshape", {"x", "shape"}, {"r"}, "/dyn/Reshape");
  m.node("Relu", {"r"}, {"y"});
  m.output("y");
  std::string e = import_error(m.save("dynamic_shape.onnx"));
  EXPECT_NE(e.find("node '/dyn/Reshape' (Reshape)"), std::string::npos) << e;
  EXPECT_NE(e.find("could not be inferred"), std::string::npos) << e;

  // Inconsistent shapes fail ONNX shape inference itself.
  ModelMaker bad;
  bad.input("x", {2, 3});
  bad.init("w", {4, 5});
  bad.node("MatMul", {"x", "w"}, {"y"}, "/bad/MatMul");
  bad.output("y");
  e = import_error(bad.save("bad_matmul.onnx"));
  EXPECT_NE(e.find("ONNX shape inference failed"), std::string::npos) << e;

  // ONNX 1.12 does not check a Conv's channels; the importer does, naming the node.
  ModelMaker bad_conv;
  bad_conv.input("x", {1, 3, 8, 8});
  bad_conv.init("w", {4, 5, 3, 3});  // 5 input channels for a 3-channel image
  bad_conv.node("Conv", {"x", "w"}, {"y"}, "/bad/Conv");
  bad_conv.output("y");
  e = import_error(bad_conv.save("bad_conv.onnx"));
  EXPECT_NE(e.find("node '/bad/Conv' (Conv): group 1 does not divide input channels 3"), std::string::npos) << e;

  // An input nobody produces.
  ModelMaker dangling = mlp();
  dangling.model().mutable_graph()->mutable_node(2)->set_input(0, "nowhere");
  e = import_error(dangling.save("dangling.onnx"));
  EXPECT_FALSE(e.empty());
}

TEST(OnnxImportErrors, UnsupportedAttributesNameTheNode) {
  ModelMaker m = tiny_cnn();
  ModelMaker::ints(*m.model().mutable_graph()->mutable_node(0), "dilations", {2, 2});
  OnnxImportOptions options;
  options.batch = 1;
  std::string e = import_error(m.save("dilated.onnx"), options);
  EXPECT_NE(e.find("node '/conv/Conv' (Conv): dilations"), std::string::npos) << e;
}

// ONNX's own shape inference traps (SIGFPE) on a zero stride; the importer checks first.
TEST(OnnxImportErrors, ZeroStridesAndKernelsAreRejectedBeforeShapeInference) {
  OnnxImportOptions options;
  options.batch = 1;
  for (int node : {0, 3}) {  // the Conv and the MaxPool
    ModelMaker m = tiny_cnn();
    ModelMaker::ints(*m.model().mutable_graph()->mutable_node(node), "strides", {0, 0});
    std::string e = import_error(m.save("zero_stride.onnx"), options);
    EXPECT_NE(e.find("strides value 0: must be between 1 and 2^31"), std::string::npos) << e;
  }
  ModelMaker k = tiny_cnn();
  auto* pool = k.model().mutable_graph()->mutable_node(3);
  pool->mutable_attribute(0)->set_ints(0, 0);  // kernel_shape 0x2
  std::string e = import_error(k.save("zero_kernel.onnx"), options);
  EXPECT_NE(e.find("node '/pool/MaxPool' (MaxPool): kernel_shape value 0"), std::string::npos) << e;
  ModelMaker p = tiny_cnn();
  p.model().mutable_graph()->mutable_node(0)->mutable_attribute(1)->set_ints(2, -1);  // pads
  e = import_error(p.save("negative_pad.onnx"), options);
  EXPECT_NE(e.find("node '/conv/Conv' (Conv): pads value -1: must be between 0"), std::string::npos) << e;
}

// Found by fuzz/onnx_fuzz: a Shape node of opset 15 given four inputs (Slice's) made ONNX 1.12's
// shape inference dereference null. Nodes are checked against their schema first.
TEST(OnnxImportErrors, NodesThatBreakTheirSchemaAreRejectedBeforeShapeInference) {
  OnnxImportOptions options;
  options.batch = 1;
  ModelMaker m(15);
  m.input("x", {-1, 3, 8, 8});
  m.init_ints("start", {0});
  m.init_ints("end", {2});
  m.init_ints("axes", {0});
  m.node("Shape", {"x", "start", "end", "axes"}, {"s"}, "/shape/Shape");
  m.node("Relu", {"x"}, {"r"}, "/relu/Relu");
  m.output("r");
  std::string e = import_error(m.save("shape_four_inputs.onnx"), options);
  EXPECT_NE(e.find("node '/shape/Shape' (Shape): not a valid Shape at opset 15"), std::string::npos) << e;
  // A Shape of a name that nothing defines: the same null read.
  ModelMaker u(15);
  u.input("x", {-1, 3, 8, 8});
  u.node("Shape", {"undefined"}, {"s"}, "/shape/Shape");
  u.node("Relu", {"x"}, {"r"}, "/relu/Relu");
  u.output("r");
  e = import_error(u.save("shape_of_nothing.onnx"), options);
  EXPECT_NE(e.find("node '/shape/Shape' (Shape): input 'undefined' is no graph input, initializer or output of an earlier node"),
            std::string::npos) << e;
}

// Found by fuzz/onnx_fuzz: a Pad of 8.6e18 overflowed int64 counting the padded tensor's elements
// (UBSan). Pads are bounded as the window attributes are, and the padded shape as every shape.
TEST(OnnxImportErrors, PadsBeyond2To31OrTooManyElementsAreRejected) {
  OnnxImportOptions options;
  options.batch = 1;
  const auto pad_model = [](int64_t pad) {
    ModelMaker m;
    m.input("x", {-1, 3, 8, 8});
    m.init_ints("pads", {0, 0, pad, pad, 0, 0, pad, pad});
    m.node("Pad", {"x", "pads"}, {"y"}, "/pad/Pad");
    m.node("Relu", {"y"}, {"r"}, "/relu/Relu");
    m.output("r");
    return m;
  };
  std::string e = import_error(pad_model(int64_t{8606185373858529290}).save("huge_pad.onnx"), options);
  EXPECT_NE(e.find("node '/pad/Pad' (Pad): pads value 8606185373858529290: must be between 0 and 2^31"),
            std::string::npos) << e;
  e = import_error(pad_model(int64_t{1} << 30).save("wide_pad.onnx"), options);
  EXPECT_NE(e.find("more than 2^40 elements"), std::string::npos) << e;
  OnnxImportReport report;
  const OpGraph g = import_onnx(pad_model(2).save("small_pad.onnx"), options, &report);
  EXPECT_GT(g.num_ops(), 0);
}

// Found by fuzz/onnx_fuzz: a Conv without kernel_shape was a SIGSEGV inside ONNX 1.12's shape
// inference. kernel_shape may be left out ("inferred from W"): it is taken from the weights.
TEST(OnnxImport, ConvWithoutKernelShapeTakesItFromTheWeights) {
  OnnxImportOptions options;
  options.batch = 2;
  ModelMaker m = tiny_cnn();
  auto* conv = m.model().mutable_graph()->mutable_node(0);
  conv->mutable_attribute()->DeleteSubrange(0, 1);  // kernel_shape
  ASSERT_EQ(conv->attribute(0).name(), "pads");
  OnnxImportReport without, with;
  const OpGraph a = import_onnx(m.save("no_kernel_shape.onnx"), options, &without);
  const OpGraph b = import_onnx(tiny_cnn().save("kernel_shape.onnx"), options, &with);
  EXPECT_EQ(a.num_ops(), b.num_ops());
  EXPECT_EQ(without.stats.parameters, kTinyCnnParams);
  EXPECT_DOUBLE_EQ(without.stats.forward_flops, tiny_cnn_flops(2));

  // Weights that are no initializer leave nothing to take it from.
  ModelMaker g = tiny_cnn();
  g.model().mutable_graph()->mutable_node(0)->mutable_attribute()->DeleteSubrange(0, 1);
  g.model().mutable_graph()->mutable_node(0)->set_input(1, "x");
  std::string e = import_error(g.save("no_kernel_shape_no_weights.onnx"), options);
  EXPECT_NE(e.find("node '/conv/Conv' (Conv): no kernel_shape, and input 1 (the weights) is no initializer"), std::string::npos)
      << e;
}

// Found by fuzz/onnx_fuzz: a weight of 8613451774033920 × 2662 … elements overflowed int64 while
// its elements were counted (undefined behaviour).
TEST(OnnxImportErrors, TensorsOfMoreThan2To40ElementsAreRejected) {
  OnnxImportOptions options;
  options.batch = 1;
  ModelMaker m = tiny_cnn();
  m.model().mutable_graph()->mutable_initializer(0)->set_dims(3, int64_t{1} << 40);  // conv.w
  std::string e = import_error(m.save("huge_weights.onnx"), options);
  EXPECT_NE(e.find("tensor 'conv.w' is [4,3,3,1099511627776]: more than 2^40 elements"), std::string::npos) << e;
  ModelMaker n = tiny_cnn();
  n.model().mutable_graph()->mutable_initializer(1)->set_dims(0, -4);  // conv.b
  e = import_error(n.save("negative_dims.onnx"), options);
  EXPECT_NE(e.find("tensor 'conv.b' is [-4]: a negative dimension"), std::string::npos) << e;
}

// Found by fuzz/onnx_fuzz: an output with a dimension 0 divided by zero counting the loss's rows.
TEST(OnnxImportErrors, AnEmptyOutputIsRejected) {
  OnnxImportOptions options;
  options.batch = 1;
  ModelMaker m = tiny_cnn();
  m.model().mutable_graph()->mutable_initializer(6)->set_dims(0, 0);  // fc.w [0, 4]: no classes
  m.model().mutable_graph()->mutable_initializer(6)->clear_raw_data();
  m.model().mutable_graph()->mutable_initializer(7)->set_dims(0, 0);  // fc.b [0]
  m.model().mutable_graph()->mutable_initializer(7)->clear_raw_data();
  std::string e = import_error(m.save("empty_logits.onnx"), options);
  EXPECT_NE(e.find("graph output 'logits' is [1,0]: empty, no logits for the loss"), std::string::npos) << e;
}

TEST(OnnxImportErrors, WeightsOfTheWrongSizeNameTheTensor) {
  // ONNX 1.12's Conv inference does not look at the bias; the importer must.
  ModelMaker m = tiny_cnn();
  m.model().mutable_graph()->mutable_initializer(1)->set_dims(0, 5);
  m.model().mutable_graph()->mutable_initializer(1)->set_raw_data(std::string(20, '\0'));
  OnnxImportOptions options;
  options.batch = 1;
  std::string e = import_error(m.save("bad_bias.onnx"), options);
  EXPECT_NE(e.find("tensor 'conv.b' is [5] where 4 elements ([4]) are expected"), std::string::npos) << e;
}

TEST(OnnxImportErrors, OptionsAreValidated) {
  OnnxImportOptions options;
  options.batch = -1;
  EXPECT_NE(import_error(mlp().save("mlp_opts.onnx"), options).find("OnnxImportOptions.batch = -1"), std::string::npos);
  options.batch = 0;
  options.dim_values["seq"] = 0;
  EXPECT_NE(import_error(mlp().save("mlp_opts.onnx"), options).find("dim_values[seq] = 0"), std::string::npos);
}

}  // namespace
}  // namespace placelab::models
