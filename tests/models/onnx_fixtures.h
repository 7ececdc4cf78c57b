// The ONNX import tests' fixtures (onnx_import_test.cpp, onnx_import_errors_test.cpp): a
// ModelProto builder, two small hand-counted models, and the helpers that write and import them.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/core/error.h"
#include "placelab/models/onnx_import.h"

namespace placelab::models::testing {

namespace fs = std::filesystem;

// Fixture files go to a directory of this process: ctest runs each test as its own process,
// possibly in parallel, and several checkouts may test on one machine.
inline fs::path test_dir() {
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
inline ModelMaker tiny_cnn() {
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
inline double tiny_cnn_flops(double n) { return n * (13824 + 512 + 512 + 256 + 256 + 64 + 80 + 20 + 50 + 1); }

inline int count_type(const OpGraph& g, std::string_view type) {
  int c = 0;
  for (OpId v = 0; v < g.num_ops(); ++v) c += g.op(v).type == type ? 1 : 0;
  return c;
}
inline const Op* find_type(const OpGraph& g, std::string_view type) {
  for (OpId v = 0; v < g.num_ops(); ++v)
    if (g.op(v).type == type) return &g.op(v);
  return nullptr;
}

// Runs import_onnx and returns the InputError message ("" when nothing was thrown).
inline std::string import_error(const fs::path& p, OnnxImportOptions options = {}) {
  try {
    import_onnx(p, options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// x [4,16] · W1 [16,32] + b1 → Relu → Gemm W2 [32,10] + b2: parameters 512 + 32 + 320 + 10.
inline ModelMaker mlp() {
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

// Writes `bytes` as a fixture file of this process.
inline fs::path write_bytes(const std::string& file, const std::string& bytes) {
  fs::path p = test_dir() / file;
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  return p;
}

}  // namespace placelab::models::testing
