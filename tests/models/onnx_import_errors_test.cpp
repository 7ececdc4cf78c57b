// ONNX import, what it refuses: truncated, hostile and unsupported files, each an InputError naming
// the node, tensor or rule (fixtures from onnx_fixtures.h; many cases were found by fuzz/onnx_fuzz).
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
