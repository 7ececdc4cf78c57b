// ONNX import: ModelProto → shape inference → TrainingGraphBuilder calls → training OpGraph.
// The only translation unit that includes the ONNX and protobuf headers (slow to compile).
#include "placelab/models/onnx_import.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "placelab/graph/error.h"
#include "placelab/graph/io.h"
#include "generators.h"

namespace placelab::models {
namespace {

// Where a tensor's builder value keeps its dimensions. ONNX images and feature maps are
// [n, c, spatial...]; the builder's convolutions and pooling take channels last, so those
// tensors are held as [n, spatial..., c]. Rank < 3 tensors are always kAsIs.
enum class Layout : uint8_t { kAsIs, kChannelsLast };

// ONNX axis `a` of a rank-r tensor → its position in a channels-last builder shape.
int channels_last_position(int a, int r) { return a == 0 ? 0 : a == 1 ? r - 1 : a - 1; }

// The bound on a window attribute or a pad amount: dimensions grown by it, and their element
// counts, stay in int64 (ONNX 1.12's inference adds them unchecked).
constexpr int64_t kMaxWindowValue = int64_t{1} << 31;
// The most nodes an imported graph may have: half the ops a training graph is built with.
constexpr std::size_t kMaxOnnxNodes = detail::kMaxModelOps / 2;

Shape to_channels_last(const Shape& s) {
  if (s.size() < 3) return s;
  Shape out{s[0]};
  out.insert(out.end(), s.begin() + 2, s.end());
  out.push_back(s[1]);
  return out;
}

bool is_float_type(int32_t t) {
  using TP = onnx::TensorProto;
  return t == TP::FLOAT || t == TP::FLOAT16 || t == TP::DOUBLE || t == TP::BFLOAT16;
}

// What the importer knows of one ONNX tensor.
struct TensorInfo {
  Shape shape;             // ONNX dimensions (static after inference and overrides)
  int32_t elem_type = 0;   // onnx::TensorProto::DataType
  bool constant = false;   // an initializer, a Constant or the output of a folded node
  bool from_initializer = false;  // constant derived from initializers (weights), not literals
  bool shape_known = true;        // false only for folded constants inference left unknown
  const onnx::TensorProto* data = nullptr;  // the constant's contents, when known
  Value value;             // builder value (runtime tensors; constants once materialised)
  Layout layout = Layout::kAsIs;
  // A zero Pad of spatial axes that its only reader, a pooling or convolution node, applies as
  // its own padding: no value; `padded_from` names the unpadded tensor and `pads` the ONNX
  // [top, left, bottom, right] amounts.
  std::string padded_from;
  std::array<int64_t, 4> pads{0, 0, 0, 0};
  Shape builder_shape() const { return layout == Layout::kChannelsLast ? to_channels_last(shape) : shape; }
  int64_t elements() const { return num_elements(shape); }
};

// Integer contents of a small constant tensor (axes, split sizes), from whichever field holds them.
std::optional<std::vector<int64_t>> int_values(const onnx::TensorProto& t) {
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

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, std::string_view name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
// The constant tensors a graph names, by name: its initializers and each Constant node's `value`
// (which wins over an initializer of its name). Mutable: rewrite_baked_batch edits them in place.
std::unordered_map<std::string, onnx::TensorProto*> constant_tensors(onnx::GraphProto& g) {
  std::unordered_map<std::string, onnx::TensorProto*> out;
  for (auto& t : *g.mutable_initializer()) out[t.name()] = &t;
  for (auto& c : *g.mutable_node()) {
    if (c.op_type() != "Constant" || c.output_size() != 1) continue;
    for (auto& a : *c.mutable_attribute())
      if (a.name() == "value") {
        if (a.has_t()) out[c.output(0)] = a.mutable_t();
        break;
      }
  }
  return out;
}
int64_t attr_int(const onnx::NodeProto& n, std::string_view name, int64_t fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, std::string_view name) {
  const auto* a = find_attr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}
std::string attr_string(const onnx::NodeProto& n, std::string_view name, std::string fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->s() : fallback;
}

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

constexpr int64_t kMaxFoldElements = 1 << 16;

// Whether `dims` (from a file, perhaps garbage) are non-negative and hold at most
// kMaxFoldElements elements, computed without overflow.
bool foldable_size(const Shape& dims) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0 || d > kMaxFoldElements) return false;
    count *= d;
    if (count > kMaxFoldElements) return false;
  }
  return true;
}

std::optional<IntTensor> int_tensor(const onnx::TensorProto& t) {
  using TP = onnx::TensorProto;
  if (t.data_type() != TP::INT64 && t.data_type() != TP::INT32 && t.data_type() != TP::BOOL) return std::nullopt;
  IntTensor r;
  r.dims.assign(t.dims().begin(), t.dims().end());
  r.type = t.data_type();
  if (!foldable_size(r.dims)) return std::nullopt;
  if (t.data_type() == TP::BOOL) {
    if (t.int32_data_size() > 0) {
      r.values.assign(t.int32_data().begin(), t.int32_data().end());
    } else {
      for (char c : t.raw_data()) r.values.push_back(c != 0 ? 1 : 0);
    }
  } else {
    auto v = int_values(t);
    if (!v) return std::nullopt;
    r.values = std::move(*v);
  }
  if (static_cast<int64_t>(r.values.size()) != num_elements(r.dims)) return std::nullopt;
  return r;
}

onnx::TensorProto to_tensor_proto(const IntTensor& t) {
  onnx::TensorProto p;
  for (int64_t d : t.dims) p.add_dims(d);
  p.set_data_type(t.type);
  if (t.type == onnx::TensorProto::INT64) {
    for (int64_t v : t.values) p.add_int64_data(v);
  } else {
    for (int64_t v : t.values) p.add_int32_data(static_cast<int32_t>(v));
  }
  return p;
}

// Evaluates one node over known integer inputs; nullopt when the op or its operands are not
// covered (the node then stays as it is).
class ShapeFolder {
 public:
  using Inputs = std::vector<std::optional<IntTensor>>;

  // `shape_of(name)`: the static shape of a tensor, when inference knows it.
  static std::optional<IntTensor> eval(const onnx::NodeProto& n, const Inputs& in,
                                       const std::function<std::optional<Shape>(const std::string&)>& shape_of) {
    const std::string& op = n.op_type();
    auto known = [&](std::size_t i) { return i < in.size() && in[i].has_value(); };
    auto all_known = [&] {
      for (int i = 0; i < n.input_size(); ++i)
        if (!n.input(i).empty() && !known(static_cast<std::size_t>(i))) return false;
      return n.input_size() > 0;
    };
    if (op == "Shape" || op == "Size") {
      if (n.input_size() < 1) return std::nullopt;
      auto s = shape_of(n.input(0));
      if (!s) return std::nullopt;
      IntTensor r;
      if (op == "Size") {
        int64_t count = 1;
        for (int64_t d : *s)
          if (__builtin_mul_overflow(count, d, &count)) return std::nullopt;
        r.values = {count};
        return r;
      }
      const auto rank = static_cast<int64_t>(s->size());
      int64_t start = clamp_index(attr_int(n, "start", 0), rank), end = clamp_index(attr_int(n, "end", rank), rank);
      for (int64_t i = start; i < end; ++i) r.values.push_back((*s)[static_cast<std::size_t>(i)]);
      r.dims = {static_cast<int64_t>(r.values.size())};
      return r;
    }
    if (op == "Constant") {
      const auto* a = find_attr(n, "value");
      if (a && a->has_t()) return int_tensor(a->t());
      if ((a = find_attr(n, "value_int")) != nullptr) return IntTensor{{}, {a->i()}};
      if ((a = find_attr(n, "value_ints")) != nullptr)
        return IntTensor{{a->ints_size()}, std::vector<int64_t>(a->ints().begin(), a->ints().end())};
      return std::nullopt;
    }
    if (op == "ConstantOfShape") {
      if (!known(0) || in[0]->dims.size() != 1) return std::nullopt;
      IntTensor r;
      r.dims = in[0]->values;
      if (!foldable_size(r.dims)) return std::nullopt;
      int64_t fill = 0;
      const auto* a = find_attr(n, "value");
      if (a && a->has_t()) {
        auto v = int_tensor(a->t());
        if (!v || v->values.size() != 1) return std::nullopt;  // a float fill: not shape arithmetic
        fill = v->values[0];
        r.type = v->type;
      } else {
        return std::nullopt;  // the default fill is float 0
      }
      r.values.assign(static_cast<std::size_t>(num_elements(r.dims)), fill);
      return r;
    }
    if (!all_known()) return std::nullopt;
    const IntTensor& x = *in[0];
    if (op == "Identity") return x;
    if (op == "Cast") {
      const int64_t to = attr_int(n, "to", 0);
      if (to != onnx::TensorProto::INT64 && to != onnx::TensorProto::INT32 && to != onnx::TensorProto::BOOL)
        return std::nullopt;
      IntTensor r = x;
      r.type = static_cast<int32_t>(to);
      if (to == onnx::TensorProto::BOOL)
        for (auto& v : r.values) v = v != 0 ? 1 : 0;
      return r;
    }
    if (op == "Unsqueeze" || op == "Squeeze") {
      std::vector<int64_t> axes = attr_ints(n, "axes");
      if (n.input_size() > 1 && known(1)) axes = in[1]->values;
      IntTensor r = x;
      if (op == "Unsqueeze") {
        const auto rank = static_cast<int64_t>(x.dims.size() + axes.size());
        std::vector<int64_t> sorted;
        for (int64_t a : axes) sorted.push_back(a < 0 ? a + rank : a);
        std::sort(sorted.begin(), sorted.end());
        for (int64_t a : sorted) {
          if (a < 0 || a > static_cast<int64_t>(r.dims.size())) return std::nullopt;
          r.dims.insert(r.dims.begin() + a, 1);
        }
      } else {
        const auto rank = static_cast<int64_t>(x.dims.size());
        Shape dims;
        for (int64_t i = 0; i < rank; ++i) {
          bool drop = axes.empty() ? x.dims[static_cast<std::size_t>(i)] == 1
                                   : std::any_of(axes.begin(), axes.end(), [&](int64_t a) { return (a < 0 ? a + rank : a) == i; });
          if (!drop) dims.push_back(x.dims[static_cast<std::size_t>(i)]);
        }
        r.dims = dims;
      }
      return r;
    }
    if (op == "Reshape") {
      if (in.size() < 2 || in[1]->dims.size() != 1) return std::nullopt;
      Shape dims = in[1]->values;
      int64_t known_elems = 1, infer = -1;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == 0 && attr_int(n, "allowzero", 0) == 0) {
          if (i >= x.dims.size()) return std::nullopt;
          dims[i] = x.dims[i];
        }
        if (dims[i] == -1) {
          if (infer >= 0) return std::nullopt;
          infer = static_cast<int64_t>(i);
        } else if (dims[i] < 0) {
          return std::nullopt;
        } else {
          if (dims[i] > kMaxFoldElements) return std::nullopt;
          known_elems *= dims[i];
          if (known_elems > kMaxFoldElements) return std::nullopt;  // more than any folded tensor holds
        }
      }
      const auto total = static_cast<int64_t>(x.values.size());
      if (infer >= 0) {
        if (known_elems == 0 || total % known_elems != 0) return std::nullopt;
        dims[static_cast<std::size_t>(infer)] = total / known_elems;
      }
      if (num_elements(dims) != total) return std::nullopt;
      IntTensor r = x;
      r.dims = dims;
      return r;
    }
    if (op == "Concat") {
      for (const auto& t : in)
        if (!t || t->dims.size() != 1) return std::nullopt;  // shape vectors only
      IntTensor r;
      r.type = x.type;
      for (const auto& t : in) r.values.insert(r.values.end(), t->values.begin(), t->values.end());
      r.dims = {static_cast<int64_t>(r.values.size())};
      return r;
    }
    if (op == "Gather") {
      if (x.dims.size() != 1 || !known(1)) return std::nullopt;
      const IntTensor& idx = *in[1];
      IntTensor r;
      r.type = x.type;
      r.dims = idx.dims;
      const auto size = static_cast<int64_t>(x.values.size());
      for (int64_t i : idx.values) {
        if (i < -size || i >= size) return std::nullopt;
        r.values.push_back(x.values[static_cast<std::size_t>(i < 0 ? i + size : i)]);
      }
      return r;
    }
    if (op == "Slice") {
      if (x.dims.size() != 1 || n.input_size() < 3) return std::nullopt;
      for (std::size_t i = 1; i < in.size(); ++i)
        if (in[i] && in[i]->values.size() != 1) return std::nullopt;  // one axis: shape vectors are 1-D
      const auto size = static_cast<int64_t>(x.values.size());
      int64_t start = in[1]->values.at(0), end = in[2]->values.at(0), step = 1;
      if (n.input_size() > 3 && !n.input(3).empty() && in[3]->values.at(0) != 0 && in[3]->values.at(0) != -1)
        return std::nullopt;
      if (n.input_size() > 4 && !n.input(4).empty()) step = in[4]->values.at(0);
      if (step != 1 || in[1]->values.size() != 1) return std::nullopt;
      start = clamp_index(start, size);
      end = clamp_index(end, size);
      IntTensor r;
      r.type = x.type;
      for (int64_t i = start; i < end; ++i) r.values.push_back(x.values[static_cast<std::size_t>(i)]);
      r.dims = {static_cast<int64_t>(r.values.size())};
      return r;
    }
    if (op == "Range") {
      if (in.size() < 3 || x.values.size() != 1 || in[1]->values.size() != 1 || in[2]->values.size() != 1) return std::nullopt;
      const int64_t start = x.values[0], limit = in[1]->values[0], delta = in[2]->values[0];
      if (delta == 0) return std::nullopt;
      IntTensor r;
      r.type = x.type;
      for (int64_t v = start; delta > 0 ? v < limit : v > limit;) {
        r.values.push_back(v);
        if (static_cast<int64_t>(r.values.size()) > kMaxFoldElements || __builtin_add_overflow(v, delta, &v))
          return std::nullopt;
      }
      r.dims = {static_cast<int64_t>(r.values.size())};
      return r;
    }
    if (op == "Not") {
      IntTensor r = x;
      for (auto& v : r.values) v = v == 0 ? 1 : 0;
      return r;
    }
    if (op == "ReduceProd" || op == "ReduceSum") {
      if (x.dims.size() > 1) return std::nullopt;
      IntTensor r;
      r.type = x.type;
      r.values = {op == "ReduceProd" ? std::accumulate(x.values.begin(), x.values.end(), int64_t{1}, std::multiplies<>())
                                     : std::accumulate(x.values.begin(), x.values.end(), int64_t{0})};
      if (attr_int(n, "keepdims", 1) != 0 && x.dims.size() == 1) r.dims = {1};
      return r;
    }
    static const std::set<std::string, std::less<>> kBinary = {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min",
                                                               "Equal", "Less", "Greater", "And", "Or"};
    if (kBinary.contains(op) && in.size() == 2) return broadcast(op, x, *in[1]);
    if (op == "Where" && in.size() == 3) {
      const IntTensor& a = *in[1];
      const IntTensor& c = *in[2];
      const std::size_t n_out = std::max({x.values.size(), a.values.size(), c.values.size()});
      for (const IntTensor* t : {&x, &a, &c})
        if (t->values.size() != 1 && t->values.size() != n_out) return std::nullopt;
      IntTensor r;
      r.type = a.type;
      r.dims = x.values.size() == n_out ? x.dims : a.values.size() == n_out ? a.dims : c.dims;
      for (std::size_t i = 0; i < n_out; ++i) {
        auto at = [&](const IntTensor& t) { return t.values[t.values.size() == 1 ? 0 : i]; };
        r.values.push_back(at(x) != 0 ? at(a) : at(c));
      }
      return r;
    }
    return std::nullopt;
  }

 private:
  static int64_t clamp_index(int64_t i, int64_t size) {
    if (i < 0) i += size;
    return std::clamp<int64_t>(i, 0, size);
  }

  // Elementwise with one operand of one element or both of the same size.
  static std::optional<IntTensor> broadcast(const std::string& op, const IntTensor& a, const IntTensor& c) {
    if (a.values.size() != 1 && c.values.size() != 1 && a.values.size() != c.values.size()) return std::nullopt;
    const bool a_wider = a.values.size() != 1 || (c.values.size() == 1 && a.dims.size() >= c.dims.size());
    IntTensor r;
    r.dims = a_wider ? a.dims : c.dims;
    r.type = a.type;
    const bool logical = op == "Equal" || op == "Less" || op == "Greater" || op == "And" || op == "Or";
    if (logical) r.type = onnx::TensorProto::BOOL;
    const std::size_t count = std::max(a.values.size(), c.values.size());
    for (std::size_t i = 0; i < count; ++i) {
      const int64_t x = a.values[a.values.size() == 1 ? 0 : i], y = c.values[c.values.size() == 1 ? 0 : i];
      int64_t v = 0;
      bool overflow = false;
      if (op == "Add") overflow = __builtin_add_overflow(x, y, &v);
      else if (op == "Sub") overflow = __builtin_sub_overflow(x, y, &v);
      else if (op == "Mul") overflow = __builtin_mul_overflow(x, y, &v);
      else if (op == "Div" || op == "Mod") {
        if (y == 0 || (y == -1 && x == std::numeric_limits<int64_t>::min())) return std::nullopt;
        // ONNX integer Div truncates toward zero, as C++ does; Mod with fmod = 0 takes the
        // divisor's sign.
        v = op == "Div" ? x / y : x % y;
        if (op == "Mod" && v != 0 && (v < 0) != (y < 0)) v += y;
      } else if (op == "Max") v = std::max(x, y);
      else if (op == "Min") v = std::min(x, y);
      else if (op == "Equal") v = x == y;
      else if (op == "Less") v = x < y;
      else if (op == "Greater") v = x > y;
      else if (op == "And") v = (x != 0) && (y != 0);
      else if (op == "Or") v = (x != 0) || (y != 0);
      if (overflow) return std::nullopt;
      r.values.push_back(v);
    }
    return r;
  }
};

// Ops that are one elementwise kernel with a single runtime input. ONNX defines many; the
// builder has Relu, Sigmoid and Tanh. Piecewise-linear ones are modelled as Relu and smooth ones
// as Tanh: one elementwise op whose gradient reads one saved tensor, the same kernel class and
// size, which is what the cost model sees.
const std::set<std::string, std::less<>> kPiecewiseUnary = {
    "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "Clip", "HardSigmoid", "HardSwish",
    "Abs", "Sign", "Floor", "Ceil", "Round", "Shrink"};
const std::set<std::string, std::less<>> kSmoothUnary = {
    "Erf", "Exp", "Log", "Softplus", "Softsign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
    "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Mish"};
// Ops whose output is fully determined by shapes (never by runtime values).
const std::set<std::string, std::less<>> kShapeOnly = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};

class Importer {
 public:
  Importer(std::string file, onnx::ModelProto& model, const OnnxImportOptions& options, OnnxImportReport& report)
      : file_(std::move(file)),
        model_(model),
        options_(options),
        report_(report),
        b_(BuilderOptions{.granularity = options.granularity,
                          .optimizer = options.optimizer,
                          .batch_norm = options.batch_norm,
                          .shape_ops = options.shape_ops}) {}

  OpGraph run() {
    if (!model_.has_graph() || model_.graph().node_size() == 0)
      fail("no graph with nodes: not an ONNX model, or an empty one");
    // Refused before any work: a node on the data path becomes at least two ops (its forward op
    // and its gradient), and the builder stops at detail::kMaxModelOps; a million-node file took
    // 30 s and 2.2 GB to find that out.
    if (static_cast<std::size_t>(model_.graph().node_size()) > kMaxOnnxNodes)
      fail(std::to_string(model_.graph().node_size()) + " nodes: at most " + std::to_string(kMaxOnnxNodes) +
           " (a node on the data path becomes at least two training ops, its own and its gradient, and a "
           "training graph holds at most " +
           std::to_string(detail::kMaxModelOps) + " ops)");
    read_header();
    check_known_ops();
    apply_dimension_overrides();
    infer_shapes();
    collect_tensors();
    build_inputs();
    const auto& nodes = model_.graph().node();
    for (int i = 0; i < nodes.size(); ++i) import_node(nodes[i], i);
    add_loss();
    OpGraph g = std::move(b_).finish();
    report_.stats = b_.stats();
    return g;
  }

 private:
  // --- errors ----------------------------------------------------------------------------------
  [[noreturn]] void fail(const std::string& what) const { throw InputError(file_ + ": " + what); }
  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& what) const {
    fail("node '" + node_name(n) + "' (" + n.op_type() + "): " + what);
  }
  std::string node_name(const onnx::NodeProto& n) const {
    if (!n.name().empty()) return n.name();
    auto it = node_index_.find(&n);
    return n.op_type() + "#" + std::to_string(it == node_index_.end() ? -1 : it->second);
  }
  void approximate(const onnx::NodeProto& n, std::string how) {
    report_.approximations.push_back({node_name(n), n.op_type(), std::move(how)});
  }

  // --- model-level passes ------------------------------------------------------------------------
  void read_header() {
    report_.producer = model_.producer_name();
    if (!model_.producer_version().empty()) report_.producer += " " + model_.producer_version();
    for (const auto& o : model_.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") report_.opset = o.version();
    if (report_.opset == 0) fail("opset_import has no entry for the default ONNX domain");
    for (int i = 0; i < model_.graph().node_size(); ++i) {
      node_index_[&model_.graph().node(i)] = i;
      original_op_types_.push_back(model_.graph().node(i).op_type());
    }
  }

  // Unknown op types and foreign domains fail before shape inference, which would otherwise
  // report them less clearly (or not at all).
  void check_known_ops() const {
    for (const auto& n : model_.graph().node()) {
      if (!n.domain().empty() && n.domain() != "ai.onnx")
        fail(n, "operator domain '" + n.domain() + "' is not supported (only the default ONNX domain)");
      if (onnx::OpSchemaRegistry::Schema(n.op_type(), onnx::ONNX_DOMAIN) == nullptr)
        fail(n, "'" + n.op_type() + "' is not an ONNX operator");
    }
  }

  bool is_initializer(const std::string& name) const {
    for (const auto& t : model_.graph().initializer())
      if (t.name() == name) return true;
    return false;
  }

  // Fixes the batch and named symbolic dimensions of the graph inputs before inference, so every
  // shape downstream comes out static.
  void apply_dimension_overrides() {
    auto* graph = model_.mutable_graph();
    for (auto& input : *graph->mutable_input()) {
      if (is_initializer(input.name())) continue;  // IR < 4 lists initializers as inputs too
      if (!input.type().has_tensor_type() || !input.type().tensor_type().has_shape())
        fail("graph input '" + input.name() + "' has no tensor shape");
      auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
      for (int d = 0; d < shape->dim_size(); ++d) {
        auto* dim = shape->mutable_dim(d);
        if (d == 0 && options_.batch > 0) {
          if (dim->has_dim_value() && dim->dim_value() != options_.batch && exported_batch_ == 0)
            exported_batch_ = dim->dim_value();
          dim->set_dim_value(options_.batch);
          continue;
        }
        if (dim->has_dim_value()) continue;
        std::string param = dim->has_dim_param() ? dim->dim_param() : std::string();
        auto it = options_.dim_values.find(param);
        if (!param.empty() && it != options_.dim_values.end()) {
          dim->set_dim_value(it->second);
          continue;
        }
        fail("graph input '" + input.name() + "' dimension " + std::to_string(d) + " is symbolic ('" + param +
             "'): give its size (" + (d == 0 ? "OnnxImportOptions::batch" : "OnnxImportOptions::dim_values") + ")");
      }
    }
    // An exporter with a fixed batch (torch.onnx.export without dynamic_axes) writes it into the
    // graph outputs' shapes too, and strict inference would reject the new batch against them.
    // Inference fills the outputs' shapes in again from the inputs.
    if (options_.batch > 0)
      for (auto& output : *graph->mutable_output())
        if (output.type().has_tensor_type()) output.mutable_type()->mutable_tensor_type()->clear_shape();
    if (exported_batch_ > 0) rewrite_baked_batch();
  }

  // A file traced at a fixed batch (torch.onnx.export without dynamic_axes) bakes that batch into
  // the literal shapes of its Reshape and Expand nodes (x.view(1, -1) becomes Reshape(x, [1, -1])).
  // With another batch, each such literal whose first entry is the exported batch gets the new
  // one, and the rewrite is listed in the report. Literals that hold the batch elsewhere (a
  // sequence-first layout, batch·heads) are left alone: inference then fails with a message
  // saying how to re-export.
  void rewrite_baked_batch() {
    auto* graph = model_.mutable_graph();
    const std::unordered_map<std::string, onnx::TensorProto*> literals = constant_tensors(*graph);
    std::set<std::string> done;
    for (const auto& n : graph->node()) {
      if ((n.op_type() != "Reshape" && n.op_type() != "Expand") || n.input_size() < 2) continue;
      auto it = literals.find(n.input(1));
      if (it == literals.end() || done.count(n.input(1))) continue;
      onnx::TensorProto& t = *it->second;
      std::optional<std::vector<int64_t>> v = t.data_type() == onnx::TensorProto::INT64 ? int_values(t) : std::nullopt;
      if (!v || v->size() < 2 || v->front() != exported_batch_) continue;
      const std::vector<int64_t> before = *v;
      (*v)[0] = options_.batch;
      t.clear_raw_data();
      t.clear_int64_data();
      for (int64_t x : *v) t.add_int64_data(x);
      done.insert(n.input(1));
      approximate(n, "shape literal " + shape_text(before) + " rewritten to " + shape_text(*v) + ": its first entry was the exported batch " +
                         std::to_string(exported_batch_));
    }
  }

  // ONNX's shape inference divides by strides and multiplies by dilations without checking them
  // (ONNX 1.12: strides 0 on a Conv or a pool is a SIGFPE), so every window attribute is checked
  // before inference sees it.
  void check_window_attributes() const {
    static const std::set<std::string, std::less<>> kWindowOps = {
        "Conv", "ConvInteger", "QLinearConv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "MaxUnpool"};
    for (const auto& n : model_.graph().node()) {
      if (!kWindowOps.contains(n.op_type())) continue;
      for (const auto& a : n.attribute()) {
        const std::string& name = a.name();
        const int64_t least = name == "pads" || name == "output_padding" ? 0 : 1;
        if (name != "strides" && name != "dilations" && name != "kernel_shape" && name != "pads" &&
            name != "output_padding" && name != "output_shape")
          continue;
        if (a.ints_size() > 8) fail(n, name + ": " + std::to_string(a.ints_size()) + " values (at most 8 axes)");
        for (int64_t v : a.ints())
          if (v < least || v > kMaxWindowValue)
            fail(n, name + " value " + std::to_string(v) + ": must be between " + std::to_string(least) + " and 2^31");
      }
    }
  }

  // Every node of the default domain against its operator's schema at the model's opset (inputs,
  // outputs, attributes), as ONNX's checker does: ONNX 1.12's shape inference trusts them, and
  // dereferenced null on a Shape-15 node given four inputs (found by onnx_fuzz).
  void check_node_schemas() const {
    for (const auto& n : model_.graph().node()) {  // all of the default domain (check_known_ops)
      const onnx::OpSchema* schema =
          onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(std::min<int64_t>(report_.opset, 1 << 20)), "");
      if (schema == nullptr) continue;  // an operator ONNX does not know: the importer names it
      try {
        schema->Verify(n);
      } catch (const std::exception& e) {
        fail(n, std::string("not a valid ") + n.op_type() + " at opset " + std::to_string(report_.opset) + ": " +
                    e.what());
      }
    }
  }

  // Every node input names a graph input, an initializer or an output of an earlier node (ONNX
  // requires the nodes in topological order): ONNX 1.12's shape inference read null on a Shape of
  // a name nothing defines (found by onnx_fuzz).
  void check_inputs_defined() const {
    const auto& g = model_.graph();
    std::set<std::string, std::less<>> known;
    for (const auto& i : g.input()) known.insert(i.name());
    for (const auto& t : g.initializer()) known.insert(t.name());
    for (const auto& n : g.node()) {
      for (const auto& in : n.input())
        if (!in.empty() && !known.contains(in))
          fail(n, "input '" + in + "' is no graph input, initializer or output of an earlier node");
      for (const auto& o : n.output())
        if (!o.empty()) known.insert(o);
    }
  }

  // A Pad's amounts, as the window attributes: ONNX 1.12's inference adds them to the dimensions
  // unchecked (pads of 8.6e18, found by onnx_fuzz, overflowed there and in the element count).
  // Read from the attribute (opset < 11) or from the initializer or Constant node that feeds them.
  void check_pad_amounts() {
    const std::unordered_map<std::string, onnx::TensorProto*> constants = constant_tensors(*model_.mutable_graph());
    for (const auto& n : model_.graph().node()) {
      if (n.op_type() != "Pad") continue;
      std::optional<std::vector<int64_t>> pads;
      if (const onnx::AttributeProto* a = find_attr(n, "pads")) pads.emplace(a->ints().begin(), a->ints().end());
      if (n.input_size() > 1 && !n.input(1).empty())
        if (auto it = constants.find(n.input(1)); it != constants.end()) pads = int_values(*it->second);
      if (!pads) continue;
      for (int64_t v : *pads)
        if (v > kMaxWindowValue || v < -kMaxWindowValue)
          fail(n, "pads value " + std::to_string(v) + ": must be between 0 and 2^31");
    }
  }

  // ONNX lets a convolution leave out kernel_shape ("inferred from W"), but ONNX 1.12's shape
  // inference then reads W's type without checking it is known and dereferences null (a SIGSEGV
  // when W has no type). The importer needs W as an initializer anyway: kernel_shape is filled in
  // from its dimensions before inference runs.
  void complete_kernel_shapes() {
    static const std::map<std::string, int, std::less<>> kWeightInput = {
        {"Conv", 1}, {"ConvInteger", 1}, {"ConvTranspose", 1}, {"QLinearConv", 3}};
    for (auto& n : *model_.mutable_graph()->mutable_node()) {
      const auto op = kWeightInput.find(n.op_type());
      if (op == kWeightInput.end() || find_attr(n, "kernel_shape")) continue;
      const int w = op->second;
      const onnx::TensorProto* weights = nullptr;
      if (n.input_size() > w)
        for (const auto& t : model_.graph().initializer())
          if (t.name() == n.input(w)) weights = &t;
      if (!weights || weights->dims_size() < 3)
        fail(n, "no kernel_shape, and input " + std::to_string(w) +
                    " (the weights) is no initializer of rank >= 3 to take it from");
      onnx::AttributeProto* a = n.add_attribute();
      a->set_name("kernel_shape");
      a->set_type(onnx::AttributeProto::INTS);
      for (int d = 2; d < weights->dims_size(); ++d) a->add_ints(weights->dims(d));
    }
  }

  void infer_shapes() {
    complete_kernel_shapes();
    check_window_attributes();
    check_pad_amounts();
    check_node_schemas();
    check_inputs_defined();
    check_tensor_data();
    // value_info left by the exporter may carry symbolic batch dimensions that now conflict with
    // the overrides; inference recomputes every intermediate shape from the inputs.
    model_.mutable_graph()->clear_value_info();
    run_shape_inference();
    // Shape arithmetic folded to literals lets inference fix shapes it could not before, which
    // may in turn make more Shape nodes constant: repeat while something new folds.
    for (int round = 0; round < 8 && fold_shape_arithmetic() > 0; ++round) {
      model_.mutable_graph()->clear_value_info();
      run_shape_inference();
    }
  }

  // What to do when a batch override contradicts shapes the file fixed ("" when batch is not
  // overridden or the file's batch was symbolic).
  std::string baked_batch_hint() const {
    if (exported_batch_ == 0) return "";
    return "; the file was exported with a fixed batch of " + std::to_string(exported_batch_) +
           " baked into its shapes, which batch = " + std::to_string(options_.batch) +
           " contradicts: re-export with a symbolic batch (torch.onnx.export(..., dynamic_axes={'<input>': {0: "
           "'batch'}})) or import with batch 0 (the exported one)";
  }

  // The static shape of every tensor inference (or the file) gives one.
  std::unordered_map<std::string, Shape> static_shapes() const {
    std::unordered_map<std::string, Shape> shapes;
    const auto& g = model_.graph();
    for (const auto& t : g.initializer()) shapes[t.name()] = Shape(t.dims().begin(), t.dims().end());
    auto record = [&](const onnx::ValueInfoProto& v) {
      if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
      Shape s;
      for (const auto& d : v.type().tensor_type().shape().dim()) {
        if (!d.has_dim_value() || d.dim_value() < 0) return;
        s.push_back(d.dim_value());
      }
      shapes.emplace(v.name(), std::move(s));
    };
    for (const auto& v : g.input()) record(v);
    for (const auto& v : g.value_info()) record(v);
    for (const auto& v : g.output()) record(v);
    return shapes;
  }

  // Evaluates integer shape arithmetic (ShapeFolder) over the current static shapes and turns
  // each evaluated node into a Constant holding its value (name and outputs kept). Returns the
  // number of nodes turned into Constants.
  int fold_shape_arithmetic() {
    const auto shapes = static_shapes();
    std::unordered_map<std::string, IntTensor> known;
    for (const auto& t : model_.graph().initializer())
      if (auto v = int_tensor(t)) known[t.name()] = std::move(*v);
    auto shape_of = [&](const std::string& name) -> std::optional<Shape> {
      auto it = shapes.find(name);
      return it == shapes.end() ? std::nullopt : std::optional<Shape>(it->second);
    };
    int replaced = 0;
    for (auto& n : *model_.mutable_graph()->mutable_node()) {
      if (n.output_size() != 1 || n.output(0).empty()) continue;
      ShapeFolder::Inputs in;
      for (const auto& i : n.input()) {
        auto it = known.find(i);
        in.push_back(it == known.end() ? std::nullopt : std::optional<IntTensor>(it->second));
      }
      std::optional<IntTensor> v = ShapeFolder::eval(n, in, shape_of);
      if (!v || num_elements(v->dims) != static_cast<int64_t>(v->values.size())) continue;
      if (n.op_type() != "Constant") {
        n.clear_input();
        n.clear_attribute();
        n.set_op_type("Constant");
        onnx::AttributeProto* a = n.add_attribute();
        a->set_name("value");
        a->set_type(onnx::AttributeProto::TENSOR);
        *a->mutable_t() = to_tensor_proto(*v);
        ++replaced;
      }
      known[n.output(0)] = std::move(*v);
    }
    return replaced;
  }

  void run_shape_inference() {
    try {
      onnx::shape_inference::InferShapes(model_, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(/*check_type=*/false, /*strict=*/1,
                                                                     /*data_prop=*/true));
    } catch (const std::exception& e) {
      fail(std::string("ONNX shape inference failed: ") + e.what() + baked_batch_hint());
    }
  }

  // A shape from the file or from inference: no negative dimension and at most 2^40 elements
  // (4 TiB of floats), so that the element, byte and FLOP counts made of it fit int64.
  void check_shape(const std::string& name, const Shape& shape) const {
    constexpr int64_t kMaxElements = int64_t{1} << 40;
    int64_t elements = 1;
    for (int64_t d : shape) {
      if (d < 0) fail("tensor '" + name + "' is " + shape_text(shape) + ": a negative dimension");
      if (d > 0 && elements > kMaxElements / d)
        fail("tensor '" + name + "' is " + shape_text(shape) + ": more than 2^40 elements");
      elements *= d;
    }
  }

  // Every tensor the file holds (initializers, node attributes) has a valid shape, and raw bytes
  // that fill it exactly: ONNX 1.12's shape inference copies an int64 tensor's raw bytes into a
  // buffer sized by whole elements (ParseData), so 63 bytes overflowed a 56-byte buffer
  // (fuzz/onnx_fuzz, found in CI).
  void check_tensor_data() const {
    auto check = [&](const onnx::TensorProto& t) {
      const Shape shape(t.dims().begin(), t.dims().end());
      check_shape(t.name(), shape);
      if (t.raw_data().empty()) return;
      int64_t width = 0;  // bytes per element of the fixed-size types
      switch (t.data_type()) {
        case onnx::TensorProto::UINT8: case onnx::TensorProto::INT8: case onnx::TensorProto::BOOL: width = 1; break;
        case onnx::TensorProto::UINT16: case onnx::TensorProto::INT16: case onnx::TensorProto::FLOAT16:
        case onnx::TensorProto::BFLOAT16: width = 2; break;
        case onnx::TensorProto::FLOAT: case onnx::TensorProto::INT32: case onnx::TensorProto::UINT32: width = 4; break;
        case onnx::TensorProto::INT64: case onnx::TensorProto::UINT64: case onnx::TensorProto::DOUBLE:
        case onnx::TensorProto::COMPLEX64: width = 8; break;
        case onnx::TensorProto::COMPLEX128: width = 16; break;
        default: fail("tensor '" + t.name() + "': raw_data for a tensor of type " + std::to_string(t.data_type()) +
                      ", which has no fixed element size");
      }
      int64_t elements = 1;
      for (int64_t d : shape) elements *= d;  // at most 2^40 (check_shape)
      if (static_cast<int64_t>(t.raw_data().size()) != elements * width)
        fail("tensor '" + t.name() + "' is " + shape_text(shape) + ": " + std::to_string(t.raw_data().size()) +
             " bytes of raw_data, not the " + std::to_string(elements * width) + " its shape and type take");
    };
    for (const auto& t : model_.graph().initializer()) check(t);
    for (const auto& n : model_.graph().node())
      for (const auto& a : n.attribute()) {
        if (a.has_t()) check(a.t());
        for (const auto& t : a.tensors()) check(t);
      }
  }

  // Records the static shape and type of every tensor the graph names.
  void collect_tensors() {
    const auto& g = model_.graph();
    for (const auto& t : g.initializer()) {
      TensorInfo& info = tensors_[t.name()];
      info.shape.assign(t.dims().begin(), t.dims().end());
      check_shape(t.name(), info.shape);
      info.elem_type = t.data_type();
      info.constant = true;
      info.from_initializer = true;
      info.data = &t;
    }
    auto record = [&](const onnx::ValueInfoProto& v) {
      if (tensors_.count(v.name()) && tensors_[v.name()].constant) return;
      if (!v.type().has_tensor_type()) return;
      const auto& tt = v.type().tensor_type();
      TensorInfo& info = typed_[v.name()];
      info.elem_type = tt.elem_type();
      if (!tt.has_shape()) return;
      Shape s;
      for (const auto& d : tt.shape().dim()) {
        if (!d.has_dim_value()) return;  // unknown: left empty, caught where the tensor is used
        s.push_back(d.dim_value());
      }
      check_shape(v.name(), s);
      info.shape = std::move(s);
      known_shape_.insert(v.name());
    };
    for (const auto& v : g.input()) record(v);
    for (const auto& v : g.value_info()) record(v);
    for (const auto& v : g.output()) record(v);
    for (const auto& n : g.node())
      for (const auto& in : n.input())
        if (!in.empty()) ++consumers_[in];
    for (const auto& o : g.output()) ++consumers_[o.name()];
  }

  // The inferred type and shape of a node output; fails when inference could not give a static one.
  TensorInfo inferred(const onnx::NodeProto& n, const std::string& name) const {
    auto it = typed_.find(name);
    if (it == typed_.end() || !known_shape_.count(name))
      fail(n, "the shape of output '" + name + "' could not be inferred (missing or symbolic shapes)");
    return it->second;
  }

  // Fails on the first node computing a runtime tensor that inference left without a static
  // shape, naming it (the same runtime/constant split as import_node makes).
  void check_runtime_shapes() {
    std::set<std::string> runtime;
    for (const auto& v : model_.graph().input())
      if (!tensors_.count(v.name())) runtime.insert(v.name());
    for (const auto& n : model_.graph().node()) {
      bool rt = std::any_of(n.input().begin(), n.input().end(), [&](const std::string& i) { return runtime.count(i) > 0; });
      if (!rt || n.op_type() == "Shape" || n.op_type() == "Size") continue;
      for (const auto& o : n.output()) {
        if (o.empty()) continue;
        if (!known_shape_.count(o) && consumers_[o] > 0)
          fail(n, "the shape of output '" + o + "' could not be inferred (missing or symbolic shapes)");
        runtime.insert(o);
      }
    }
  }

  void build_inputs() {
    const auto& g = model_.graph();
    check_runtime_shapes();
    std::vector<std::string> names;
    std::vector<Shape> shapes;
    for (const auto& v : g.input()) {
      if (tensors_.count(v.name())) continue;  // an initializer
      if (!known_shape_.count(v.name())) fail("graph input '" + v.name() + "' has no static shape");
      TensorInfo info = typed_[v.name()];
      info.layout = info.shape.size() == 4 ? Layout::kChannelsLast : Layout::kAsIs;
      names.push_back(v.name());
      shapes.push_back(info.builder_shape());
      tensors_[v.name()] = info;
    }
    if (names.empty()) fail("the graph has no inputs besides initializers");
    if (g.output_size() == 0) fail("the graph has no outputs");
    const std::string& out = g.output(0).name();
    if (!known_shape_.count(out)) fail("graph output '" + out + "' has no static shape");
    const Shape& os = typed_[out].shape;
    if (num_elements(os) == 0)
      fail("graph output '" + out + "' is " + shape_text(os) + ": empty, no logits for the loss");
    label_rows_ = os.size() < 2 ? (os.empty() ? 1 : os[0]) : num_elements(os) / os.back();
    shapes.push_back({label_rows_});
    std::vector<Value> values = b_.input_pipeline(shapes);
    for (std::size_t i = 0; i < names.size(); ++i) tensors_[names[i]].value = values[i];
    labels_ = values.back();
    report_.inputs = names;
    report_.logits = out;
  }

  // --- tensors as builder values ---------------------------------------------------------------
  TensorInfo& tensor(const onnx::NodeProto& n, const std::string& name) {
    auto it = tensors_.find(name);
    if (it == tensors_.end())
      fail(n, "input '" + name + "' is not produced by an earlier node, a graph input or an initializer");
    return it->second;
  }
  TensorInfo& input(const onnx::NodeProto& n, int i) {
    if (i >= n.input_size() || n.input(i).empty()) fail(n, "input " + std::to_string(i) + " is missing");
    return tensor(n, n.input(i));
  }
  bool has_input(const onnx::NodeProto& n, int i) const { return i < n.input_size() && !n.input(i).empty(); }

  // The builder value of `t` with builder shape `want` (same element count). A constant becomes a
  // variable the first time it is needed: trainable when it holds weights (floating point, more
  // than one element, derived from initializers), else a non-trainable constant. A value held in
  // another shape is reinterpreted with a Reshape (a noop kernel), as a layout change costs
  // nothing in the cost model's terms.
  // `may_train` false keeps a constant non-trainable even when it holds floating-point
  // initializer data (masks and fills, not weights).
  Value value_as(const std::string& name, TensorInfo& t, const Shape& want, bool may_train = true) {
    if (consumed_.count(name))
      fail("tensor '" + name + "' is read both as the parameters of a normalisation/LSTM node and elsewhere");
    if (!t.shape_known) fail("tensor '" + name + "' has no inferred shape");
    if (t.elements() != num_elements(want))
      fail("tensor '" + name + "' is " + shape_text(t.shape) + " where " + std::to_string(num_elements(want)) +
           " elements (" + shape_text(want) + ") are expected");
    if (!t.value.valid()) {
      PLACELAB_CHECK(t.constant) << "runtime tensor " << name << " has no value";
      bool weights = may_train && t.from_initializer && is_float_type(t.elem_type) && t.elements() > 1;
      t.value = weights ? b_.variable(name, want) : b_.non_trainable_variable(name, want);
      if (weights) trainable_created_.insert(name);
      return t.value;
    }
    if (b_.shape(t.value) == want) return t.value;
    PLACELAB_CHECK(num_elements(b_.shape(t.value)) == num_elements(want))
        << name << ": " << shape_text(b_.shape(t.value)) << " as " << shape_text(want);
    return b_.reshape(t.value, want);
  }
  Value value_in(const std::string& name, TensorInfo& t, Layout layout) {
    Shape want = layout == Layout::kChannelsLast ? to_channels_last(t.shape) : t.shape;
    return value_as(name, t, want);
  }
  Value in_value(const onnx::NodeProto& n, int i, Layout layout) { return value_in(n.input(i), input(n, i), layout); }

  // Stores the builder value of a node output; checks the builder's shape against inference.
  void set_output(const onnx::NodeProto& n, int i, Value v, Layout layout) {
    if (i >= n.output_size() || n.output(i).empty()) return;
    TensorInfo info = inferred(n, n.output(i));
    if (info.shape.size() < 3) layout = Layout::kAsIs;
    info.layout = layout;
    if (b_.shape(v) != info.builder_shape()) {
      if (num_elements(b_.shape(v)) != info.elements())
        fail(n, "modelled output " + shape_text(b_.shape(v)) + " does not match the inferred shape " +
                    shape_text(info.shape));
      // Same elements, other arrangement (e.g. a channels-last result of a rank-3 op).
      info.layout = Layout::kAsIs;
      v = b_.shape(v) == info.shape ? v : b_.reshape(v, info.shape);
    }
    info.value = v;
    tensors_[n.output(i)] = info;
  }
  // A value passed through unchanged (Identity, Cast…).
  void alias_output(const onnx::NodeProto& n, int i, const TensorInfo& from) {
    if (i >= n.output_size() || n.output(i).empty()) return;
    TensorInfo info = inferred(n, n.output(i));
    if (info.shape != from.shape) fail(n, "expected the output shape to equal the input shape");
    info.value = from.value;
    info.layout = from.layout;
    info.constant = from.constant;
    info.from_initializer = from.from_initializer;
    info.data = from.data;
    tensors_[n.output(i)] = info;
  }

  // --- nodes ------------------------------------------------------------------------------------
  // The layer scope of a node: onnx_node_scope of its name, else the name itself (without its
  // leading '/'), else "<op>_<index>".
  std::string layer_key(const onnx::NodeProto& n, int index) const {
    std::string scope = onnx_node_scope(n.name());
    if (!scope.empty()) return scope;
    std::string_view name = n.name();
    while (!name.empty() && name.front() == '/') name.remove_prefix(1);
    return name.empty() ? n.op_type() + "_" + std::to_string(index) : std::string(name);
  }

  void import_node(const onnx::NodeProto& n, int index) {
    ++report_.op_counts[original_op_types_[static_cast<std::size_t>(index)]];
    bool runtime = false;
    for (int i = 0; i < n.input_size(); ++i)
      if (!n.input(i).empty() && !tensor(n, n.input(i)).constant) runtime = true;
    const std::string& op = n.op_type();
    // Shape/Size read only static shapes; nodes without a runtime input compute constants, except
    // a part of a weight (below).
    if ((!runtime && !reads_part_of_weight(n)) || op == "Shape" || op == "Size") {
      fold(n);
      return;
    }
    std::string key = layer_key(n, index);
    auto [it, inserted] = layer_ids_.emplace(key, static_cast<int32_t>(layer_ids_.size()));
    (void)inserted;
    auto scope = b_.layer(key, it->second);
    try {
      dispatch(n);
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      // A builder shape check: the node's configuration is one the mapping does not cover.
      fail(n, std::string("cannot be modelled with these shapes: ") + e.what());
    }
  }

  // A Slice or Gather of a floating-point initializer (`self.pos[:, :n]`, a positional table cut
  // to the sequence length) trains the whole initializer: the node is built as a runtime slice
  // of its variable, not folded into a smaller constant that would become a variable of the
  // part's size. Not when a reader needs its weights as a constant (Conv, recurrent and
  // normalisation nodes), directly or through ops that only move data: an export without constant
  // folding computes nn.LSTM's W as Slice (its gates reordered) → Concat → Unsqueeze of the
  // initializer, and those fold into the constant the LSTM reads.
  bool reads_part_of_weight(const onnx::NodeProto& n) {
    if ((n.op_type() != "Slice" && n.op_type() != "Gather") || n.input_size() < 2 || n.output_size() != 1) return false;
    const TensorInfo& data = tensor(n, n.input(0));
    if (!data.from_initializer || !is_float_type(data.elem_type) || data.elements() <= 1 || !data.shape_known) return false;
    return !feeds_a_constant_reader(n.output(0));
  }

  // Whether `value` reaches a node that needs its input as a constant, through data-movement
  // nodes only. Each value is visited once, so the walk is linear in the graph.
  bool feeds_a_constant_reader(const std::string& value) {
    static const std::set<std::string, std::less<>> kConstantReaders = {
        "Conv", "ConvTranspose", "LSTM", "GRU", "RNN", "BatchNormalization", "LayerNormalization", "InstanceNormalization"};
    static const std::set<std::string, std::less<>> kMovers = {"Slice",     "Concat",  "Unsqueeze", "Squeeze",
                                                               "Transpose", "Reshape", "Identity",  "Split",
                                                               "Gather",    "Flatten", "Cast"};
    if (readers_.empty())
      for (const auto& m : model_.graph().node())
        for (const auto& i : m.input()) readers_[i].push_back(&m);
    std::set<std::string> seen{value};
    std::vector<std::string> frontier{value};  // values reached whose readers are still to be looked at
    while (!frontier.empty()) {
      const std::string v = std::move(frontier.back());
      frontier.pop_back();
      auto it = readers_.find(v);
      if (it == readers_.end()) continue;
      for (const onnx::NodeProto* m : it->second) {
        if (kConstantReaders.contains(m->op_type())) return true;
        if (!kMovers.contains(m->op_type())) continue;
        for (const auto& o : m->output())
          if (!o.empty() && seen.insert(o).second) frontier.push_back(o);
      }
    }
    return false;
  }

  void fold(const onnx::NodeProto& n) {
    ++report_.folded_nodes;
    bool from_init = false;
    for (int i = 0; i < n.input_size(); ++i)
      if (!n.input(i).empty()) from_init = from_init || tensor(n, n.input(i)).from_initializer;
    const onnx::TensorProto* data = nullptr;
    if (n.op_type() == "Constant") {
      const auto* a = find_attr(n, "value");
      if (a && a->has_t()) data = &a->t();
    }
    for (int i = 0; i < n.output_size(); ++i) {
      if (n.output(i).empty()) continue;
      TensorInfo info;
      auto it = typed_.find(n.output(i));
      if (it != typed_.end()) info = it->second;
      if (!known_shape_.count(n.output(i))) {
        // A constant nobody turns into a runtime value may keep an unknown shape (e.g. a Shape
        // of a dynamic reshape that was itself folded); it is checked where it is used.
        info.shape.clear();
        info.shape_known = false;
      }
      info.constant = true;
      info.from_initializer = from_init && n.op_type() != "Shape" && n.op_type() != "Size";
      info.data = data;
      tensors_[n.output(i)] = info;
    }
  }

  void dispatch(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    if (op == "Conv") return conv(n);
    if (op == "Gemm") return gemm(n);
    if (op == "MatMul") return matmul(n);
    if (op == "BatchNormalization") return batch_norm(n);
    if (op == "LayerNormalization") return layer_norm(n);
    if (op == "MaxPool" || op == "AveragePool") return pool(n);
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return global_pool(n);
    if (op == "Relu") return set_output(n, 0, b_.relu(in_value(n, 0, input(n, 0).layout)), input(n, 0).layout);
    if (op == "Sigmoid") return set_output(n, 0, b_.sigmoid(in_value(n, 0, input(n, 0).layout)), input(n, 0).layout);
    if (op == "Tanh") return set_output(n, 0, b_.tanh(in_value(n, 0, input(n, 0).layout)), input(n, 0).layout);
    if (kPiecewiseUnary.count(op) || kSmoothUnary.count(op)) return unary_approx(n);
    if (op == "Neg") return set_output(n, 0, b_.scale(in_value(n, 0, input(n, 0).layout), -1), input(n, 0).layout);
    if (op == "Sqrt") return set_output(n, 0, b_.pow(in_value(n, 0, input(n, 0).layout), 0.5), input(n, 0).layout);
    if (op == "Reciprocal")
      return set_output(n, 0, b_.pow(in_value(n, 0, input(n, 0).layout), -1), input(n, 0).layout);
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Max" || op == "Min" ||
        op == "PRelu")
      return binary(n);
    if (op == "Sum" || op == "Mean") return sum(n);
    if (op == "Concat") return concat(n);
    if (op == "Split") return split(n);
    if (kShapeOnly.count(op)) return reshape(n);
    if (op == "Transpose") return transpose(n);
    if (op == "Identity") return alias_output(n, 0, input(n, 0));
    if (op == "Cast") {
      approximate(n, "Cast modelled as free: the tensor keeps 4-byte elements");
      return alias_output(n, 0, input(n, 0));
    }
    if (op == "Dropout") return dropout(n);
    // A 2-D constant table on axis 0 is an embedding lookup, at runtime ids or constant ones (BERT's
    // position and token-type ids); anything else at constant indices is a slice.
    if (op == "Gather") {
      const bool table = input(n, 0).constant && input(n, 0).shape.size() == 2 && attr_int(n, "axis", 0) == 0;
      return table ? gather(n) : gather_slice(n);
    }
    if (op == "ReduceMean" || op == "ReduceSum") return reduce(n);
    if (op == "Softmax" || op == "LogSoftmax") return softmax(n);
    if (op == "LSTM") return lstm(n);
    if (op == "GRU") return gru(n);
    if (op == "Slice") return slice(n);
    if (op == "Expand") return expand(n);
    if (op == "Where") return where(n);
    if (op == "Pad") return pad(n);
    fail(n, "the importer cannot model '" + op + "' on runtime tensors (supported ops: docs/onnx.md)");
  }

  // Symmetric padding for a window op along one axis that gives the inferred output size: the
  // builder has one pad per side. Records an approximation when ONNX pads asymmetrically.
  int64_t window_pad(const onnx::NodeProto& n, int64_t in, int64_t window, int64_t stride, int64_t out,
                     int64_t begin, int64_t end) {
    int64_t p = (begin + end) / 2;
    for (int64_t candidate : {p, p + 1, p - 1}) {
      if (candidate < 0) continue;
      if ((in + 2 * candidate - window) / stride + 1 == out) {
        if (candidate != begin || candidate != end)
          approximate(n, "padding " + std::to_string(begin) + "/" + std::to_string(end) + " modelled as " +
                             std::to_string(candidate) + " on both sides (same output size)");
        return candidate;
      }
    }
    fail(n, "no symmetric padding gives the inferred output size " + std::to_string(out));
  }

  struct Window {
    int64_t kh, kw, stride, pad_h, pad_w;
  };
  // Reads kernel_shape/strides/pads/auto_pad/dilations of a 2-D window op on x [n,c,h,w] with
  // inferred output [n,k,ho,wo].
  Window window(const onnx::NodeProto& n, const Shape& x, const Shape& y, int64_t kh, int64_t kw,
                const std::array<int64_t, 4>& fused_pads = {0, 0, 0, 0}) {
    std::vector<int64_t> strides = attr_ints(n, "strides");
    std::vector<int64_t> dil = attr_ints(n, "dilations");
    std::vector<int64_t> pads = attr_ints(n, "pads");
    if (strides.empty()) strides = {1, 1};
    if (strides.size() != 2) fail(n, "expected 2 strides");
    if (strides[0] != strides[1])
      fail(n, "strides " + std::to_string(strides[0]) + "x" + std::to_string(strides[1]) +
                  " differ per axis: the builder's windows have one stride");
    for (int64_t d : dil)
      if (d != 1) fail(n, "dilations other than 1 are not supported");
    std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
    int64_t s = strides[0];
    std::array<int64_t, 4> p{0, 0, 0, 0};
    if (auto_pad == "NOTSET") {
      if (!pads.empty() && pads.size() != 4) fail(n, "expected 4 pads");
      if (pads.size() == 4) std::copy(pads.begin(), pads.end(), p.begin());
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t th = std::max<int64_t>(0, (y[2] - 1) * s + kh - x[2]);
      int64_t tw = std::max<int64_t>(0, (y[3] - 1) * s + kw - x[3]);
      bool upper = auto_pad == "SAME_UPPER";
      p = {upper ? th / 2 : th - th / 2, upper ? tw / 2 : tw - tw / 2, upper ? th - th / 2 : th / 2,
           upper ? tw - tw / 2 : tw / 2};
    }
    if (fused_pads != std::array<int64_t, 4>{0, 0, 0, 0}) {
      if (auto_pad != "NOTSET") fail(n, "auto_pad " + auto_pad + " after a Pad node is not supported");
      for (std::size_t i = 0; i < 4; ++i) p[i] += fused_pads[i];
    }
    // x is the unpadded input: its size plus the fused pads is what the window slides over.
    return {kh, kw, s, window_pad(n, x[2], kh, s, y[2], p[0], p[2]), window_pad(n, x[3], kw, s, y[3], p[1], p[3])};
  }

  void conv(const onnx::NodeProto& n) {
    TensorInfo& x = unpadded_input(n);
    const std::array<int64_t, 4> fused = input(n, 0).pads;
    TensorInfo& w = input(n, 1);
    if (x.shape.size() != 4) fail(n, "only 2-D convolutions (rank-4 input) are supported, input is " + shape_text(x.shape));
    if (!w.constant) fail(n, "the weights (input 1) must be an initializer");
    if (w.shape.size() != 4) fail(n, "weights " + shape_text(w.shape) + " are not [k, c/group, r, s]");
    const Shape y = inferred(n, n.output(0)).shape;
    const int64_t k = w.shape[0], cg = w.shape[1], r = w.shape[2], s = w.shape[3];
    const int64_t group = attr_int(n, "group", 1);
    if (group < 1 || x.shape[1] != cg * group || k % group != 0)
      fail(n, "group " + std::to_string(group) + " does not divide input channels " + std::to_string(x.shape[1]) +
                  " and filters " + std::to_string(k));
    Window win = window(n, x.shape, y, r, s, fused);
    Value xv = value_in(unpadded_name(n), x, Layout::kChannelsLast);
    Value out;
    if (group == 1) {
      out = b_.conv2d(xv, value_as(n.input(1), w, {r, s, cg, k}), win.stride, win.pad_h, win.pad_w);
    } else {
      // TF 1.x had no grouped convolution: split the channels, one Conv2D per group, concat.
      // Parameters and FLOPs equal the grouped kernel's.
      approximate(n, "group " + std::to_string(group) + " modelled as " + std::to_string(group) +
                         " convolutions on split channels + concat");
      consume(n, 1);
      std::vector<Value> parts = b_.split(xv, 3, static_cast<int>(group));
      std::vector<Value> outs;
      for (int64_t gi = 0; gi < group; ++gi) {
        Value wg = b_.variable(n.input(1) + "/group" + std::to_string(gi), {r, s, cg, k / group});
        outs.push_back(b_.conv2d(parts[static_cast<std::size_t>(gi)], wg, win.stride, win.pad_h, win.pad_w));
      }
      out = b_.concat(outs, 3);
    }
    if (has_input(n, 2)) out = b_.bias_add(out, value_as(n.input(2), input(n, 2), {k}));
    set_output(n, 0, out, Layout::kChannelsLast);
  }

  void gemm(const onnx::NodeProto& n) {
    TensorInfo& a = input(n, 0);
    TensorInfo& bt = input(n, 1);
    if (a.shape.size() != 2 || bt.shape.size() != 2) fail(n, "Gemm operands must be 2-D");
    bool trans_a = attr_int(n, "transA", 0) != 0, trans_b = attr_int(n, "transB", 0) != 0;
    const auto* alpha = find_attr(n, "alpha");
    const auto* beta = find_attr(n, "beta");
    if ((alpha && alpha->f() != 1.0f) || (beta && beta->f() != 1.0f))
      approximate(n, "alpha/beta scaling folded into the operands (no extra op)");
    Value av = in_value(n, 0, Layout::kAsIs);
    if (trans_a) av = b_.transpose(av, {1, 0});
    Value bv = in_value(n, 1, Layout::kAsIs);
    Value y = b_.matmul(av, bv, trans_b);
    int64_t cols = b_.shape(y)[1];
    if (has_input(n, 2)) {
      TensorInfo& c = input(n, 2);
      if (c.elements() == cols && (c.shape.size() == 1 || c.shape[0] == 1))
        y = b_.bias_add(y, value_as(n.input(2), c, {cols}));
      else
        y = b_.add(y, in_value(n, 2, Layout::kAsIs));
    }
    set_output(n, 0, y, Layout::kAsIs);
  }

  void matmul(const onnx::NodeProto& n) {
    TensorInfo& a = input(n, 0);
    TensorInfo& bt = input(n, 1);
    if (a.shape.size() < 2 || bt.shape.size() < 2) fail(n, "1-D MatMul operands are not supported");
    Value av = in_value(n, 0, Layout::kAsIs);
    Value bv;
    bool leading_ones = std::all_of(bt.shape.begin(), bt.shape.end() - 2, [](int64_t d) { return d == 1; });
    if (bt.constant && leading_ones) {
      // A weight matrix (possibly exported as [1, k, n]): one variable [k, n] shared across rows.
      bv = value_as(n.input(1), bt, {bt.shape[bt.shape.size() - 2], bt.shape.back()});
    } else {
      bv = in_value(n, 1, Layout::kAsIs);
      const Shape& sa = a.shape;
      const Shape& sb = bt.shape;
      bool batched_ok = sb.size() == 2 || (sa.size() == sb.size() && std::equal(sa.begin(), sa.end() - 2, sb.begin()));
      if (!batched_ok)
        fail(n, "batch dimensions of " + shape_text(sa) + " and " + shape_text(sb) +
                    " must be equal (broadcast batched MatMul is not supported)");
    }
    set_output(n, 0, b_.matmul(av, bv), Layout::kAsIs);
  }

  // Input `i` is a constant the builder recreates as its own variables of identical size (batch
  // norm scale/offset/statistics, LSTM weights, grouped filters): it must not also become a
  // variable through value_as.
  void consume(const onnx::NodeProto& n, int i) {
    TensorInfo& t = input(n, i);
    if (!t.constant) fail(n, "input " + std::to_string(i) + " ('" + n.input(i) + "') must be an initializer");
    if (t.value.valid()) fail(n, "input '" + n.input(i) + "' is also read by an earlier node; shared parameters are not supported here");
    consumed_.insert(n.input(i));
  }
  void consume_from(const onnx::NodeProto& n, int from) {
    for (int i = from; i < n.input_size(); ++i)
      if (has_input(n, i)) consume(n, i);
  }

  void batch_norm(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    if (x.shape.size() < 2) fail(n, "input " + shape_text(x.shape) + " has no channel axis");
    consume_from(n, 1);
    const int64_t c = x.shape[1];
    for (int i = 1; i < 5; ++i)
      if (has_input(n, i) && tensor(n, n.input(i)).shape != Shape{c})
        fail(n, "input " + std::to_string(i) + " is " + shape_text(tensor(n, n.input(i)).shape) + ", expected [" +
                    std::to_string(c) + "]");
    Layout layout = x.shape.size() >= 3 ? Layout::kChannelsLast : Layout::kAsIs;
    set_output(n, 0, b_.batch_norm(in_value(n, 0, layout), true), layout);
    // Training-mode exports also output the running statistics: the builder's moving-average
    // update ops compute them; later readers see constants.
    for (int i = 1; i < n.output_size(); ++i)
      if (!n.output(i).empty()) {
        TensorInfo info;
        info.constant = true;
        info.shape = {c};
        info.elem_type = x.elem_type;
        tensors_[n.output(i)] = info;
      }
  }

  void layer_norm(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    consume_from(n, 1);
    int64_t axis = attr_int(n, "axis", -1);
    int64_t rank = static_cast<int64_t>(x.shape.size());
    if (axis < 0) axis += rank;
    if (axis != rank - 1)
      approximate(n, "normalisation over axes " + std::to_string(axis) + ".. modelled over the last axis only");
    if (!has_input(n, 2)) approximate(n, "no bias in the file; the builder's layer norm adds beta");
    set_output(n, 0, b_.layer_norm(in_value(n, 0, Layout::kAsIs)), Layout::kAsIs);
  }

  void pool(const onnx::NodeProto& n) {
    TensorInfo& x = unpadded_input(n);
    const std::array<int64_t, 4> fused = input(n, 0).pads;
    if (x.shape.size() != 4) fail(n, "only 2-D pooling (rank-4 input) is supported");
    std::vector<int64_t> k = attr_ints(n, "kernel_shape");
    if (k.size() != 2) fail(n, "kernel_shape must have 2 entries");
    if (k[0] != k[1]) fail(n, "non-square window " + std::to_string(k[0]) + "x" + std::to_string(k[1]) + " is not supported");
    const Shape y = inferred(n, n.output(0)).shape;
    if (attr_int(n, "ceil_mode", 0) != 0) approximate(n, "ceil_mode modelled by the padding that gives its output size");
    Window win = window(n, x.shape, y, k[0], k[1], fused);
    if (win.pad_h != win.pad_w) fail(n, "different padding per axis is not supported for pooling");
    Value xv = value_in(unpadded_name(n), x, Layout::kChannelsLast);
    Value out = n.op_type() == "MaxPool" ? b_.max_pool(xv, k[0], win.stride, win.pad_h)
                                         : b_.avg_pool(xv, k[0], win.stride, win.pad_h);
    set_output(n, 0, out, Layout::kChannelsLast);
  }

  void global_pool(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    if (x.shape.size() != 4) fail(n, "only 2-D pooling (rank-4 input) is supported");
    Value xv = in_value(n, 0, Layout::kChannelsLast);
    bool max = n.op_type() == "GlobalMaxPool";
    Value out;
    if (x.shape[2] == x.shape[3]) {
      // The zoo's global pooling: a window over the whole feature map.
      out = max ? b_.max_pool(xv, x.shape[2], 1, 0) : b_.avg_pool(xv, x.shape[2], 1, 0);
    } else {
      if (max) approximate(n, "non-square global max pooling modelled as a mean reduction");
      out = b_.reduce_mean(xv, {1, 2}, true);
    }
    set_output(n, 0, out, Layout::kChannelsLast);
  }

  void unary_approx(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    bool piecewise = kPiecewiseUnary.count(n.op_type()) > 0;
    approximate(n, n.op_type() + (piecewise ? " modelled as Relu" : " modelled as Tanh") +
                       ": one elementwise op, gradient reading one saved tensor");
    Value xv = in_value(n, 0, x.layout);
    set_output(n, 0, piecewise ? b_.relu(xv) : b_.tanh(xv), x.layout);
  }

  // The builder value of operand `i` for a broadcasting op with output rank `rank` in `layout`.
  Value broadcast_operand(const onnx::NodeProto& n, int i, std::size_t rank, Layout layout) {
    TensorInfo& t = input(n, i);
    if (layout == Layout::kAsIs) return value_in(n.input(i), t, Layout::kAsIs);
    // Channels last needs the full rank to know which axis is the channel one: [C,1,1] becomes
    // [1,1,1,C].
    Shape aligned(rank - t.shape.size(), 1);
    aligned.insert(aligned.end(), t.shape.begin(), t.shape.end());
    return value_as(n.input(i), t, to_channels_last(aligned));
  }

  void binary(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    TensorInfo& a = input(n, 0);
    TensorInfo& c = input(n, 1);
    const Shape out = inferred(n, n.output(0)).shape;
    Layout layout = out.size() >= 3 && (a.layout == Layout::kChannelsLast || c.layout == Layout::kChannelsLast)
                        ? Layout::kChannelsLast
                        : Layout::kAsIs;
    // A scalar constant operand is folded into the kernel (TF's x * 0.5 is one Mul of x).
    bool a_scalar = a.constant && a.elements() == 1, c_scalar = c.constant && c.elements() == 1;
    if (a_scalar || c_scalar) {
      int ri = a_scalar ? 1 : 0;
      Value x = value_in(n.input(ri), input(n, ri), input(n, ri).layout);
      layout = input(n, ri).layout;
      Value y;
      if (op == "Add") y = b_.add_constant(x, 0);
      else if (op == "Mul") y = b_.scale(x, 0);
      else if (op == "Sub") {
        if (a_scalar) approximate(n, "constant − x modelled as x + constant (one elementwise op)");
        y = b_.add_constant(x, 0);
      } else if (op == "Div") {
        y = a_scalar ? b_.pow(x, -1) : b_.scale(x, 0);
      } else if (op == "Pow" && c_scalar) {
        y = b_.pow(x, 0);
      } else {
        approximate(n, op + " with a constant modelled as Relu (one elementwise op)");
        y = b_.relu(x);
      }
      return set_output(n, 0, y, layout);
    }
    Value av = broadcast_operand(n, 0, out.size(), layout);
    Value cv = broadcast_operand(n, 1, out.size(), layout);
    Value y;
    if (op == "Add") y = b_.add(av, cv);
    else if (op == "Sub") y = b_.sub(av, cv);
    else if (op == "Mul") y = b_.mul(av, cv);
    else {
      approximate(n, op + " modelled as Mul: one two-input elementwise op with the same broadcast");
      y = b_.mul(av, cv);
    }
    set_output(n, 0, y, layout);
  }

  void sum(const onnx::NodeProto& n) {
    const Shape out = inferred(n, n.output(0)).shape;
    std::vector<Value> vs;
    bool same = true;
    for (int i = 0; i < n.input_size(); ++i) {
      vs.push_back(in_value(n, i, Layout::kAsIs));
      same = same && input(n, i).shape == out;
    }
    Value y;
    if (same) {
      y = b_.add_n(vs);
    } else {
      y = vs[0];
      for (std::size_t i = 1; i < vs.size(); ++i) y = b_.add(y, vs[i]);
    }
    if (n.op_type() == "Mean") y = b_.scale(y, 1.0 / static_cast<double>(vs.size()));
    set_output(n, 0, y, Layout::kAsIs);
  }

  int normalized_axis(const onnx::NodeProto& n, int64_t axis, std::size_t rank) {
    int64_t r = static_cast<int64_t>(rank);
    if (axis < -r || axis >= r) fail(n, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
    return static_cast<int>(axis < 0 ? axis + r : axis);
  }

  void concat(const onnx::NodeProto& n) {
    const Shape out = inferred(n, n.output(0)).shape;
    int axis = normalized_axis(n, attr_int(n, "axis", 0), out.size());
    bool all_cl = out.size() >= 3;
    for (int i = 0; i < n.input_size(); ++i) all_cl = all_cl && input(n, i).layout == Layout::kChannelsLast;
    Layout layout = all_cl ? Layout::kChannelsLast : Layout::kAsIs;
    std::vector<Value> vs;
    for (int i = 0; i < n.input_size(); ++i) vs.push_back(in_value(n, i, layout));
    int baxis = all_cl ? channels_last_position(axis, static_cast<int>(out.size())) : axis;
    set_output(n, 0, b_.concat(vs, baxis), layout);
  }

  void split(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    int axis = normalized_axis(n, attr_int(n, "axis", 0), x.shape.size());
    int parts = n.output_size();
    std::vector<int64_t> sizes;
    if (has_input(n, 1)) {
      const TensorInfo& s = input(n, 1);
      if (!s.data || !int_values(*s.data)) fail(n, "split sizes must be a constant");
      sizes = *int_values(*s.data);
    } else {
      sizes = attr_ints(n, "split");
    }
    for (int64_t s : sizes)
      if (s * parts != x.shape[static_cast<std::size_t>(axis)])
        fail(n, "unequal split sizes are not supported (the builder splits into equal parts)");
    Layout layout = x.layout;
    int baxis = layout == Layout::kChannelsLast ? channels_last_position(axis, static_cast<int>(x.shape.size())) : axis;
    std::vector<Value> outs = b_.split(in_value(n, 0, layout), baxis, parts);
    for (int i = 0; i < parts; ++i) set_output(n, i, outs[static_cast<std::size_t>(i)], layout);
  }

  void reshape(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    const Shape out = inferred(n, n.output(0)).shape;
    if (out == x.shape) return alias_output(n, 0, x);
    // ONNX 1.12's inference takes a literal Reshape shape without checking the element count.
    if (num_elements(out) != x.elements())
      fail(n, "reshapes " + shape_text(x.shape) + " (" + std::to_string(x.elements()) + " elements) to " + shape_text(out) +
                  " (" + std::to_string(num_elements(out)) + ")" + baked_batch_hint());
    // Shape-only: a noop kernel over the same elements, in the ONNX element order.
    Value xv = x.layout == Layout::kAsIs ? in_value(n, 0, Layout::kAsIs) : x.value;
    set_output(n, 0, b_.reshape(xv, out), Layout::kAsIs);
  }

  void transpose(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    const int r = static_cast<int>(x.shape.size());
    std::vector<int64_t> perm = attr_ints(n, "perm");
    if (perm.empty())
      for (int i = r - 1; i >= 0; --i) perm.push_back(i);
    if (static_cast<int>(perm.size()) != r) fail(n, "perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(r));
    std::vector<int> bperm;
    for (int64_t p : perm) {
      int a = normalized_axis(n, p, x.shape.size());
      bperm.push_back(x.layout == Layout::kChannelsLast ? channels_last_position(a, r) : a);
    }
    std::vector<int> identity(static_cast<std::size_t>(r));
    std::iota(identity.begin(), identity.end(), 0);
    Value xv = in_value(n, 0, x.layout);
    // NCHW → NHWC of a channels-last value is already in place: no op.
    set_output(n, 0, bperm == identity ? xv : b_.transpose(xv, bperm), Layout::kAsIs);
  }

  void dropout(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    const auto* ratio = find_attr(n, "ratio");
    double rate = ratio ? ratio->f() : 0.5;
    // A training step drops out (the builder emits TF's mask ops); the mask output, when read,
    // is not modelled separately.
    set_output(n, 0, b_.dropout(in_value(n, 0, x.layout), rate), x.layout);
    if (n.output_size() > 1 && !n.output(1).empty() && consumers_[n.output(1)] > 0)
      fail(n, "the dropout mask output is read by another node; not supported");
  }

  void gather(const onnx::NodeProto& n) {
    TensorInfo& data = input(n, 0);
    if (!data.constant || data.shape.size() != 2 || attr_int(n, "axis", 0) != 0)
      fail(n, "only embedding lookups (a 2-D initializer table, axis 0) are supported");
    if (data.value.valid() && !trainable_created_.count(n.input(0)))
      fail(n, "the embedding table is used as a non-trainable constant elsewhere");
    Value table = value_as(n.input(0), data, data.shape);
    Value ids = in_value(n, 1, Layout::kAsIs);
    set_output(n, 0, b_.gather(table, ids), Layout::kAsIs);
  }

  // The integer contents of constant input `i` (axes, starts, pads…), or a failure naming it.
  std::vector<int64_t> const_ints(const onnx::NodeProto& n, int i, std::string_view what) {
    const TensorInfo& t = input(n, i);
    std::optional<std::vector<int64_t>> v = t.data ? int_values(*t.data) : std::nullopt;
    if (!t.constant || !v)
      fail(n, std::string(what) + " (input " + std::to_string(i) + ") must be a constant integer tensor once shapes are known");
    return *v;
  }

  // Slice of a runtime tensor with constant starts, ends, axes and steps 1: one tf.slice.
  void slice(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    const auto rank = static_cast<int64_t>(x.shape.size());
    std::vector<int64_t> starts, ends, axes, steps;
    if (report_.opset < 10) {
      starts = attr_ints(n, "starts");
      ends = attr_ints(n, "ends");
      axes = attr_ints(n, "axes");
    } else {
      starts = const_ints(n, 1, "starts");
      ends = const_ints(n, 2, "ends");
      if (has_input(n, 3)) axes = const_ints(n, 3, "axes");
      if (has_input(n, 4)) steps = const_ints(n, 4, "steps");
    }
    if (axes.empty())
      for (int64_t a = 0; a < static_cast<int64_t>(starts.size()); ++a) axes.push_back(a);
    if (starts.size() != ends.size() || axes.size() != starts.size() || (!steps.empty() && steps.size() != axes.size()))
      fail(n, "starts, ends, axes and steps must have one entry per sliced axis");
    Shape begin(static_cast<std::size_t>(rank), 0);
    Shape size = x.shape;
    for (std::size_t i = 0; i < axes.size(); ++i) {
      if (!steps.empty() && steps[i] != 1)
        fail(n, "step " + std::to_string(steps[i]) + " on axis " + std::to_string(axes[i]) + ": only step 1 is supported");
      const auto a = static_cast<std::size_t>(normalized_axis(n, axes[i], x.shape.size()));
      const int64_t dim = x.shape[a];
      auto clamp = [dim](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + dim : v, 0, dim); };
      const int64_t b = clamp(starts[i]), e = clamp(ends[i]);
      begin[a] = b;
      size[a] = std::max<int64_t>(0, e - b);
    }
    if (num_elements(size) == 0) fail(n, "the slice " + shape_text(size) + " is empty");
    in_input_layout(n, x, begin, size, [&](Value xv, const Shape& b, const Shape& s) { return b_.slice(xv, b, s); });
  }

  // Slice and Pad keep their input's layout: the input as it is, their two per-axis arguments
  // (begin and size, pads before and after) reordered to channels-last where the input is.
  template <typename Build>
  void in_input_layout(const onnx::NodeProto& n, const TensorInfo& x, Shape first, Shape second, Build build) {
    const Layout layout = x.layout;
    Value xv = in_value(n, 0, layout);
    if (layout == Layout::kChannelsLast) {
      first = to_channels_last(first);
      second = to_channels_last(second);
    }
    set_output(n, 0, build(xv, first, second), layout);
  }

  // Gather of a runtime tensor at constant indices (PyTorch's q, k, v = proj[0], proj[1],
  // proj[2]; x[:, 0] of a classifier token): one tf.slice when the indices are one index or a
  // consecutive range, then a Reshape to the output shape.
  void gather_slice(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    if (!input(n, 1).constant)
      fail(n, "gathering a runtime tensor at runtime indices is not supported (only embedding lookups in a 2-D "
              "initializer, or constant indices)");
    std::vector<int64_t> idx = const_ints(n, 1, "indices");
    const auto a = static_cast<std::size_t>(normalized_axis(n, attr_int(n, "axis", 0), x.shape.size()));
    const int64_t dim = x.shape[a];
    for (auto& i : idx) i = i < 0 ? i + dim : i;
    for (std::size_t i = 0; i < idx.size(); ++i)
      if (idx[i] < 0 || idx[i] >= dim || idx[i] != idx[0] + static_cast<int64_t>(i))
        fail(n, "constant indices must be one index or a consecutive range within " + std::to_string(dim));
    if (idx.empty()) fail(n, "no indices");
    Shape begin(x.shape.size(), 0);
    Shape size = x.shape;
    begin[a] = idx[0];
    size[a] = static_cast<int64_t>(idx.size());
    Value y = b_.slice(in_value(n, 0, Layout::kAsIs), begin, size);
    set_output(n, 0, b_.reshape(y, inferred(n, n.output(0)).shape), Layout::kAsIs);
  }

  // Expand of an activation to the inferred shape: one tf.broadcast_to (nothing when the shape
  // does not change).
  void expand(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    const Shape out = inferred(n, n.output(0)).shape;
    if (out == x.shape) return alias_output(n, 0, x);
    if (x.shape.size() > out.size()) fail(n, "input " + shape_text(x.shape) + " has a higher rank than the output " + shape_text(out));
    Shape aligned(out.size() - x.shape.size(), 1);
    aligned.insert(aligned.end(), x.shape.begin(), x.shape.end());
    Value xv = value_as(n.input(0), x, aligned);
    set_output(n, 0, b_.broadcast_to(xv, out), Layout::kAsIs);
  }

  // Where(cond, x, y): one tf.where over the three broadcast together. Constant operands (masks,
  // fill values such as -inf) are non-trainable constants.
  void where(const onnx::NodeProto& n) {
    const std::size_t rank = inferred(n, n.output(0)).shape.size();
    std::vector<Value> vs;
    for (int i = 0; i < 3; ++i) {
      TensorInfo& t = input(n, i);
      if (t.shape.size() > rank) fail(n, "input " + std::to_string(i) + " has a higher rank than the output");
      Shape aligned(rank - t.shape.size(), 1);
      aligned.insert(aligned.end(), t.shape.begin(), t.shape.end());
      vs.push_back(value_as(n.input(i), t, aligned, /*may_train=*/false));
    }
    set_output(n, 0, b_.select(vs[0], vs[1], vs[2]), Layout::kAsIs);
  }

  // The tensor a pooling or convolution node reads, looking through a Pad fused into it.
  const std::string& unpadded_name(const onnx::NodeProto& n) {
    const TensorInfo& x = input(n, 0);
    return x.padded_from.empty() ? n.input(0) : x.padded_from;
  }
  TensorInfo& unpadded_input(const onnx::NodeProto& n) { return tensor(n, unpadded_name(n)); }

  // Pad with zeros (mode "constant"). torchvision's Inception-V3 export pads before each 3×3
  // average pool (F.avg_pool2d(x, 3, 1, 1) comes out as Pad + AveragePool with no padding): a Pad
  // of only spatial axes whose one reader is a pool or a convolution becomes that op's padding,
  // as TensorFlow's SAME pooling; any other Pad is a tf.pad.
  void pad(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    const std::string mode = attr_string(n, "mode", "constant");
    const auto rank = static_cast<int64_t>(x.shape.size());
    std::vector<int64_t> pads = report_.opset < 11 ? attr_ints(n, "pads") : const_ints(n, 1, "pads");
    if (has_input(n, 3)) {
      std::vector<int64_t> axes = const_ints(n, 3, "axes");
      std::vector<int64_t> full(static_cast<std::size_t>(2 * rank), 0);
      if (pads.size() != 2 * axes.size()) fail(n, "pads must have two entries per axis in axes");
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const auto a = static_cast<std::size_t>(normalized_axis(n, axes[i], x.shape.size()));
        full[a] = pads[i];
        full[a + static_cast<std::size_t>(rank)] = pads[i + axes.size()];
      }
      pads = full;
    }
    if (static_cast<int64_t>(pads.size()) != 2 * rank)
      fail(n, std::to_string(pads.size()) + " pads for rank " + std::to_string(rank) + ": expected " + std::to_string(2 * rank));
    for (int64_t p : pads) {
      if (p < 0) fail(n, "negative pads (cropping) are not supported");
      // The window attributes' bound: the padded dimensions and their element count stay in
      // int64 (found by onnx_fuzz: pads of 8.6e18 overflowed counting the padded tensor).
      if (p > kMaxWindowValue) fail(n, "pads value " + std::to_string(p) + ": must be between 0 and 2^31");
    }
    if (mode != "constant") approximate(n, "mode '" + mode + "' modelled as a zero pad (the same copy)");
    Shape before(pads.begin(), pads.begin() + rank), after(pads.begin() + rank, pads.end());
    Shape padded = x.shape;
    for (std::size_t i = 0; i < padded.size(); ++i) padded[i] += before[i] + after[i];
    check_shape(n.output(0), padded);
    // Fuse into the one pooling or convolution node that reads the result.
    const onnx::NodeProto* reader = nullptr;
    int readers = 0;
    for (const auto& m : model_.graph().node())
      for (int i = 0; i < m.input_size(); ++i)
        if (m.input(i) == n.output(0)) {
          ++readers;
          reader = i == 0 ? &m : nullptr;
        }
    for (const auto& o : model_.graph().output())
      if (o.name() == n.output(0)) ++readers;
    const bool spatial_only = rank == 4 && before[0] == 0 && before[1] == 0 && after[0] == 0 && after[1] == 0;
    const bool window_reader =
        reader != nullptr && (reader->op_type() == "AveragePool" || reader->op_type() == "MaxPool" || reader->op_type() == "Conv") &&
        attr_string(*reader, "auto_pad", "NOTSET") == "NOTSET";
    if (readers == 1 && spatial_only && window_reader && mode == "constant") {
      TensorInfo info = inferred(n, n.output(0));
      info.padded_from = x.padded_from.empty() ? n.input(0) : x.padded_from;
      const std::array<int64_t, 4> extra{before[2], before[3], after[2], after[3]};
      for (std::size_t i = 0; i < 4; ++i) info.pads[i] = x.pads[i] + extra[i];
      info.layout = Layout::kChannelsLast;
      tensors_[n.output(0)] = info;
      return;
    }
    in_input_layout(n, x, before, after, [&](Value xv, const Shape& b, const Shape& a) { return b_.pad(xv, b, a); });
  }

  std::vector<int64_t> reduce_axes(const onnx::NodeProto& n) {
    if (find_attr(n, "axes")) return attr_ints(n, "axes");
    if (has_input(n, 1)) {
      const TensorInfo& a = input(n, 1);
      auto v = a.data ? int_values(*a.data) : std::nullopt;
      if (!v) fail(n, "axes must be a constant");
      return *v;
    }
    return {};
  }

  void reduce(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    const int r = static_cast<int>(x.shape.size());
    std::vector<int64_t> axes = reduce_axes(n);
    bool keep = attr_int(n, "keepdims", 1) != 0;
    if (axes.empty()) {
      if (attr_int(n, "noop_with_empty_axes", 0) != 0) return alias_output(n, 0, x);
      for (int i = 0; i < r; ++i) axes.push_back(i);
    }
    // Without keepdims the channel axis may disappear: reduce in the ONNX arrangement then.
    Layout layout = keep ? x.layout : Layout::kAsIs;
    std::vector<int> baxes;
    for (int64_t a : axes) {
      int na = normalized_axis(n, a, x.shape.size());
      baxes.push_back(layout == Layout::kChannelsLast ? channels_last_position(na, r) : na);
    }
    Value xv = in_value(n, 0, layout);
    Value y = n.op_type() == "ReduceMean" ? b_.reduce_mean(xv, baxes, keep) : b_.reduce_sum(xv, baxes, keep);
    set_output(n, 0, y, layout);
  }

  void softmax(const onnx::NodeProto& n) {
    TensorInfo& x = input(n, 0);
    const int r = static_cast<int>(x.shape.size());
    int axis = normalized_axis(n, attr_int(n, "axis", report_.opset >= 13 ? -1 : 1), x.shape.size());
    if (n.op_type() == "LogSoftmax") approximate(n, "LogSoftmax modelled as Softmax (same kernel class and size)");
    Layout layout = Layout::kAsIs;
    if (x.layout == Layout::kChannelsLast && channels_last_position(axis, r) == r - 1)
      layout = Layout::kChannelsLast;  // the channel axis is already last in the builder
    else if (axis != r - 1)
      approximate(n, "softmax over axis " + std::to_string(axis) + " modelled over the last axis");
    set_output(n, 0, b_.softmax(in_value(n, 0, layout)), layout);
  }

  // What an ONNX LSTM or GRU node (`gates` gates per direction: 4 or 3) runs over:
  // X [seq, batch, in] (or [batch, seq, in] with layout 1), W [dirs, gates·h, in], R [dirs, gates·h, h].
  struct Recurrence {
    int64_t h = 0, dirs = 0, in = 0, seq = 0, batch = 0;
    bool batch_first = false;
    std::string direction;
    bool reverse(int64_t d) const { return direction == "reverse" || (direction == "bidirectional" && d == 1); }
  };

  Recurrence recurrence(const onnx::NodeProto& n, int64_t gates) {
    TensorInfo& x = input(n, 0);
    TensorInfo& w = input(n, 1);
    TensorInfo& rt = input(n, 2);
    if (!w.constant || !rt.constant) fail(n, "W and R must be initializers");
    if (x.shape.size() != 3 || w.shape.size() != 3 || rt.shape.size() != 3) fail(n, "X, W and R must be 3-D");
    Recurrence r;
    r.h = attr_int(n, "hidden_size", rt.shape[2]);
    r.dirs = w.shape[0];
    r.in = w.shape[2];
    r.batch_first = attr_int(n, "layout", 0) != 0;
    r.seq = r.batch_first ? x.shape[1] : x.shape[0];
    r.batch = r.batch_first ? x.shape[0] : x.shape[1];
    r.direction = attr_string(n, "direction", "forward");
    if (w.shape[1] != gates * r.h || rt.shape[1] != gates * r.h || rt.shape[2] != r.h)
      fail(n, "W " + shape_text(w.shape) + " / R " + shape_text(rt.shape) + " do not match hidden_size " + std::to_string(r.h));
    if (find_attr(n, "activations")) approximate(n, "custom activations modelled as sigmoid/tanh");
    if (find_attr(n, "clip")) approximate(n, "cell clipping not modelled");
    if (has_input(n, 4)) approximate(n, "sequence lengths not modelled (every sequence runs its full length)");
    consume(n, 1);
    consume(n, 2);
    if (has_input(n, 3)) consume(n, 3);
    return r;
  }

  // Initial state input `i` [dirs, batch, h] (PyTorch's h0, c0) for direction d: a runtime one
  // seeds the direction's first cell; a constant one (zeros in a traced export) is the cell's
  // zero state (an invalid Value).
  Value initial_state(const onnx::NodeProto& n, int i, int64_t d, const Recurrence& r) {
    if (!has_input(n, i)) return {};
    TensorInfo& t = input(n, i);
    const std::string what = i == 5 ? "initial_h" : "initial_c";
    const Shape want = r.batch_first ? Shape{r.batch, r.dirs, r.h} : Shape{r.dirs, r.batch, r.h};
    if (t.shape != want) fail(n, what + " is " + shape_text(t.shape) + ", expected " + shape_text(want));
    if (t.constant) {
      if (d == 0) approximate(n, what + " is a constant: modelled as the zero state");
      return {};
    }
    Value v = in_value(n, i, Layout::kAsIs);
    if (r.dirs > 1)
      v = r.batch_first ? b_.slice(v, {0, d, 0}, {r.batch, 1, r.h}) : b_.slice(v, {d, 0, 0}, {1, r.batch, r.h});
    return b_.reshape(v, {r.batch, r.h});
  }

  // X split into one [batch, in] value per step.
  std::vector<Value> recurrence_steps(const onnx::NodeProto& n, const Recurrence& r) {
    Value xv = in_value(n, 0, Layout::kAsIs);
    std::vector<Value> steps;
    if (r.seq == 1) {
      steps.push_back(b_.reshape(xv, {r.batch, r.in}));
    } else {
      for (Value s : b_.split(xv, r.batch_first ? 1 : 0, static_cast<int>(r.seq)))
        steps.push_back(b_.reshape(s, {r.batch, r.in}));
    }
    return steps;
  }

  // Y [seq, dirs, batch, h] (or [batch, seq, dirs, h] with layout 1) from hs[direction][step],
  // and output k ≥ 1 [dirs, batch, h] from finals[k - 1][direction] (Y_h, then LSTM's Y_c), for
  // the outputs some node reads.
  void recurrence_outputs(const onnx::NodeProto& n, const Recurrence& r, const std::vector<std::vector<Value>>& hs,
                          const std::vector<std::vector<Value>>& finals) {
    auto used = [&](int i) { return i < n.output_size() && !n.output(i).empty() && consumers_[n.output(i)] > 0; };
    if (used(0)) {
      std::vector<Value> per_step;
      for (int64_t t = 0; t < r.seq; ++t) {
        std::vector<Value> per_dir;
        for (int64_t d = 0; d < r.dirs; ++d)
          per_dir.push_back(b_.reshape(hs[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)], {1, 1, r.batch, r.h}));
        per_step.push_back(b_.concat(per_dir, 1));
      }
      Value y = b_.concat(per_step, 0);
      set_output(n, 0, r.batch_first ? b_.transpose(y, {2, 0, 1, 3}) : y, Layout::kAsIs);
    }
    for (std::size_t k = 0; k < finals.size(); ++k) {
      const int out = static_cast<int>(k) + 1;
      if (!used(out)) continue;
      std::vector<Value> per_dir;
      for (Value f : finals[k]) per_dir.push_back(b_.reshape(f, {1, r.batch, r.h}));
      Value y = b_.concat(per_dir, 0);
      set_output(n, out, r.batch_first ? b_.transpose(y, {1, 0, 2}) : y, Layout::kAsIs);
    }
  }

  // ONNX LSTM (gates i, o, f, c; W [dirs,4h,in], R [dirs,4h,h], B [dirs,8h]) unrolled over the
  // sequence as TF 1.x BasicLSTMCell steps (gates i, j, f, o: the same work). Per direction one
  // kernel variable [in+h, 4h] holds W and R, and one bias variable [8h] holds both ONNX biases,
  // summed each step into the cell's [4h] bias, so the parameter count equals the file's.
  void lstm(const onnx::NodeProto& n) {
    const Recurrence r = recurrence(n, 4);
    if (attr_int(n, "input_forget", 0) != 0) approximate(n, "coupled input-forget gate modelled as separate gates");
    if (has_input(n, 7)) approximate(n, "peepholes not modelled");
    if (!has_input(n, 3)) approximate(n, "no bias in the file; the builder's cell adds one [4h] bias");
    const std::vector<Value> steps = recurrence_steps(n, r);
    std::vector<std::vector<Value>> hs(static_cast<std::size_t>(r.dirs));
    std::vector<std::vector<Value>> finals(2);  // Y_h, Y_c per direction
    for (int64_t d = 0; d < r.dirs; ++d) {
      auto scope = b_.scope(r.dirs == 1 ? "cell" : d == 0 ? "fw" : "bw");
      Value kernel = b_.variable("kernel", {r.in + r.h, 4 * r.h});
      Value bias;
      if (has_input(n, 3)) {
        Value both = b_.variable("bias", {8 * r.h});
        std::vector<Value> wb_rb = b_.split(both, 0, 2);
        bias = b_.add(wb_rb[0], wb_rb[1]);
      } else {
        bias = b_.variable("bias", {4 * r.h});
      }
      TrainingGraphBuilder::LstmState state{initial_state(n, 5, d, r), initial_state(n, 6, d, r)};  // invalid: zeros
      std::vector<Value>& hd = hs[static_cast<std::size_t>(d)];
      hd.resize(static_cast<std::size_t>(r.seq));
      for (int64_t t = 0; t < r.seq; ++t) {
        int64_t step = r.reverse(d) ? r.seq - 1 - t : t;
        state = b_.lstm_cell(steps[static_cast<std::size_t>(step)], state, kernel, bias);
        hd[static_cast<std::size_t>(step)] = state.h;
      }
      finals[0].push_back(state.h);
      finals[1].push_back(state.c);
    }
    recurrence_outputs(n, r, hs, finals);
  }

  // ONNX GRU (gates z, r, h; W [dirs,3h,in], R [dirs,3h,h], B [dirs,6h]) unrolled as TF 1.x
  // GRUCell steps: [z, r] = σ([x, h]·K_g + b_g); the candidate c = tanh(x·W_h + b_Wh + r ⊙
  // (h·R_h + b_Rh)) with PyTorch's linear_before_reset = 1, else tanh(x·W_h + (r ⊙ h)·R_h + b);
  // h' = z ⊙ h + (1 − z) ⊙ c. Per direction: gate kernel [in+h, 2h] (W and R of z, r), gate bias
  // [4h] (both ONNX biases, summed), candidate kernels [in, h] and [h, h] and bias [2h]: the
  // file's parameters exactly.
  void gru(const onnx::NodeProto& n) {
    const Recurrence r = recurrence(n, 3);
    const bool before_reset = attr_int(n, "linear_before_reset", 0) != 0;
    const bool biased = has_input(n, 3);
    const std::vector<Value> steps = recurrence_steps(n, r);
    std::vector<std::vector<Value>> hs(static_cast<std::size_t>(r.dirs));
    std::vector<std::vector<Value>> finals(1);  // Y_h per direction
    for (int64_t d = 0; d < r.dirs; ++d) {
      auto scope = b_.scope(r.dirs == 1 ? "cell" : d == 0 ? "fw" : "bw");
      Value gate_kernel = b_.variable("gates/kernel", {r.in + r.h, 2 * r.h});
      Value input_kernel = b_.variable("candidate/input_kernel", {r.in, r.h});
      Value hidden_kernel = b_.variable("candidate/hidden_kernel", {r.h, r.h});
      Value gate_bias, input_bias, hidden_bias;
      if (biased) {
        std::vector<Value> wb_rb = b_.split(b_.variable("gates/bias", {4 * r.h}), 0, 2);
        gate_bias = b_.add(wb_rb[0], wb_rb[1]);
        std::vector<Value> cb = b_.split(b_.variable("candidate/bias", {2 * r.h}), 0, 2);
        input_bias = cb[0];
        hidden_bias = cb[1];
      }
      Value h = initial_state(n, 5, d, r);
      if (!h.valid()) h = b_.zeros({r.batch, r.h});
      std::vector<Value>& hd = hs[static_cast<std::size_t>(d)];
      hd.resize(static_cast<std::size_t>(r.seq));
      for (int64_t t = 0; t < r.seq; ++t) {
        const int64_t step = r.reverse(d) ? r.seq - 1 - t : t;
        Value x = steps[static_cast<std::size_t>(step)];
        Value zr = b_.matmul(b_.concat({x, h}, 1), gate_kernel);
        if (biased) zr = b_.bias_add(zr, gate_bias);
        std::vector<Value> z_r = b_.split(b_.sigmoid(zr), 1, 2);
        Value xc = b_.matmul(x, input_kernel);
        if (biased) xc = b_.bias_add(xc, input_bias);
        Value hc;
        if (before_reset) {
          hc = b_.matmul(h, hidden_kernel);
          if (biased) hc = b_.bias_add(hc, hidden_bias);
          hc = b_.mul(z_r[1], hc);
        } else {
          hc = b_.matmul(b_.mul(z_r[1], h), hidden_kernel);
          if (biased) hc = b_.bias_add(hc, hidden_bias);
        }
        Value c = b_.tanh(b_.add(xc, hc));
        // 1 − z: one elementwise op with a constant.
        h = b_.add(b_.mul(z_r[0], h), b_.mul(b_.add_constant(z_r[0], 1.0), c));
        hd[static_cast<std::size_t>(step)] = h;
      }
      finals[0].push_back(h);
    }
    recurrence_outputs(n, r, hs, finals);
  }

  // --- loss -------------------------------------------------------------------------------------
  void add_loss() {
    const std::string& out = report_.logits;
    auto it = tensors_.find(out);
    if (it == tensors_.end() || !it->second.value.valid())
      fail("graph output '" + out + "' is a constant or was never computed: nothing to train");
    TensorInfo& t = it->second;
    auto scope = b_.layer("loss", static_cast<int32_t>(layer_ids_.size()));
    const int64_t classes = t.shape.size() < 2 ? 1 : t.shape.back();
    if (t.shape.size() < 2) {
      report_.approximations.push_back(
          {"loss", "SparseSoftmaxCrossEntropyWithLogits", "output of rank < 2 treated as one class per row"});
    }
    Value logits = value_as(out, t, {label_rows_, classes});
    b_.minimize(b_.softmax_cross_entropy(logits, labels_));
  }

  std::string file_;
  onnx::ModelProto& model_;
  const OnnxImportOptions& options_;
  OnnxImportReport& report_;
  TrainingGraphBuilder b_;
  std::unordered_map<std::string, TensorInfo> tensors_;  // tensors available so far
  // Value name → the nodes that read it; built on first use by feeds_a_constant_reader.
  std::unordered_map<std::string, std::vector<const onnx::NodeProto*>> readers_;
  std::unordered_map<std::string, TensorInfo> typed_;    // inferred types and shapes
  std::set<std::string> known_shape_;                    // names with a fully static inferred shape
  std::unordered_map<std::string, int> consumers_;
  std::unordered_map<const onnx::NodeProto*, int> node_index_;
  std::vector<std::string> original_op_types_;
  int64_t exported_batch_ = 0;  // the file's fixed input batch when options_.batch replaces it, else 0  // node op types as in the file (before folding)
  std::set<std::string> trainable_created_;
  std::set<std::string> consumed_;
  std::unordered_map<std::string, int32_t> layer_ids_;
  int64_t label_rows_ = 1;
  Value labels_;
};

}  // namespace

void OnnxImportOptions::validate() const {
  if (batch < 0) throw InputError("OnnxImportOptions.batch = " + std::to_string(batch) + ": must be >= 0");
  for (const auto& [name, size] : dim_values)
    if (size <= 0)
      throw InputError("OnnxImportOptions.dim_values[" + name + "] = " + std::to_string(size) + ": must be > 0");
}

std::string OnnxImportReport::brief_report() const {
  std::ostringstream s;
  int64_t nodes = 0;
  for (const auto& [type, count] : op_counts) nodes += count;
  s << "ONNX model from " << (producer.empty() ? "an unnamed producer" : producer) << ", opset " << opset << ": "
    << nodes << " nodes (" << folded_nodes << " folded), " << op_counts.size() << " op types\n";
  s << "parameters " << stats.parameters << ", forward " << stats.forward_flops / 1e9 << " GFLOPs per step\n";
  s << approximations.size() << " approximated node(s)";
  for (const auto& a : approximations) s << "\n  " << a.node << " (" << a.op_type << "): " << a.how;
  return s.str();
}

namespace {

onnx::ModelProto parse_model(std::string_view bytes, const std::string& file) {
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw InputError(file + ": " + std::to_string(bytes.size()) + " bytes: must be < 2 GiB (protobuf's limit)");
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw InputError(file + ": not a valid ONNX ModelProto (protobuf parsing failed: garbage or a truncated file)");
  return model;
}

}  // namespace

std::string onnx_node_scope(std::string_view node_name) {
  while (!node_name.empty() && node_name.front() == '/') node_name.remove_prefix(1);
  auto slash = node_name.rfind('/');
  return slash == std::string_view::npos ? std::string() : std::string(node_name.substr(0, slash));
}

std::vector<std::string> onnx_node_scopes(const std::filesystem::path& path) {
  const onnx::ModelProto model = parse_model(read_text_file(path), path.string());
  std::vector<std::string> scopes;
  std::set<std::string, std::less<>> seen;
  for (const onnx::NodeProto& n : model.graph().node()) {
    std::string scope = onnx_node_scope(n.name());
    if (!scope.empty() && seen.insert(scope).second) scopes.push_back(std::move(scope));
  }
  return scopes;
}

OpGraph import_onnx_bytes(std::string_view bytes, std::string_view origin, const OnnxImportOptions& options,
                          OnnxImportReport* report) {
  options.validate();
  const std::string file(origin);
  onnx::ModelProto model = parse_model(bytes, file);
  OnnxImportReport local;
  OnnxImportReport& r = report ? *report : local;
  r = {};
  return Importer(file, model, options, r).run();
}

OpGraph import_onnx(const std::filesystem::path& path, const OnnxImportOptions& options, OnnxImportReport* report) {
  options.validate();
  return import_onnx_bytes(read_text_file(path), path.string(), options, report);
}

}  // namespace placelab::models
