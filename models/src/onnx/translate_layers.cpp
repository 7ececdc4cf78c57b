// The Importer's translators of layers: Conv (with a fused Pad), Gemm, MatMul, BatchNormalization,
// LayerNormalization, pooling, and LSTM and GRU unrolled into the builder's cells.
#include "importer.h"

#include <algorithm>

namespace placelab::models::onnx_detail {

int64_t Importer::window_pad(const onnx::NodeProto& n, int64_t in, int64_t window, int64_t stride, int64_t out,
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

Importer::Window Importer::window(const onnx::NodeProto& n, const Shape& x, const Shape& y, int64_t kh, int64_t kw,
                                  const std::array<int64_t, 4>& fused_pads) {
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

void Importer::conv(const onnx::NodeProto& n) {
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

void Importer::gemm(const onnx::NodeProto& n) {
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

void Importer::matmul(const onnx::NodeProto& n) {
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

void Importer::consume(const onnx::NodeProto& n, int i) {
  TensorInfo& t = input(n, i);
  if (!t.constant) fail(n, "input " + std::to_string(i) + " ('" + n.input(i) + "') must be an initializer");
  if (t.value.valid()) fail(n, "input '" + n.input(i) + "' is also read by an earlier node; shared parameters are not supported here");
  consumed_.insert(n.input(i));
}

void Importer::consume_from(const onnx::NodeProto& n, int from) {
  for (int i = from; i < n.input_size(); ++i)
    if (has_input(n, i)) consume(n, i);
}

void Importer::batch_norm(const onnx::NodeProto& n) {
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

void Importer::layer_norm(const onnx::NodeProto& n) {
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

void Importer::pool(const onnx::NodeProto& n) {
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

void Importer::global_pool(const onnx::NodeProto& n) {
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

const std::string& Importer::unpadded_name(const onnx::NodeProto& n) {
  const TensorInfo& x = input(n, 0);
  return x.padded_from.empty() ? n.input(0) : x.padded_from;
}

Importer::Recurrence Importer::recurrence(const onnx::NodeProto& n, int64_t gates) {
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

Value Importer::initial_state(const onnx::NodeProto& n, int i, int64_t d, const Recurrence& r) {
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

std::vector<Value> Importer::recurrence_steps(const onnx::NodeProto& n, const Recurrence& r) {
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

void Importer::recurrence_outputs(const onnx::NodeProto& n, const Recurrence& r,
                                  const std::vector<std::vector<Value>>& hs,
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

void Importer::lstm(const onnx::NodeProto& n) {
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

void Importer::gru(const onnx::NodeProto& n) {
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

}  // namespace placelab::models::onnx_detail
