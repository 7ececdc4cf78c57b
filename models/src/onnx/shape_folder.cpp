// ShapeFolder: evaluates integer shape arithmetic (Shape, Gather, Concat, Reshape…) so the importer
// can replace it by Constants before ONNX shape inference; one function per op, found by a table.
#include "shape_folder.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace placelab::models::onnx_detail {
namespace {

using Inputs = ShapeFolder::Inputs;
using ShapeOf = ShapeFolder::ShapeOf;

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

int64_t clamp_index(int64_t i, int64_t size) {
  if (i < 0) i += size;
  return std::clamp<int64_t>(i, 0, size);
}

bool known(const Inputs& in, std::size_t i) { return i < in.size() && in[i].has_value(); }

// Every input the node names is known (and it names at least one).
bool all_known(const onnx::NodeProto& n, const Inputs& in) {
  for (int i = 0; i < n.input_size(); ++i)
    if (!n.input(i).empty() && !known(in, static_cast<std::size_t>(i))) return false;
  return n.input_size() > 0;
}

// Elementwise with one operand of one element or both of the same size.
std::optional<IntTensor> broadcast(const std::string& op, const IntTensor& a, const IntTensor& c) {
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

// --- ops that read shapes and attributes (their inputs need not be known) ----------------------

// Shape and Size: from the static shape of input 0.
std::optional<IntTensor> fold_shape(const onnx::NodeProto& n, const Inputs& /*in*/, const ShapeOf& shape_of) {
  const std::string& op = n.op_type();
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

std::optional<IntTensor> fold_constant(const onnx::NodeProto& n, const Inputs& /*in*/, const ShapeOf& /*shape_of*/) {
  const auto* a = find_attr(n, "value");
  if (a && a->has_t()) return int_tensor(a->t());
  if ((a = find_attr(n, "value_int")) != nullptr) return IntTensor{{}, {a->i()}};
  if ((a = find_attr(n, "value_ints")) != nullptr)
    return IntTensor{{a->ints_size()}, std::vector<int64_t>(a->ints().begin(), a->ints().end())};
  return std::nullopt;
}

std::optional<IntTensor> fold_constant_of_shape(const onnx::NodeProto& n, const Inputs& in,
                                                const ShapeOf& /*shape_of*/) {
  if (!known(in, 0) || in[0]->dims.size() != 1) return std::nullopt;
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

// --- ops over known inputs (eval checks them all first; x is input 0) ---------------------------

std::optional<IntTensor> fold_identity(const onnx::NodeProto& /*n*/, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const IntTensor& x = *in[0];
  return x;
}

std::optional<IntTensor> fold_cast(const onnx::NodeProto& n, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const IntTensor& x = *in[0];
  const int64_t to = attr_int(n, "to", 0);
  if (to != onnx::TensorProto::INT64 && to != onnx::TensorProto::INT32 && to != onnx::TensorProto::BOOL)
    return std::nullopt;
  IntTensor r = x;
  r.type = static_cast<int32_t>(to);
  if (to == onnx::TensorProto::BOOL)
    for (auto& v : r.values) v = v != 0 ? 1 : 0;
  return r;
}

// Unsqueeze and Squeeze: axes from the attribute (opset < 13) or input 1.
std::optional<IntTensor> fold_squeeze(const onnx::NodeProto& n, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const std::string& op = n.op_type();
  const IntTensor& x = *in[0];
  std::vector<int64_t> axes = attr_ints(n, "axes");
  if (n.input_size() > 1 && known(in, 1)) axes = in[1]->values;
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

std::optional<IntTensor> fold_reshape(const onnx::NodeProto& n, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const IntTensor& x = *in[0];
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

std::optional<IntTensor> fold_concat(const onnx::NodeProto& /*n*/, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const IntTensor& x = *in[0];
  for (const auto& t : in)
    if (!t || t->dims.size() != 1) return std::nullopt;  // shape vectors only
  IntTensor r;
  r.type = x.type;
  for (const auto& t : in) r.values.insert(r.values.end(), t->values.begin(), t->values.end());
  r.dims = {static_cast<int64_t>(r.values.size())};
  return r;
}

std::optional<IntTensor> fold_gather(const onnx::NodeProto& /*n*/, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const IntTensor& x = *in[0];
  if (x.dims.size() != 1 || !known(in, 1)) return std::nullopt;
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

std::optional<IntTensor> fold_slice(const onnx::NodeProto& n, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const IntTensor& x = *in[0];
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

std::optional<IntTensor> fold_range(const onnx::NodeProto& /*n*/, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const IntTensor& x = *in[0];
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

std::optional<IntTensor> fold_not(const onnx::NodeProto& /*n*/, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const IntTensor& x = *in[0];
  IntTensor r = x;
  for (auto& v : r.values) v = v == 0 ? 1 : 0;
  return r;
}

// ReduceProd and ReduceSum of a scalar or a vector.
std::optional<IntTensor> fold_reduce(const onnx::NodeProto& n, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const std::string& op = n.op_type();
  const IntTensor& x = *in[0];
  if (x.dims.size() > 1) return std::nullopt;
  IntTensor r;
  r.type = x.type;
  r.values = {op == "ReduceProd" ? std::accumulate(x.values.begin(), x.values.end(), int64_t{1}, std::multiplies<>())
                                 : std::accumulate(x.values.begin(), x.values.end(), int64_t{0})};
  if (attr_int(n, "keepdims", 1) != 0 && x.dims.size() == 1) r.dims = {1};
  return r;
}

// Add, Sub, Mul, Div, Mod, Max, Min, Equal, Less, Greater, And, Or (see broadcast).
std::optional<IntTensor> fold_binary(const onnx::NodeProto& n, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const IntTensor& x = *in[0];
  if (in.size() == 2) return broadcast(n.op_type(), x, *in[1]);
  return std::nullopt;
}

std::optional<IntTensor> fold_where(const onnx::NodeProto& /*n*/, const Inputs& in, const ShapeOf& /*shape_of*/) {
  const IntTensor& x = *in[0];
  if (in.size() != 3) return std::nullopt;
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

// How eval folds one op type: the function, and whether it runs only once every input the node
// names is known (ops that read shapes or attributes run without them).
struct FoldRule {
  std::optional<IntTensor> (*fold)(const onnx::NodeProto&, const Inputs&, const ShapeOf&);
  bool needs_inputs;
};

const std::unordered_map<std::string, FoldRule>& fold_rules() {
  static const std::unordered_map<std::string, FoldRule> kRules = {
      {"Shape", {fold_shape, false}},         {"Size", {fold_shape, false}},
      {"Constant", {fold_constant, false}},   {"ConstantOfShape", {fold_constant_of_shape, false}},
      {"Identity", {fold_identity, true}},    {"Cast", {fold_cast, true}},
      {"Unsqueeze", {fold_squeeze, true}},    {"Squeeze", {fold_squeeze, true}},
      {"Reshape", {fold_reshape, true}},      {"Concat", {fold_concat, true}},
      {"Gather", {fold_gather, true}},        {"Slice", {fold_slice, true}},
      {"Range", {fold_range, true}},          {"Not", {fold_not, true}},
      {"ReduceProd", {fold_reduce, true}},    {"ReduceSum", {fold_reduce, true}},
      {"Add", {fold_binary, true}},           {"Sub", {fold_binary, true}},
      {"Mul", {fold_binary, true}},           {"Div", {fold_binary, true}},
      {"Mod", {fold_binary, true}},           {"Max", {fold_binary, true}},
      {"Min", {fold_binary, true}},           {"Equal", {fold_binary, true}},
      {"Less", {fold_binary, true}},          {"Greater", {fold_binary, true}},
      {"And", {fold_binary, true}},           {"Or", {fold_binary, true}},
      {"Where", {fold_where, true}},
  };
  return kRules;
}

}  // namespace

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

std::optional<IntTensor> ShapeFolder::eval(const onnx::NodeProto& n, const Inputs& in, const ShapeOf& shape_of) {
  const auto& rules = fold_rules();
  const auto rule = rules.find(n.op_type());
  if (rule == rules.end()) return std::nullopt;
  if (rule->second.needs_inputs && !all_known(n, in)) return std::nullopt;
  return rule->second.fold(n, in, shape_of);
}

}  // namespace placelab::models::onnx_detail
