// Importer: the passes that prepare a model for ONNX shape inference (checks, overrides, folding of
// shape arithmetic), its tensors as builder values, the import and dispatch of each node, the loss.
#include "importer.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <map>
#include <optional>

#include "../generators.h"
#include "shape_folder.h"

namespace placelab::models::onnx_detail {
namespace {

// The most nodes an imported graph may have: half the ops a training graph is built with.
constexpr std::size_t kMaxOnnxNodes = detail::kMaxModelOps / 2;

bool is_float_type(int32_t t) {
  using TP = onnx::TensorProto;
  return t == TP::FLOAT || t == TP::FLOAT16 || t == TP::DOUBLE || t == TP::BFLOAT16;
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

// Ops whose output is fully determined by shapes (never by runtime values).
const std::set<std::string, std::less<>> kShapeOnly = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};

}  // namespace

OpGraph Importer::run() {
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

// --- errors ----------------------------------------------------------------------------------
std::string Importer::node_name(const onnx::NodeProto& n) const {
  if (!n.name().empty()) return n.name();
  auto it = node_index_.find(&n);
  return n.op_type() + "#" + std::to_string(it == node_index_.end() ? -1 : it->second);
}

void Importer::approximate(const onnx::NodeProto& n, std::string how) {
  report_.approximations.push_back({node_name(n), n.op_type(), std::move(how)});
}

// --- model-level passes ------------------------------------------------------------------------
void Importer::read_header() {
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

void Importer::check_known_ops() const {
  for (const auto& n : model_.graph().node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      fail(n, "operator domain '" + n.domain() + "' is not supported (only the default ONNX domain)");
    if (onnx::OpSchemaRegistry::Schema(n.op_type(), onnx::ONNX_DOMAIN) == nullptr)
      fail(n, "'" + n.op_type() + "' is not an ONNX operator");
  }
}

bool Importer::is_initializer(const std::string& name) const {
  for (const auto& t : model_.graph().initializer())
    if (t.name() == name) return true;
  return false;
}

void Importer::apply_dimension_overrides() {
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

void Importer::rewrite_baked_batch() {
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

void Importer::check_window_attributes() const {
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

void Importer::check_node_schemas() const {
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

void Importer::check_inputs_defined() const {
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

void Importer::check_pad_amounts() {
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

void Importer::complete_kernel_shapes() {
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

void Importer::infer_shapes() {
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

std::string Importer::baked_batch_hint() const {
  if (exported_batch_ == 0) return "";
  return "; the file was exported with a fixed batch of " + std::to_string(exported_batch_) +
         " baked into its shapes, which batch = " + std::to_string(options_.batch) +
         " contradicts: re-export with a symbolic batch (torch.onnx.export(..., dynamic_axes={'<input>': {0: "
         "'batch'}})) or import with batch 0 (the exported one)";
}

std::unordered_map<std::string, Shape> Importer::static_shapes() const {
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

int Importer::fold_shape_arithmetic() {
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

void Importer::run_shape_inference() {
  try {
    onnx::shape_inference::InferShapes(model_, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/false, /*strict=*/1,
                                                                   /*data_prop=*/true));
  } catch (const std::exception& e) {
    fail(std::string("ONNX shape inference failed: ") + e.what() + baked_batch_hint());
  }
}

void Importer::check_shape(const std::string& name, const Shape& shape) const {
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("tensor '" + name + "' is " + shape_text(shape) + ": a negative dimension");
    if (d > 0 && elements > kMaxElements / d)
      fail("tensor '" + name + "' is " + shape_text(shape) + ": more than 2^40 elements");
    elements *= d;
  }
}

void Importer::check_tensor_data() const {
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

void Importer::collect_tensors() {
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

TensorInfo Importer::inferred(const onnx::NodeProto& n, const std::string& name) const {
  auto it = typed_.find(name);
  if (it == typed_.end() || !known_shape_.count(name))
    fail(n, "the shape of output '" + name + "' could not be inferred (missing or symbolic shapes)");
  return it->second;
}

void Importer::check_runtime_shapes() {
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

void Importer::build_inputs() {
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
TensorInfo& Importer::tensor(const onnx::NodeProto& n, const std::string& name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    fail(n, "input '" + name + "' is not produced by an earlier node, a graph input or an initializer");
  return it->second;
}

TensorInfo& Importer::input(const onnx::NodeProto& n, int i) {
  if (i >= n.input_size() || n.input(i).empty()) fail(n, "input " + std::to_string(i) + " is missing");
  return tensor(n, n.input(i));
}

Value Importer::value_as(const std::string& name, TensorInfo& t, const Shape& want, bool may_train) {
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

Value Importer::value_in(const std::string& name, TensorInfo& t, Layout layout) {
  Shape want = layout == Layout::kChannelsLast ? to_channels_last(t.shape) : t.shape;
  return value_as(name, t, want);
}

void Importer::set_output(const onnx::NodeProto& n, int i, Value v, Layout layout) {
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

void Importer::alias_output(const onnx::NodeProto& n, int i, const TensorInfo& from) {
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
std::string Importer::layer_key(const onnx::NodeProto& n, int index) const {
  std::string scope = onnx_node_scope(n.name());
  if (!scope.empty()) return scope;
  std::string_view name = n.name();
  while (!name.empty() && name.front() == '/') name.remove_prefix(1);
  return name.empty() ? n.op_type() + "_" + std::to_string(index) : std::string(name);
}

void Importer::import_node(const onnx::NodeProto& n, int index) {
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

bool Importer::reads_part_of_weight(const onnx::NodeProto& n) {
  if ((n.op_type() != "Slice" && n.op_type() != "Gather") || n.input_size() < 2 || n.output_size() != 1) return false;
  const TensorInfo& data = tensor(n, n.input(0));
  if (!data.from_initializer || !is_float_type(data.elem_type) || data.elements() <= 1 || !data.shape_known) return false;
  return !feeds_a_constant_reader(n.output(0));
}

bool Importer::feeds_a_constant_reader(const std::string& value) {
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

void Importer::fold(const onnx::NodeProto& n) {
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

void Importer::dispatch(const onnx::NodeProto& n) {
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

// --- loss -------------------------------------------------------------------------------------
void Importer::add_loss() {
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

}  // namespace placelab::models::onnx_detail
