// The Importer's translators of tensor ops: elementwise ops, shape changes (Concat, Split, Reshape,
// Transpose), indexing (Gather, Slice, Expand, Where, Pad), reductions and softmax.
#include "importer.h"

#include <algorithm>
#include <numeric>
#include <optional>

namespace placelab::models::onnx_detail {

void Importer::unary_approx(const onnx::NodeProto& n) {
  TensorInfo& x = input(n, 0);
  bool piecewise = kPiecewiseUnary.count(n.op_type()) > 0;
  approximate(n, n.op_type() + (piecewise ? " modelled as Relu" : " modelled as Tanh") +
                     ": one elementwise op, gradient reading one saved tensor");
  Value xv = in_value(n, 0, x.layout);
  set_output(n, 0, piecewise ? b_.relu(xv) : b_.tanh(xv), x.layout);
}

Value Importer::broadcast_operand(const onnx::NodeProto& n, int i, std::size_t rank, Layout layout) {
  TensorInfo& t = input(n, i);
  if (layout == Layout::kAsIs) return value_in(n.input(i), t, Layout::kAsIs);
  // Channels last needs the full rank to know which axis is the channel one: [C,1,1] becomes
  // [1,1,1,C].
  Shape aligned(rank - t.shape.size(), 1);
  aligned.insert(aligned.end(), t.shape.begin(), t.shape.end());
  return value_as(n.input(i), t, to_channels_last(aligned));
}

void Importer::binary(const onnx::NodeProto& n) {
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

void Importer::sum(const onnx::NodeProto& n) {
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

int Importer::normalized_axis(const onnx::NodeProto& n, int64_t axis, std::size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) fail(n, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

void Importer::concat(const onnx::NodeProto& n) {
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

void Importer::split(const onnx::NodeProto& n) {
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

void Importer::reshape(const onnx::NodeProto& n) {
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

void Importer::transpose(const onnx::NodeProto& n) {
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

void Importer::dropout(const onnx::NodeProto& n) {
  TensorInfo& x = input(n, 0);
  const auto* ratio = find_attr(n, "ratio");
  double rate = ratio ? ratio->f() : 0.5;
  // A training step drops out (the builder emits TF's mask ops); the mask output, when read,
  // is not modelled separately.
  set_output(n, 0, b_.dropout(in_value(n, 0, x.layout), rate), x.layout);
  if (n.output_size() > 1 && !n.output(1).empty() && consumers_[n.output(1)] > 0)
    fail(n, "the dropout mask output is read by another node; not supported");
}

void Importer::gather(const onnx::NodeProto& n) {
  TensorInfo& data = input(n, 0);
  if (!data.constant || data.shape.size() != 2 || attr_int(n, "axis", 0) != 0)
    fail(n, "only embedding lookups (a 2-D initializer table, axis 0) are supported");
  if (data.value.valid() && !trainable_created_.count(n.input(0)))
    fail(n, "the embedding table is used as a non-trainable constant elsewhere");
  Value table = value_as(n.input(0), data, data.shape);
  Value ids = in_value(n, 1, Layout::kAsIs);
  set_output(n, 0, b_.gather(table, ids), Layout::kAsIs);
}

std::vector<int64_t> Importer::const_ints(const onnx::NodeProto& n, int i, std::string_view what) {
  const TensorInfo& t = input(n, i);
  std::optional<std::vector<int64_t>> v = t.data ? int_values(*t.data) : std::nullopt;
  if (!t.constant || !v)
    fail(n, std::string(what) + " (input " + std::to_string(i) + ") must be a constant integer tensor once shapes are known");
  return *v;
}

void Importer::slice(const onnx::NodeProto& n) {
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

template <typename Build>
void Importer::in_input_layout(const onnx::NodeProto& n, const TensorInfo& x, Shape first, Shape second, Build build) {
  const Layout layout = x.layout;
  Value xv = in_value(n, 0, layout);
  if (layout == Layout::kChannelsLast) {
    first = to_channels_last(first);
    second = to_channels_last(second);
  }
  set_output(n, 0, build(xv, first, second), layout);
}

void Importer::gather_slice(const onnx::NodeProto& n) {
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

void Importer::expand(const onnx::NodeProto& n) {
  TensorInfo& x = input(n, 0);
  const Shape out = inferred(n, n.output(0)).shape;
  if (out == x.shape) return alias_output(n, 0, x);
  if (x.shape.size() > out.size()) fail(n, "input " + shape_text(x.shape) + " has a higher rank than the output " + shape_text(out));
  Shape aligned(out.size() - x.shape.size(), 1);
  aligned.insert(aligned.end(), x.shape.begin(), x.shape.end());
  Value xv = value_as(n.input(0), x, aligned);
  set_output(n, 0, b_.broadcast_to(xv, out), Layout::kAsIs);
}

void Importer::where(const onnx::NodeProto& n) {
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

void Importer::pad(const onnx::NodeProto& n) {
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

std::vector<int64_t> Importer::reduce_axes(const onnx::NodeProto& n) {
  if (find_attr(n, "axes")) return attr_ints(n, "axes");
  if (has_input(n, 1)) {
    const TensorInfo& a = input(n, 1);
    auto v = a.data ? int_values(*a.data) : std::nullopt;
    if (!v) fail(n, "axes must be a constant");
    return *v;
  }
  return {};
}

void Importer::reduce(const onnx::NodeProto& n) {
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

void Importer::softmax(const onnx::NodeProto& n) {
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

}  // namespace placelab::models::onnx_detail
