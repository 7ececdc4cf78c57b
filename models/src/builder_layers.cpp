// TrainingGraphBuilder's public API: the forward ops and layers models are described with, each
// with its gradient function, the normalisation layers, and the builder's scopes, loss and finish().
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "builder_impl.h"
#include "placelab/core/error.h"

namespace placelab::models {

// --- batch / layer norm -----------------------------------------------------------------------
Value TrainingGraphBuilder::Impl::norm_decomposed(Value x, const std::vector<int>& axes, Value gamma, Value beta,
                                                  bool keep_moving, Value moving_mean, Value moving_var) {
  // tf.nn.moments + tf.nn.batch_normalization as TF 1.x built them.
  Value mean = reduce(true, x, axes, true);
  Value sg = emit1("StopGradient", KernelSignature::noop(), {mean}, shp(mean));
  values[sg.id].requires_grad = false;
  nodes[values[sg.id].node].grad = {};
  Value sq = binary(Bin::kSqDiff, x, sg);
  Value var = reduce(true, sq, axes, true);
  Shape stat = shp(beta);
  bool squeeze = keep_moving;  // batch norm squeezes the statistics to [C]
  if (squeeze) {
    mean = emit1("Squeeze", KernelSignature::noop(), {mean}, stat,
                 [](Impl& b, GradCtx& g) { b.give(g, 0, b.reshape_back(b.dy(g), b.in(g, 0))); });
    var = emit1("Squeeze", KernelSignature::noop(), {var}, stat,
                [](Impl& b, GradCtx& g) { b.give(g, 0, b.reshape_back(b.dy(g), b.in(g, 0))); });
  }
  Value inv = unary("Rsqrt", add_const(var), "RsqrtGrad", true);
  if (gamma.valid()) inv = binary(Bin::kMul, inv, gamma);
  Value y = binary(Bin::kAdd, binary(Bin::kMul, x, inv), binary(Bin::kSub, beta, binary(Bin::kMul, mean, inv)));
  if (keep_moving) {
    moving_average(values[moving_mean.id].var, mean);
    moving_average(values[moving_var.id].var, var);
  }
  return y;
}

Value TrainingGraphBuilder::Impl::batch_norm(Value x, bool with_scale) {
  const Shape xs = shp(x);
  PLACELAB_CHECK(xs.size() >= 2) << "batch_norm of " << shape_text(xs);
  Shape c{xs.back()};
  Value gamma = with_scale ? variable("gamma", c, true) : Value{};
  Value beta = variable("beta", c, true);
  Value mm = variable("moving_mean", c, false);
  Value mv = variable("moving_variance", c, false);
  vars[static_cast<std::size_t>(values[mm.id].var)].moving_statistic = true;
  vars[static_cast<std::size_t>(values[mv.id].var)].moving_statistic = true;
  std::vector<int> axes;
  for (int i = 0; i + 1 < static_cast<int>(xs.size()); ++i) axes.push_back(i);
  if (options.batch_norm == BatchNormStyle::kDecomposed) return norm_decomposed(x, axes, gamma, beta, true, mm, mv);
  if (options.framework == Framework::kPyTorch) {
    // nn.BatchNorm2d in training: num_batches_tracked.add_(1), one tiny kernel before the norm.
    Value counter = variable("num_batches_tracked", Shape{}, false);
    Value counted = emit1("Add", ew(1, 1), {counter}, Shape{});
    nodes[values[counted.id].node].op.output_bytes = 0;  // in place
  }
  std::vector<Value> in{x, beta};
  if (gamma.valid()) in.push_back(gamma);
  int64_t e = elems(x);
  bool has_gamma = gamma.valid();
  // FusedBatchNorm: y, batch mean, batch variance (the saved statistics its gradient reads).
  std::vector<Value> outs = emit("FusedBatchNorm", "FusedBatchNorm", ew(e, 2), in, {xs, c, c},
                                 [e, has_gamma](Impl& b, GradCtx& g) {
                                   // The saved statistics (2 × C floats) come in by a control edge, not
                                   // a data edge: the simulator keeps an op's whole output alive for its
                                   // last data consumer, and a data edge here would hold y ([N,H,W,C],
                                   // freed by TF after the ReLU) until the backward pass — 3.8 GiB too
                                   // much at ResNet-200's peak. The few bytes a remote gradient would
                                   // receive are left out.
                                   std::vector<Value> reads{b.dy(g), b.in(g, 0)};
                                   if (has_gamma) reads.push_back(b.in(g, 2));
                                   Shape cs = b.shp(b.in(g, 1));
                                   std::vector<Shape> shapes{b.shp(b.in(g, 0)), cs, cs};
                                   const uint32_t forward = b.values[b.out(g, 1).id].node;
                                   auto gs = b.emit("FusedBatchNormGrad", "FusedBatchNormGrad", ew(e, 3), reads, shapes);
                                   b.nodes[b.values[gs[0].id].node].controls.push_back(forward);
                                   if (b.needs(g, 0)) b.give(g, 0, gs[0]);
                                   b.give(g, 1, gs[2]);
                                   if (has_gamma) b.give(g, 2, gs[1]);
                                 });
  // PyTorch's batch-norm kernel updates the running statistics itself; TF adds the ops.
  if (options.framework == Framework::kTensorFlow) {
    moving_average(values[mm.id].var, outs[1]);
    moving_average(values[mv.id].var, outs[2]);
  }
  return outs[0];
}

Value TrainingGraphBuilder::Impl::layer_norm(Value x) {
  Shape h{shp(x).back()};
  Value gamma = variable("gamma", h, true);
  Value beta = variable("beta", h, true);
  if (options.framework == Framework::kTensorFlow) return norm_decomposed(x, {-1}, gamma, beta, false, {}, {});
  // aten::native_layer_norm: one kernel computes the statistics and normalises (it reads x twice);
  // its backward one kernel for the input gradient and the parameters' sums.
  const int64_t e = elems(x);
  const Shape xs = shp(x);
  return emit1("LayerNorm", ew(e, 2), {x, gamma, beta}, xs, [e](Impl& b, GradCtx& g) {
    Shape hs = b.shp(b.in(g, 1));
    auto gs = b.emit("LayerNormGrad", "LayerNormGrad", ew(e, 3), {b.dy(g), b.in(g, 0), b.in(g, 1)},
                     {b.shp(b.in(g, 0)), hs, hs});
    b.give(g, 0, gs[0]);
    b.give(g, 1, gs[1]);
    b.give(g, 2, gs[2]);
  });
}

// --- public API -------------------------------------------------------------------------------
TrainingGraphBuilder::TrainingGraphBuilder(BuilderOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.framework == Framework::kPyTorch) {
    PLACELAB_CHECK(options.batch_norm == BatchNormStyle::kFused && !options.shape_ops &&
                   !options.variable_moving_averages && !options.global_step &&
                   !options.exponential_decay_learning_rate && !options.loss_moving_averages &&
                   options.optimizer != Optimizer::kAdamWeightDecay && !options.colocate_gradients_with_ops)
        << "the PyTorch form has fused batch norm and none of TensorFlow's bookkeeping ops";
  }
  impl_->options = options;
}
TrainingGraphBuilder::~TrainingGraphBuilder() = default;
TrainingGraphBuilder::TrainingGraphBuilder(TrainingGraphBuilder&&) noexcept = default;
TrainingGraphBuilder& TrainingGraphBuilder::operator=(TrainingGraphBuilder&&) noexcept = default;
const BuilderOptions& TrainingGraphBuilder::options() const { return impl_->options; }

TrainingGraphBuilder::ScopeGuard::~ScopeGuard() {
  if (b_) b_->impl_->frames.pop_back();
}
TrainingGraphBuilder::ScopeGuard TrainingGraphBuilder::scope(std::string_view name) {
  std::string p = impl_->prefix();
  impl_->frames.push_back({p.empty() ? std::string(name) : p + "/" + std::string(name), false, impl_->layer()});
  return ScopeGuard(this);
}
TrainingGraphBuilder::ScopeGuard TrainingGraphBuilder::layer(std::string_view name, int32_t layer_id) {
  std::string p = impl_->prefix();
  impl_->frames.push_back({p.empty() ? std::string(name) : p + "/" + std::string(name), true,
                           layer_id >= 0 ? layer_id : impl_->layer()});
  return ScopeGuard(this);
}

std::vector<Value> TrainingGraphBuilder::input_pipeline(const std::vector<Shape>& shapes, std::string_view type,
                                                        const std::vector<Value>& inputs) {
  auto s = layer("input");
  int64_t bytes = 0;
  for (const Shape& sh : shapes) bytes += num_elements(sh) * builder_detail::kFloatBytes;
  std::vector<Value> out = impl_->emit(type, type, KernelSignature::copy(bytes), inputs, shapes);
  impl_->nodes.back().op.cpu_only = true;
  return out;
}
std::vector<Value> TrainingGraphBuilder::queue_runner_op(std::string_view type, KernelSignature kernel,
                                                         const std::vector<Value>& inputs,
                                                         const std::vector<Shape>& outputs, int64_t element_bytes) {
  Impl& b = *impl_;
  PLACELAB_CHECK(b.phase == Phase::kForward && element_bytes >= 0) << "queue_runner_op " << type;
  std::vector<Value> out = b.emit(type, type, kernel, inputs, outputs, {}, false);
  Op& op = b.nodes.back().op;
  op.cpu_only = true;
  op.output_bytes = 0;
  for (Value v : out) {
    b.values[v.id].bytes = num_elements(b.values[v.id].shape) * element_bytes;
    op.output_bytes += b.values[v.id].bytes;
  }
  b.build_stats.forward_flops -= op.flops;  // input work, not the network's
  return out;
}
Value TrainingGraphBuilder::variable(std::string_view name, const Shape& shape) {
  return impl_->variable(name, shape, true);
}
Value TrainingGraphBuilder::non_trainable_variable(std::string_view name, const Shape& shape) {
  return impl_->variable(name, shape, false);
}

Value TrainingGraphBuilder::conv2d(Value x, Value w, int64_t stride, int64_t pad_h, int64_t pad_w) {
  return conv2d_bias(x, w, Value{}, stride, pad_h, pad_w);
}

Value TrainingGraphBuilder::conv2d_bias(Value x, Value w, Value bias, int64_t stride, int64_t pad_h, int64_t pad_w) {
  Impl& b = *impl_;
  if (bias.valid() && b.options.framework == Framework::kTensorFlow)
    return bias_add(conv2d(x, w, stride, pad_h, pad_w), bias);
  const Shape xs = b.shp(x), ws = b.shp(w);
  PLACELAB_CHECK(xs.size() == 4 && ws.size() == 4 && xs[3] == ws[2])
      << "conv2d of " << shape_text(xs) << " with filter " << shape_text(ws);
  int64_t n = xs[0], h = xs[1], wd = xs[2], c = xs[3], r = ws[0], s = ws[1], k = ws[3];
  int64_t ho = (h + 2 * pad_h - r) / stride + 1, wo = (wd + 2 * pad_w - s) / stride + 1;
  PLACELAB_CHECK(ho > 0 && wo > 0) << "conv2d output of " << shape_text(xs);
  // The signature has one padding for both axes; an asymmetric padding (1×7 convolutions) is
  // described by the padded input with pad 0, which gives the same output size and work.
  bool sym = pad_h == pad_w;
  int64_t sh = sym ? h : h + 2 * pad_h, sw = sym ? wd : wd + 2 * pad_w, sp = sym ? pad_h : 0;
  auto sig = [=](KernelClass cls) { return KernelSignature::conv2d(cls, n, c, sh, sw, k, r, s, stride, sp); };
  // PyTorch: cudnn_convolution adds the bias inside aten::conv2d; its gradient is a sum over N, H, W.
  std::vector<Value> inputs{x, w};
  if (bias.valid()) {
    PLACELAB_CHECK(b.shp(bias) == Shape{k}) << "conv bias " << shape_text(b.shp(bias)) << " for " << k << " filters";
    inputs.push_back(bias);
  }
  const int64_t out_elems = n * ho * wo * k;
  return b.emit1("Conv2D", sig(KernelClass::kConv2D), inputs, {n, ho, wo, k}, [sig, out_elems, k](Impl& bb, Impl::GradCtx& g) {
    // TF 1.x passes the input and filter sizes as Shape ops (shape_ops).
    if (bb.needs(g, 0)) {
      std::vector<Value> in{bb.in(g, 1), bb.dy(g)};
      if (bb.options.shape_ops) in.push_back(bb.shape_of(bb.in(g, 0)));
      bb.give(g, 0, bb.emit1("Conv2DBackpropInput", sig(KernelClass::kConv2DBackpropInput), in, bb.shp(bb.in(g, 0))));
    }
    if (bb.needs(g, 1)) {
      std::vector<Value> in{bb.in(g, 0), bb.dy(g)};
      if (bb.options.shape_ops) in.push_back(bb.shape_of(bb.in(g, 1)));
      bb.give(g, 1, bb.emit1("Conv2DBackpropFilter", sig(KernelClass::kConv2DBackpropFilter), in, bb.shp(bb.in(g, 1))));
    }
    if (bb.nodes[g.node].inputs.size() > 2)
      bb.give(g, 2, bb.emit1("Sum", KernelSignature::reduction(out_elems, k), {bb.dy(g)}, Shape{k}));
  });
}

Value TrainingGraphBuilder::matmul(Value a, Value bv, bool transpose_b) {
  Impl& b = *impl_;
  const Shape sa = b.shp(a), sb = b.shp(bv);
  PLACELAB_CHECK(sa.size() >= 2 && sb.size() >= 2) << "matmul of " << shape_text(sa) << " and " << shape_text(sb);
  int64_t k = sa.back();
  int64_t kb = transpose_b ? sb[sb.size() - 1] : sb[sb.size() - 2];
  int64_t n = transpose_b ? sb[sb.size() - 2] : sb[sb.size() - 1];
  PLACELAB_CHECK(k == kb) << "matmul inner dimensions of " << shape_text(sa) << " and " << shape_text(sb);
  Shape out = sa;
  out.back() = n;
  if (sb.size() == 2) {
    int64_t m = num_elements(sa) / k;
    return b.emit1("MatMul", KernelSignature::gemm(m, n, k), {a, bv}, out, [m, n, k, transpose_b](Impl& bb, Impl::GradCtx& g) {
      if (bb.needs(g, 0))
        bb.give(g, 0, bb.emit1("MatMul", KernelSignature::gemm(m, k, n), {bb.dy(g), bb.in(g, 1)}, bb.shp(bb.in(g, 0))));
      if (bb.needs(g, 1))
        bb.give(g, 1, bb.emit1("MatMul", transpose_b ? KernelSignature::gemm(n, k, m) : KernelSignature::gemm(k, n, m),
                               {bb.in(g, 0), bb.dy(g)}, bb.shp(bb.in(g, 1))));
    });
  }
  PLACELAB_CHECK(sa.size() == sb.size() && std::equal(sa.begin(), sa.end() - 2, sb.begin()))
      << "batched matmul of " << shape_text(sa) << " and " << shape_text(sb);
  int64_t m = sa[sa.size() - 2];
  int64_t batch = num_elements(sa) / (m * k);
  return b.emit1("BatchMatMul", KernelSignature::gemm(m, n, k, batch), {a, bv}, out,
                 [m, n, k, batch, transpose_b](Impl& bb, Impl::GradCtx& g) {
                   if (bb.needs(g, 0))
                     bb.give(g, 0, bb.emit1("BatchMatMul", KernelSignature::gemm(m, k, n, batch), {bb.dy(g), bb.in(g, 1)},
                                            bb.shp(bb.in(g, 0))));
                   if (bb.needs(g, 1))
                     bb.give(g, 1, bb.emit1("BatchMatMul",
                                            transpose_b ? KernelSignature::gemm(n, k, m, batch)
                                                        : KernelSignature::gemm(k, n, m, batch),
                                            {bb.in(g, 0), bb.dy(g)}, bb.shp(bb.in(g, 1))));
                 });
}

Value TrainingGraphBuilder::dense(Value x, Value w, Value bias) {
  Impl& b = *impl_;
  if (b.options.framework == Framework::kTensorFlow) return bias_add(matmul(x, w), bias);
  const Shape sx = b.shp(x), sw = b.shp(w);
  PLACELAB_CHECK(sx.size() == 2 && sw.size() == 2 && sx[1] == sw[0] && b.shp(bias) == Shape{sw[1]})
      << "dense of " << shape_text(sx) << ", " << shape_text(sw) << ", " << shape_text(b.shp(bias));
  const int64_t m = sx[0], k = sx[1], n = sw[1];
  // aten::addmm(bias, x, w): one GEMM that starts from the broadcast bias.
  return b.emit1("MatMul", KernelSignature::gemm(m, n, k), {x, w, bias}, Shape{m, n}, [m, n, k](Impl& bb, Impl::GradCtx& g) {
    if (bb.needs(g, 0))
      bb.give(g, 0, bb.emit1("MatMul", KernelSignature::gemm(m, k, n), {bb.dy(g), bb.in(g, 1)}, Shape{m, k}));
    bb.give(g, 1, bb.emit1("MatMul", KernelSignature::gemm(k, n, m), {bb.in(g, 0), bb.dy(g)}, Shape{k, n}));
    bb.give(g, 2, bb.emit1("Sum", KernelSignature::reduction(m * n, n), {bb.dy(g)}, Shape{n}));
  });
}

Value TrainingGraphBuilder::bias_add(Value x, Value bias) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  PLACELAB_CHECK(b.shp(bias) == Shape{xs.back()}) << "bias " << shape_text(b.shp(bias)) << " for " << shape_text(xs);
  int64_t e = b.elems(x), c = xs.back();
  return b.emit1("BiasAdd", Impl::ew(e, 2), {x, bias}, xs, [e, c](Impl& bb, Impl::GradCtx& g) {
    if (bb.needs(g, 0)) bb.give(g, 0, bb.dy(g));
    bb.give(g, 1, bb.emit1("BiasAddGrad", KernelSignature::reduction(e, c), {bb.dy(g)}, Shape{c}));
  });
}

Value TrainingGraphBuilder::batch_norm(Value x, bool scale) { return impl_->batch_norm(x, scale); }
Value TrainingGraphBuilder::layer_norm(Value x) { return impl_->layer_norm(x); }
Value TrainingGraphBuilder::relu(Value x) { return impl_->unary("Relu", x, "ReluGrad", true); }
Value TrainingGraphBuilder::sigmoid(Value x) { return impl_->unary("Sigmoid", x, "SigmoidGrad", true); }
Value TrainingGraphBuilder::tanh(Value x) { return impl_->unary("Tanh", x, "TanhGrad", true); }
Value TrainingGraphBuilder::gelu(Value x) {
  PLACELAB_CHECK(impl_->options.framework == Framework::kPyTorch) << "TF 1.x builds GELU from its elementwise ops";
  return impl_->unary("Gelu", x, "GeluGrad", false);
}
Value TrainingGraphBuilder::rsqrt(Value x) { return impl_->unary("Rsqrt", x, "RsqrtGrad", true); }
Value TrainingGraphBuilder::add(Value a, Value b) { return impl_->binary(Impl::Bin::kAdd, a, b); }
Value TrainingGraphBuilder::sub(Value a, Value b) { return impl_->binary(Impl::Bin::kSub, a, b); }
Value TrainingGraphBuilder::mul(Value a, Value b) { return impl_->binary(Impl::Bin::kMul, a, b); }
Value TrainingGraphBuilder::squared_difference(Value a, Value b) { return impl_->binary(Impl::Bin::kSqDiff, a, b); }

Value TrainingGraphBuilder::scale(Value x, double /*factor*/) {
  Impl& b = *impl_;
  int64_t e = b.elems(x);
  return b.emit1("Mul", Impl::ew(e, 1), {x}, b.shp(x), [e](Impl& bb, Impl::GradCtx& g) {
    Value d = bb.emit1("Mul", Impl::ew(e, 1), {bb.dy(g)}, bb.shp(bb.dy(g)));
    if (bb.options.shape_ops) {
      Value sx = bb.shape_of(bb.in(g, 0));
      Value bga = bb.shape_op("BroadcastGradientArgs", {sx, bb.shape_op("Shape", {})});
      d = bb.sum_to(d, bb.shp(bb.in(g, 0)), bga, sx);
    }
    bb.give(g, 0, d);
  });
}
Value TrainingGraphBuilder::add_constant(Value x, double /*c*/) { return impl_->add_const(x); }
Value TrainingGraphBuilder::pow(Value x, double /*exponent*/) {
  Impl& b = *impl_;
  int64_t e = b.elems(x);
  return b.emit1("Pow", Impl::ew(e, 1), {x}, b.shp(x), [e](Impl& bb, Impl::GradCtx& g) {
    // d(x^p) = p · x^(p-1) · dy
    Shape s = bb.shp(bb.in(g, 0));
    Value p1 = bb.emit1("Pow", Impl::ew(e, 1), {bb.in(g, 0)}, s);
    Value scaled = bb.emit1("mul", Impl::ew(e, 1), {p1}, s);
    Value d = bb.emit1("mul", Impl::ew(e, 2), {bb.dy(g), scaled}, s);
    if (bb.options.shape_ops) {
      Value sx = bb.shape_of(bb.in(g, 0));
      Value bga = bb.shape_op("BroadcastGradientArgs", {sx, bb.shape_op("Shape", {})});
      d = bb.sum_to(d, s, bga, sx);
    }
    bb.give(g, 0, d);
  });
}
Value TrainingGraphBuilder::zeros(const Shape& shape) {
  return impl_->emit1("zeros", Impl::ew(num_elements(shape), 1), {}, shape);
}
Value TrainingGraphBuilder::cast(Value x) {
  Impl& b = *impl_;
  int64_t e = b.elems(x);
  return b.emit1("Cast", Impl::ew(e, 1), {x}, b.shp(x), [e](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.emit1("Cast", Impl::ew(e, 1), {bb.dy(g)}, bb.shp(bb.dy(g))));
  });
}
Value TrainingGraphBuilder::stop_gradient(Value x) {
  Impl& b = *impl_;
  Value y = b.emit1("StopGradient", KernelSignature::noop(), {x}, b.shp(x));
  b.values[y.id].requires_grad = false;
  b.nodes[b.values[y.id].node].grad = {};
  return y;
}
Value TrainingGraphBuilder::add_n(const std::vector<Value>& vs) {
  Impl& b = *impl_;
  PLACELAB_CHECK(!vs.empty()) << "add_n of nothing";
  for (Value v : vs) PLACELAB_CHECK(b.shp(v) == b.shp(vs[0])) << "add_n shapes differ";
  if (vs.size() == 1) return vs[0];
  int64_t e = b.elems(vs[0]);
  return b.emit1("AddN", Impl::ew(e, static_cast<int64_t>(vs.size())), vs, b.shp(vs[0]),
                 [n = vs.size()](Impl& bb, Impl::GradCtx& g) {
                   for (std::size_t i = 0; i < n; ++i)
                     if (bb.needs(g, i)) bb.give(g, i, bb.dy(g));
                 });
}
Value TrainingGraphBuilder::reduce_mean(Value x, const std::vector<int>& axes, bool keep_dims) {
  return impl_->reduce(true, x, axes, keep_dims);
}
Value TrainingGraphBuilder::reduce_sum(Value x, const std::vector<int>& axes, bool keep_dims) {
  return impl_->reduce(false, x, axes, keep_dims);
}

Value TrainingGraphBuilder::softmax(Value x) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  int64_t cols = xs.back(), e = b.elems(x), rows = e / cols;
  return b.emit1("Softmax", KernelSignature::softmax(rows, cols), {x}, xs, [e, rows](Impl& bb, Impl::GradCtx& g) {
    // TF's _SoftmaxGrad: (dy - sum(dy · y, -1)) · y
    Shape s = bb.shp(bb.out(g));
    Shape r = s;
    r.back() = 1;
    Value prod = bb.emit1("mul", Impl::ew(e, 2), {bb.dy(g), bb.out(g)}, s);
    Value sum = bb.emit1("Sum", KernelSignature::reduction(e, rows), {prod}, r);
    Value diff = bb.emit1("sub", Impl::ew(e, 2), {bb.dy(g), sum}, s);
    bb.give(g, 0, bb.emit1("mul", Impl::ew(e, 2), {diff, bb.out(g)}, s));
  });
}

Value TrainingGraphBuilder::concat(const std::vector<Value>& vs, int axis) {
  Impl& b = *impl_;
  PLACELAB_CHECK(!vs.empty()) << "concat of nothing";
  Shape out = b.shp(vs[0]);
  auto ax = static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(out.size()) : axis);
  PLACELAB_CHECK(ax < out.size()) << "concat axis " << axis;
  out[ax] = 0;
  int64_t bytes = 0;
  for (Value v : vs) {
    Shape s = b.shp(v);
    PLACELAB_CHECK(s.size() == out.size()) << "concat ranks differ";
    out[ax] += s[ax];
    bytes += b.val(v).bytes;
  }
  if (vs.size() == 1) return vs[0];
  return b.emit1("ConcatV2", KernelSignature::copy(bytes), vs, out, [n = vs.size()](Impl& bb, Impl::GradCtx& g) {
    std::vector<Value> shapes;
    if (bb.options.shape_ops)
      for (std::size_t i = 0; i < n; ++i) shapes.push_back(bb.shape_of(bb.in(g, i)));
    // ConcatOffset gives each input's offset; a Slice of dy per input that needs a gradient.
    Value offsets = bb.emit1("ConcatOffset", KernelSignature::noop(), shapes, Shape{static_cast<int64_t>(n)});
    for (std::size_t i = 0; i < n; ++i)
      if (bb.needs(g, i)) {
        const Shape s = bb.shp(bb.in(g, i));
        bb.give(g, i, bb.emit1("Slice", KernelSignature::copy(num_elements(s) * builder_detail::kFloatBytes), {bb.dy(g), offsets}, s));
      }
  });
}

std::vector<Value> TrainingGraphBuilder::split(Value x, int axis, int parts) {
  Impl& b = *impl_;
  Shape part = b.shp(x);
  auto ax = static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(part.size()) : axis);
  PLACELAB_CHECK(ax < part.size() && parts > 0 && part[ax] % parts == 0) << "split of " << shape_text(part);
  part[ax] /= parts;
  int64_t bytes = b.val(x).bytes;
  return b.emit("Split", "split", KernelSignature::copy(bytes), {x}, std::vector<Shape>(static_cast<std::size_t>(parts), part),
                [bytes](Impl& bb, Impl::GradCtx& g) {
                  // TF's _SplitGrad concatenates the output gradients, zeros for the missing ones.
                  std::vector<Value> parts_grad;
                  for (std::size_t i = 0; i < g.dy.size(); ++i) {
                    if (g.dy[i] != UINT32_MAX) {
                      parts_grad.push_back({g.dy[i]});
                    } else {
                      const Shape s = bb.shp(bb.out(g, i));
                      parts_grad.push_back(bb.emit1("zeros_like", Impl::ew(num_elements(s), 1), {bb.out(g, i)}, s));
                    }
                  }
                  bb.give(g, 0, bb.emit1("concat", KernelSignature::copy(bytes), parts_grad, bb.shp(bb.in(g, 0))));
                });
}

Value TrainingGraphBuilder::reshape(Value x, const Shape& shape) {
  Impl& b = *impl_;
  PLACELAB_CHECK(num_elements(shape) == b.elems(x)) << "reshape " << shape_text(b.shp(x)) << " to " << shape_text(shape);
  return b.emit1("Reshape", KernelSignature::noop(), {x}, shape, [](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.reshape_back(bb.dy(g), bb.in(g, 0)));
  });
}

Value TrainingGraphBuilder::transpose(Value x, const std::vector<int>& perm) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  PLACELAB_CHECK(perm.size() == xs.size()) << "transpose rank";
  Shape out;
  for (int p : perm) out.push_back(xs[static_cast<std::size_t>(p)]);
  int64_t bytes = b.val(x).bytes;
  return b.emit1("Transpose", KernelSignature::copy(bytes), {x}, out, [bytes](Impl& bb, Impl::GradCtx& g) {
    std::vector<Value> in{bb.dy(g)};
    if (bb.options.shape_ops) in.push_back(bb.shape_op("InvertPermutation", {}, static_cast<int64_t>(bb.shp(bb.dy(g)).size())));
    bb.give(g, 0, bb.emit1("Transpose", KernelSignature::copy(bytes), in, bb.shp(bb.in(g, 0))));
  });
}

Value TrainingGraphBuilder::slice(Value x, const Shape& begin, const Shape& size) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  PLACELAB_CHECK(begin.size() == xs.size() && size.size() == xs.size()) << "slice rank of " << shape_text(xs);
  for (std::size_t i = 0; i < xs.size(); ++i)
    PLACELAB_CHECK(begin[i] >= 0 && size[i] >= 0 && begin[i] + size[i] <= xs[i])
        << "slice " << shape_text(begin) << " + " << shape_text(size) << " of " << shape_text(xs);
  if (size == xs) return x;
  return b.emit1("Slice", KernelSignature::copy(num_elements(size) * builder_detail::kFloatBytes), {x}, size,
                 [](Impl& bb, Impl::GradCtx& g) {
                   const Shape s = bb.shp(bb.in(g, 0));
                   bb.give(g, 0, bb.emit1("Pad", KernelSignature::copy(num_elements(s) * builder_detail::kFloatBytes), {bb.dy(g)}, s));
                 });
}

Value TrainingGraphBuilder::broadcast_to(Value x, const Shape& shape) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  auto s = builder_detail::broadcast(xs, shape);
  PLACELAB_CHECK(s && *s == shape) << "broadcast_to " << shape_text(xs) << " to " << shape_text(shape);
  if (xs == shape) return x;
  return b.emit1("BroadcastTo", KernelSignature::copy(num_elements(shape) * builder_detail::kFloatBytes), {x}, shape,
                 [](Impl& bb, Impl::GradCtx& g) { bb.give(g, 0, bb.reduce_to(bb.dy(g), bb.shp(bb.in(g, 0)))); });
}

Value TrainingGraphBuilder::select(Value cond, Value a, Value c) {
  Impl& b = *impl_;
  auto ac = builder_detail::broadcast(b.shp(a), b.shp(c));
  auto s = ac ? builder_detail::broadcast(b.shp(cond), *ac) : std::nullopt;
  PLACELAB_CHECK(s) << "select of " << shape_text(b.shp(cond)) << ", " << shape_text(b.shp(a)) << " and "
                    << shape_text(b.shp(c)) << ": shapes do not broadcast";
  const Shape out = *s;
  const int64_t e = num_elements(out);
  return b.emit1("Select", Impl::ew(e, 3), {cond, a, c}, out, [e, out](Impl& bb, Impl::GradCtx& g) {
    // dy where the branch was taken, zeros elsewhere: one Select per side (TF's zeros_like + select).
    Value zeros = bb.emit1("zeros", Impl::ew(e, 1), {}, out);
    for (std::size_t i = 1; i <= 2; ++i)
      if (bb.needs(g, i)) {
        Value picked = bb.emit1("Select", Impl::ew(e, 3), {bb.in(g, 0), i == 1 ? bb.dy(g) : zeros, i == 1 ? zeros : bb.dy(g)}, out);
        bb.give(g, i, bb.reduce_to(picked, bb.shp(bb.in(g, i))));
      }
  });
}

Value TrainingGraphBuilder::pad(Value x, const Shape& before, const Shape& after) {
  Impl& b = *impl_;
  const Shape xs = b.shp(x);
  PLACELAB_CHECK(before.size() == xs.size() && after.size() == xs.size()) << "pad rank of " << shape_text(xs);
  Shape out = xs;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    PLACELAB_CHECK(before[i] >= 0 && after[i] >= 0) << "pad " << shape_text(before) << " / " << shape_text(after);
    out[i] += before[i] + after[i];
  }
  if (out == xs) return x;
  return b.emit1("Pad", KernelSignature::copy(num_elements(out) * builder_detail::kFloatBytes), {x}, out,
                 [](Impl& bb, Impl::GradCtx& g) {
                   const Shape s = bb.shp(bb.in(g, 0));
                   bb.give(g, 0, bb.emit1("Slice", KernelSignature::copy(num_elements(s) * builder_detail::kFloatBytes), {bb.dy(g)}, s));
                 });
}

namespace {
Shape pool_shape(const Shape& xs, int64_t k, int64_t stride, int64_t pad) {
  PLACELAB_CHECK(xs.size() == 4) << "pooling of " << shape_text(xs);
  return {xs[0], (xs[1] + 2 * pad - k) / stride + 1, (xs[2] + 2 * pad - k) / stride + 1, xs[3]};
}
}  // namespace

Value TrainingGraphBuilder::max_pool(Value x, int64_t k, int64_t stride, int64_t pad) {
  Impl& b = *impl_;
  Shape out = pool_shape(b.shp(x), k, stride, pad);
  int64_t eo = num_elements(out), ei = b.elems(x);
  return b.emit1("MaxPool", KernelSignature::reduction(eo * k * k, eo), {x}, out, [ei](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.emit1("MaxPoolGrad", Impl::ew(ei, 3), {bb.in(g, 0), bb.out(g), bb.dy(g)}, bb.shp(bb.in(g, 0))));
  });
}
Value TrainingGraphBuilder::avg_pool(Value x, int64_t k, int64_t stride, int64_t pad) {
  Impl& b = *impl_;
  Shape out = pool_shape(b.shp(x), k, stride, pad);
  int64_t eo = num_elements(out), ei = b.elems(x);
  return b.emit1("AvgPool", KernelSignature::reduction(eo * k * k, eo), {x}, out, [ei](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.emit1("AvgPoolGrad", Impl::ew(ei, 1), {bb.dy(g)}, bb.shp(bb.in(g, 0))));
  });
}
Value TrainingGraphBuilder::lrn(Value x, int64_t depth_radius) {
  Impl& b = *impl_;
  int64_t e = b.elems(x), window = 2 * depth_radius + 1;
  return b.emit1("LRN", Impl::ew(e, window), {x}, b.shp(x), [e, window](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.emit1("LRNGrad", Impl::ew(e, window + 2), {bb.dy(g), bb.in(g, 0), bb.out(g)}, bb.shp(bb.in(g, 0))));
  });
}

Value TrainingGraphBuilder::gather(Value table, Value ids) {
  Impl& b = *impl_;
  const Shape ts = b.shp(table);
  int32_t var = b.val(table).var;
  PLACELAB_CHECK(ts.size() == 2 && var >= 0) << "gather needs a variable table [rows, dim]";
  Shape out = b.shp(ids);
  int64_t lookups = b.elems(ids);
  out.push_back(ts[1]);
  if (b.options.framework == Framework::kPyTorch) {
    // nn.Embedding (sparse=False): aten::embedding, and embedding_dense_backward scatters the
    // output gradient into a dense [rows, dim] gradient that the optimizer applies whole.
    return b.emit1("GatherV2", KernelSignature::embedding(ts[0], ts[1], lookups), {table, ids}, out,
                   [lookups, rows = ts[0], dim = ts[1]](Impl& bb, Impl::GradCtx& g) {
                     bb.give(g, 0, bb.emit1("EmbeddingGrad", KernelSignature::embedding(rows, dim, lookups),
                                            {bb.dy(g), bb.in(g, 1)}, Shape{rows, dim}));
                   });
  }
  b.vars[static_cast<std::size_t>(var)].sparse = true;
  return b.emit1("GatherV2", KernelSignature::embedding(ts[0], ts[1], lookups), {table, ids}, out,
                 [lookups, dim = ts[1]](Impl& bb, Impl::GradCtx& g) {
                   // IndexedSlices: the output gradient rows, applied sparsely to the table.
                   std::vector<Value> in{bb.dy(g)};
                   if (bb.options.shape_ops) {
                     // values_shape = concat([Size(ids)], Shape(table)[1:]); indices reshaped to it.
                     Value size = bb.shape_op("ExpandDims", {bb.shape_op("Size", {bb.in(g, 1)})});
                     Value tail = bb.shape_op("strided_slice", {bb.shape_op("ToInt32", {bb.shape_of(bb.in(g, 0))})});
                     Value values_shape = bb.shape_op("concat", {size, tail}, 2);
                     bb.emit1("Reshape", KernelSignature::noop(), {bb.in(g, 1), size}, Shape{lookups});
                     in.push_back(values_shape);
                   }
                   bb.give(g, 0, bb.emit1("Reshape", KernelSignature::noop(), in, Shape{lookups, dim}));
                 });
}

Value TrainingGraphBuilder::softmax_cross_entropy(Value logits, Value labels) {
  Impl& b = *impl_;
  const Shape ls = b.shp(logits);
  PLACELAB_CHECK(ls.size() == 2 && b.shp(labels) == Shape{ls[0]})
      << "cross-entropy of logits " << shape_text(ls) << " and labels " << shape_text(b.shp(labels));
  int64_t n = ls[0], c = ls[1];
  if (b.options.framework == Framework::kPyTorch) {
    // F.cross_entropy: log_softmax, then nll_loss with the mean over the batch.
    Value logp = b.emit1("LogSoftmax", KernelSignature::softmax(n, c), {logits}, ls, [n, c](Impl& bb, Impl::GradCtx& g) {
      bb.give(g, 0, bb.emit1("LogSoftmaxGrad", Impl::ew(n * c, 2), {bb.dy(g), bb.out(g)}, Shape{n, c}));
    });
    return b.emit1("NllLoss", KernelSignature::reduction(n, 1), {logp, labels}, Shape{}, [n, c](Impl& bb, Impl::GradCtx& g) {
      bb.give(g, 0, bb.emit1("NllLossGrad", Impl::ew(n * c, 1), {bb.dy(g), bb.in(g, 1)}, Shape{n, c}));
    });
  }
  std::vector<Value> outs =
      b.emit("SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits",
             KernelSignature::softmax(n, c), {logits, labels}, {Shape{n}, ls}, [n, c](Impl& bb, Impl::GradCtx& g) {
               Value e = bb.emit1("ExpandDims", KernelSignature::noop(), {bb.dy(g)}, Shape{n, 1});
               bb.give(g, 0, bb.emit1("mul", Impl::ew(n * c, 2), {e, bb.out(g, 1)}, Shape{n, c}));
             });
  return reduce_mean(outs[0], {0}, false);
}

TrainingGraphBuilder::LstmState TrainingGraphBuilder::lstm_cell(Value x, LstmState state, Value kernel, Value bias) {
  Impl& b = *impl_;
  int64_t batch = b.shp(x)[0];
  int64_t units = b.shp(bias)[0] / 4;
  Shape s{batch, units};
  auto zeros = [&] { return b.emit1("zeros", Impl::ew(batch * units, 1), {}, s); };
  Value h = state.h.valid() ? state.h : zeros();
  Value c = state.c.valid() ? state.c : zeros();
  Value z = dense(concat({x, h}, 1), kernel, bias);
  std::vector<Value> ijfo = split(z, 1, 4);
  Value new_c = add(mul(c, sigmoid(add_constant(ijfo[2], 1.0))), mul(sigmoid(ijfo[0]), tanh(ijfo[1])));
  Value new_h = mul(tanh(new_c), sigmoid(ijfo[3]));
  return {new_h, new_c};
}

void TrainingGraphBuilder::minimize(Value loss) {
  Impl& b = *impl_;
  PLACELAB_CHECK(b.loss == UINT32_MAX) << "minimize() called twice";
  PLACELAB_CHECK(b.elems(loss) == 1) << "loss must be a scalar, got " << shape_text(b.shp(loss));
  std::vector<Value> terms{loss};
  for (uint32_t r : b.regularized) {
    const Impl::ValueRec& v = b.values[r];
    int64_t e = num_elements(v.shape);
    b.overriding = true;
    b.override_prefix = b.nodes[b.vars[static_cast<std::size_t>(v.var)].node].op.name + "/Regularizer";
    b.override_block = b.nodes[v.node].block;
    b.override_layer = b.nodes[v.node].op.layer;
    b.override_colocation.clear();
    Value l2 = b.emit1("L2Loss", KernelSignature::reduction(e, 1), {Value{r}}, Shape{}, [e](Impl& bb, Impl::GradCtx& g) {
      bb.give(g, 0, bb.emit1("mul", Impl::ew(e, 2), {bb.in(g, 0), bb.dy(g)}, bb.shp(bb.in(g, 0))));
    });
    terms.push_back(scale(l2, 0));
    b.overriding = false;
  }
  if (terms.size() > 1) {
    auto s = scope("total_loss");
    loss = add_n(terms);
  }
  for (Value t : terms) b.loss_terms.push_back(t.id);
  if (terms.size() > 1) b.loss_terms.push_back(loss.id);
  b.loss = loss.id;
}

void TrainingGraphBuilder::add_weight_decay(Value variable_read, double /*decay*/) {
  Impl& b = *impl_;
  const Impl::ValueRec& v = b.val(variable_read);
  PLACELAB_CHECK(v.var >= 0 && b.vars[static_cast<std::size_t>(v.var)].trainable) << "weight decay needs a trainable variable";
  PLACELAB_CHECK(b.loss == UINT32_MAX) << "add_weight_decay after minimize()";
  // torch.optim applies weight decay inside the update kernel: no loss terms.
  if (b.options.framework == Framework::kPyTorch) return;
  b.regularized.push_back(variable_read.id);
}

Value TrainingGraphBuilder::dropout(Value x, double /*rate*/) {
  Impl& b = *impl_;
  const Shape s = b.shp(x);
  int64_t e = b.elems(x);
  if (b.options.framework == Framework::kPyTorch) {
    // aten::native_dropout: one fused kernel writes the output and the mask; its backward one
    // multiply (native_dropout_backward).
    return b.emit1("Dropout", Impl::ew(e, 1), {x}, s, [e](Impl& bb, Impl::GradCtx& g) {
      bb.give(g, 0, bb.emit1("DropoutGrad", Impl::ew(e, 2), {bb.dy(g)}, bb.shp(bb.dy(g))));
    });
  }
  auto s1 = scope("dropout");
  Value u = b.emit1("RandomUniform", Impl::ew(e, 1), {}, s);
  Value keep = b.emit1("add", Impl::ew(e, 1), {u}, s);
  Value mask = b.emit1("Floor", Impl::ew(e, 1), {keep}, s);
  Value scaled = b.emit1("div", Impl::ew(e, 1), {x}, s, [e](Impl& bb, Impl::GradCtx& g) {
    bb.give(g, 0, bb.emit1("div", Impl::ew(e, 1), {bb.dy(g)}, bb.shp(bb.dy(g))));
  });
  return mul(scaled, mask);
}

Shape TrainingGraphBuilder::shape(Value v) const { return impl_->shp(v); }

OpGraph TrainingGraphBuilder::finish() && {
  Impl& b = *impl_;
  PLACELAB_CHECK(!b.finished) << "finish() called twice";
  b.backward();
  b.finished = true;
  OpGraph g = b.options.granularity == Granularity::kLayer ? b.to_layer_graph() : b.to_graph();
  // A PyTorch program runs eagerly, its ops in the order they were emitted (docs/simulator.md).
  if (b.options.framework == Framework::kPyTorch) g.set_execution(Execution::kEager);
  b.nodes.clear();
  b.values.clear();
  return g;
}

BuildStats TrainingGraphBuilder::stats() const { return impl_->build_stats; }

}  // namespace placelab::models
