// Private to the models library's ONNX import sources: constant folding of the integer shape
// arithmetic exporters leave in a graph (ShapeFolder), used by the importer before inference.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common.h"

namespace placelab::models::onnx_detail {

// --- constant folding of shape arithmetic ---------------------------------------------------------
// Exporters compute the shapes of Reshape, Expand, Slice… at run time from Shape nodes (PyTorch
// writes `x.view(b, s, h, d)` as Shape → Gather → Unsqueeze → Concat → Reshape). Once the batch
// and symbolic dimensions are fixed these subgraphs are constants: ShapeFolder evaluates the
// integer ones and the importer replaces each evaluated node by a Constant holding its value, so
// that ONNX shape inference sees literal shapes. Integer tensors only (int64, int32, bool), at
// most kMaxFoldElements elements.
struct IntTensor {
  Shape dims;
  std::vector<int64_t> values;  // row-major; bool as 0/1
  int32_t type = onnx::TensorProto::INT64;
};

inline constexpr int64_t kMaxFoldElements = 1 << 16;

// The contents of an integer tensor of at most kMaxFoldElements elements; nullopt for any other.
std::optional<IntTensor> int_tensor(const onnx::TensorProto& t);
// The value a folded node's Constant holds.
onnx::TensorProto to_tensor_proto(const IntTensor& t);

// Evaluates one node over known integer inputs; nullopt when the op or its operands are not
// covered (the node then stays as it is).
class ShapeFolder {
 public:
  using Inputs = std::vector<std::optional<IntTensor>>;
  using ShapeOf = std::function<std::optional<Shape>(const std::string&)>;

  // `shape_of(name)`: the static shape of a tensor, when inference knows it. One function per op
  // (or group of ops) does the work, looked up by the node's op type (shape_folder.cpp).
  static std::optional<IntTensor> eval(const onnx::NodeProto& n, const Inputs& in, const ShapeOf& shape_of);
};

}  // namespace placelab::models::onnx_detail
