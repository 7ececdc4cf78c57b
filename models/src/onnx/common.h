// Private to the models library's ONNX import sources: what the importer and the shape folder
// share (tensor layouts, attribute and constant readers). Includes the ONNX protobuf header.
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/models/builder.h"

namespace placelab::models::onnx_detail {

// Where a tensor's builder value keeps its dimensions. ONNX images and feature maps are
// [n, c, spatial...]; the builder's convolutions and pooling take channels last, so those
// tensors are held as [n, spatial..., c]. Rank < 3 tensors are always kAsIs.
enum class Layout : uint8_t { kAsIs, kChannelsLast };

// ONNX axis `a` of a rank-r tensor → its position in a channels-last builder shape.
inline int channels_last_position(int a, int r) { return a == 0 ? 0 : a == 1 ? r - 1 : a - 1; }

// The bound on a window attribute or a pad amount: dimensions grown by it, and their element
// counts, stay in int64 (ONNX 1.12's inference adds them unchecked).
inline constexpr int64_t kMaxWindowValue = int64_t{1} << 31;

inline Shape to_channels_last(const Shape& s) {
  if (s.size() < 3) return s;
  Shape out{s[0]};
  out.insert(out.end(), s.begin() + 2, s.end());
  out.push_back(s[1]);
  return out;
}

// Integer contents of a small constant tensor (axes, split sizes), from whichever field holds them.
inline std::optional<std::vector<int64_t>> int_values(const onnx::TensorProto& t) {
  using TP = onnx::TensorProto;
  std::vector<int64_t> v;
  if (t.data_type() == TP::INT64) {
    if (t.int64_data_size() > 0) return std::vector<int64_t>(t.int64_data().begin(), t.int64_data().end());
    const std::string& raw = t.raw_data();
    if (raw.size() % 8 != 0) return std::nullopt;
    v.resize(raw.size() / 8);
    std::copy(raw.begin(), raw.end(), reinterpret_cast<char*>(v.data()));
    return v;
  }
  if (t.data_type() == TP::INT32) {
    if (t.int32_data_size() > 0) return std::vector<int64_t>(t.int32_data().begin(), t.int32_data().end());
    const std::string& raw = t.raw_data();
    if (raw.size() % 4 != 0) return std::nullopt;
    std::vector<int32_t> w(raw.size() / 4);
    std::copy(raw.begin(), raw.end(), reinterpret_cast<char*>(w.data()));
    return std::vector<int64_t>(w.begin(), w.end());
  }
  return std::nullopt;
}

inline const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, std::string_view name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
inline int64_t attr_int(const onnx::NodeProto& n, std::string_view name, int64_t fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}
inline std::vector<int64_t> attr_ints(const onnx::NodeProto& n, std::string_view name) {
  const auto* a = find_attr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}
inline std::string attr_string(const onnx::NodeProto& n, std::string_view name, std::string fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->s() : fallback;
}

// Ops that are one elementwise kernel with a single runtime input. ONNX defines many; the
// builder has Relu, Sigmoid and Tanh. Piecewise-linear ones are modelled as Relu and smooth ones
// as Tanh: one elementwise op whose gradient reads one saved tensor, the same kernel class and
// size, which is what the cost model sees.
inline const std::set<std::string, std::less<>> kPiecewiseUnary = {
    "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "Clip", "HardSigmoid", "HardSwish",
    "Abs", "Sign", "Floor", "Ceil", "Round", "Shrink"};
inline const std::set<std::string, std::less<>> kSmoothUnary = {
    "Erf", "Exp", "Log", "Softplus", "Softsign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
    "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Mish"};

}  // namespace placelab::models::onnx_detail
