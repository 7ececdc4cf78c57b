// Private to the models library's ONNX import sources: the Importer class and what it knows of a
// tensor, shared by its method files (importer.cpp, translate_layers.cpp, translate_tensors.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common.h"
#include "placelab/core/error.h"
#include "placelab/models/onnx_import.h"

namespace placelab::models::onnx_detail {

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

// One import of one model: the passes that prepare it for ONNX shape inference, then one builder
// translation per node. Methods in importer.cpp, translate_layers.cpp and translate_tensors.cpp.
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

  // The whole import: the model's checks and shape inference, one translation per node, the loss.
  OpGraph run();

 private:
  // --- errors ----------------------------------------------------------------------------------
  [[noreturn]] void fail(const std::string& what) const { throw InputError(file_ + ": " + what); }
  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& what) const {
    fail("node '" + node_name(n) + "' (" + n.op_type() + "): " + what);
  }
  std::string node_name(const onnx::NodeProto& n) const;
  void approximate(const onnx::NodeProto& n, std::string how);

  // --- model-level passes ------------------------------------------------------------------------
  void read_header();

  // Unknown op types and foreign domains fail before shape inference, which would otherwise
  // report them less clearly (or not at all).
  void check_known_ops() const;

  bool is_initializer(const std::string& name) const;

  // Fixes the batch and named symbolic dimensions of the graph inputs before inference, so every
  // shape downstream comes out static.
  void apply_dimension_overrides();

  // A file traced at a fixed batch (torch.onnx.export without dynamic_axes) bakes that batch into
  // the literal shapes of its Reshape and Expand nodes (x.view(1, -1) becomes Reshape(x, [1, -1])).
  // With another batch, each such literal whose first entry is the exported batch gets the new
  // one, and the rewrite is listed in the report. Literals that hold the batch elsewhere (a
  // sequence-first layout, batch·heads) are left alone: inference then fails with a message
  // saying how to re-export.
  void rewrite_baked_batch();

  // ONNX's shape inference divides by strides and multiplies by dilations without checking them
  // (ONNX 1.12: strides 0 on a Conv or a pool is a SIGFPE), so every window attribute is checked
  // before inference sees it.
  void check_window_attributes() const;

  // Every node of the default domain against its operator's schema at the model's opset (inputs,
  // outputs, attributes), as ONNX's checker does: ONNX 1.12's shape inference trusts them, and
  // dereferenced null on a Shape-15 node given four inputs (found by onnx_fuzz).
  void check_node_schemas() const;

  // Every node input names a graph input, an initializer or an output of an earlier node (ONNX
  // requires the nodes in topological order): ONNX 1.12's shape inference read null on a Shape of
  // a name nothing defines (found by onnx_fuzz).
  void check_inputs_defined() const;

  // A Pad's amounts, as the window attributes: ONNX 1.12's inference adds them to the dimensions
  // unchecked (pads of 8.6e18, found by onnx_fuzz, overflowed there and in the element count).
  // Read from the attribute (opset < 11) or from the initializer or Constant node that feeds them.
  void check_pad_amounts();

  // ONNX lets a convolution leave out kernel_shape ("inferred from W"), but ONNX 1.12's shape
  // inference then reads W's type without checking it is known and dereferences null (a SIGSEGV
  // when W has no type). The importer needs W as an initializer anyway: kernel_shape is filled in
  // from its dimensions before inference runs.
  void complete_kernel_shapes();

  void infer_shapes();

  // What to do when a batch override contradicts shapes the file fixed ("" when batch is not
  // overridden or the file's batch was symbolic).
  std::string baked_batch_hint() const;

  // The static shape of every tensor inference (or the file) gives one.
  std::unordered_map<std::string, Shape> static_shapes() const;

  // Evaluates integer shape arithmetic (ShapeFolder) over the current static shapes and turns
  // each evaluated node into a Constant holding its value (name and outputs kept). Returns the
  // number of nodes turned into Constants.
  int fold_shape_arithmetic();

  void run_shape_inference();

  // A shape from the file or from inference: no negative dimension and at most 2^40 elements
  // (4 TiB of floats), so that the element, byte and FLOP counts made of it fit int64.
  void check_shape(const std::string& name, const Shape& shape) const;

  // Every tensor the file holds (initializers, node attributes) has a valid shape, and raw bytes
  // that fill it exactly: ONNX 1.12's shape inference copies an int64 tensor's raw bytes into a
  // buffer sized by whole elements (ParseData), so 63 bytes overflowed a 56-byte buffer
  // (fuzz/onnx_fuzz, found in CI).
  void check_tensor_data() const;

  // Records the static shape and type of every tensor the graph names.
  void collect_tensors();

  // The inferred type and shape of a node output; fails when inference could not give a static one.
  TensorInfo inferred(const onnx::NodeProto& n, const std::string& name) const;

  // Fails on the first node computing a runtime tensor that inference left without a static
  // shape, naming it (the same runtime/constant split as import_node makes).
  void check_runtime_shapes();

  void build_inputs();

  // --- tensors as builder values ---------------------------------------------------------------
  TensorInfo& tensor(const onnx::NodeProto& n, const std::string& name);
  TensorInfo& input(const onnx::NodeProto& n, int i);
  bool has_input(const onnx::NodeProto& n, int i) const { return i < n.input_size() && !n.input(i).empty(); }

  // The builder value of `t` with builder shape `want` (same element count). A constant becomes a
  // variable the first time it is needed: trainable when it holds weights (floating point, more
  // than one element, derived from initializers), else a non-trainable constant. A value held in
  // another shape is reinterpreted with a Reshape (a noop kernel), as a layout change costs
  // nothing in the cost model's terms.
  // `may_train` false keeps a constant non-trainable even when it holds floating-point
  // initializer data (masks and fills, not weights).
  Value value_as(const std::string& name, TensorInfo& t, const Shape& want, bool may_train = true);
  Value value_in(const std::string& name, TensorInfo& t, Layout layout);
  Value in_value(const onnx::NodeProto& n, int i, Layout layout) { return value_in(n.input(i), input(n, i), layout); }

  // Stores the builder value of a node output; checks the builder's shape against inference.
  void set_output(const onnx::NodeProto& n, int i, Value v, Layout layout);
  // A value passed through unchanged (Identity, Cast…).
  void alias_output(const onnx::NodeProto& n, int i, const TensorInfo& from);

  // --- nodes ------------------------------------------------------------------------------------
  // The layer scope of a node: onnx_node_scope of its name, else the name itself (without its
  // leading '/'), else "<op>_<index>".
  std::string layer_key(const onnx::NodeProto& n, int index) const;

  // Folds a node that computes a constant, else translates it (dispatch) under its layer's scope.
  void import_node(const onnx::NodeProto& n, int index);

  // A Slice or Gather of a floating-point initializer (`self.pos[:, :n]`, a positional table cut
  // to the sequence length) trains the whole initializer: the node is built as a runtime slice
  // of its variable, not folded into a smaller constant that would become a variable of the
  // part's size. Not when a reader needs its weights as a constant (Conv, recurrent and
  // normalisation nodes), directly or through ops that only move data: an export without constant
  // folding computes nn.LSTM's W as Slice (its gates reordered) → Concat → Unsqueeze of the
  // initializer, and those fold into the constant the LSTM reads.
  bool reads_part_of_weight(const onnx::NodeProto& n);

  // Whether `value` reaches a node that needs its input as a constant, through data-movement
  // nodes only. Each value is visited once, so the walk is linear in the graph.
  bool feeds_a_constant_reader(const std::string& value);

  // Records the outputs of a node computed from constants or shapes as constants (no builder op).
  void fold(const onnx::NodeProto& n);

  // Calls the translator of the node's op type (translate_layers.cpp, translate_tensors.cpp).
  void dispatch(const onnx::NodeProto& n);

  // --- layer translators (translate_layers.cpp): Conv, Gemm, MatMul, norms, pools, LSTM, GRU ---
  // Symmetric padding for a window op along one axis that gives the inferred output size: the
  // builder has one pad per side. Records an approximation when ONNX pads asymmetrically.
  int64_t window_pad(const onnx::NodeProto& n, int64_t in, int64_t window, int64_t stride, int64_t out,
                     int64_t begin, int64_t end);

  // A 2-D window op's kernel, stride and padding (the same on both sides of an axis), as the builder
  // takes them.
  struct Window {
    int64_t kh, kw, stride, pad_h, pad_w;
  };
  // Reads kernel_shape/strides/pads/auto_pad/dilations of a 2-D window op on x [n,c,h,w] with
  // inferred output [n,k,ho,wo].
  Window window(const onnx::NodeProto& n, const Shape& x, const Shape& y, int64_t kh, int64_t kw,
                const std::array<int64_t, 4>& fused_pads = {0, 0, 0, 0});

  void conv(const onnx::NodeProto& n);

  void gemm(const onnx::NodeProto& n);

  void matmul(const onnx::NodeProto& n);

  // Input `i` is a constant the builder recreates as its own variables of identical size (batch
  // norm scale/offset/statistics, LSTM weights, grouped filters): it must not also become a
  // variable through value_as.
  void consume(const onnx::NodeProto& n, int i);
  void consume_from(const onnx::NodeProto& n, int from);

  void batch_norm(const onnx::NodeProto& n);

  void layer_norm(const onnx::NodeProto& n);

  void pool(const onnx::NodeProto& n);

  void global_pool(const onnx::NodeProto& n);

  // The tensor a pooling or convolution node reads, looking through a Pad fused into it.
  const std::string& unpadded_name(const onnx::NodeProto& n);
  TensorInfo& unpadded_input(const onnx::NodeProto& n) { return tensor(n, unpadded_name(n)); }

  // What an ONNX LSTM or GRU node (`gates` gates per direction: 4 or 3) runs over:
  // X [seq, batch, in] (or [batch, seq, in] with layout 1), W [dirs, gates·h, in], R [dirs, gates·h, h].
  struct Recurrence {
    int64_t h = 0, dirs = 0, in = 0, seq = 0, batch = 0;
    bool batch_first = false;
    std::string direction;
    bool reverse(int64_t d) const { return direction == "reverse" || (direction == "bidirectional" && d == 1); }
  };

  Recurrence recurrence(const onnx::NodeProto& n, int64_t gates);

  // Initial state input `i` [dirs, batch, h] (PyTorch's h0, c0) for direction d: a runtime one
  // seeds the direction's first cell; a constant one (zeros in a traced export) is the cell's
  // zero state (an invalid Value).
  Value initial_state(const onnx::NodeProto& n, int i, int64_t d, const Recurrence& r);

  // X split into one [batch, in] value per step.
  std::vector<Value> recurrence_steps(const onnx::NodeProto& n, const Recurrence& r);

  // Y [seq, dirs, batch, h] (or [batch, seq, dirs, h] with layout 1) from hs[direction][step],
  // and output k ≥ 1 [dirs, batch, h] from finals[k - 1][direction] (Y_h, then LSTM's Y_c), for
  // the outputs some node reads.
  void recurrence_outputs(const onnx::NodeProto& n, const Recurrence& r, const std::vector<std::vector<Value>>& hs,
                          const std::vector<std::vector<Value>>& finals);

  // ONNX LSTM (gates i, o, f, c; W [dirs,4h,in], R [dirs,4h,h], B [dirs,8h]) unrolled over the
  // sequence as TF 1.x BasicLSTMCell steps (gates i, j, f, o: the same work). Per direction one
  // kernel variable [in+h, 4h] holds W and R, and one bias variable [8h] holds both ONNX biases,
  // summed each step into the cell's [4h] bias, so the parameter count equals the file's.
  void lstm(const onnx::NodeProto& n);

  // ONNX GRU (gates z, r, h; W [dirs,3h,in], R [dirs,3h,h], B [dirs,6h]) unrolled as TF 1.x
  // GRUCell steps: [z, r] = σ([x, h]·K_g + b_g); the candidate c = tanh(x·W_h + b_Wh + r ⊙
  // (h·R_h + b_Rh)) with PyTorch's linear_before_reset = 1, else tanh(x·W_h + (r ⊙ h)·R_h + b);
  // h' = z ⊙ h + (1 − z) ⊙ c. Per direction: gate kernel [in+h, 2h] (W and R of z, r), gate bias
  // [4h] (both ONNX biases, summed), candidate kernels [in, h] and [h, h] and bias [2h]: the
  // file's parameters exactly.
  void gru(const onnx::NodeProto& n);

  // --- tensor translators (translate_tensors.cpp): elementwise, shape, indexing, reductions -----
  void unary_approx(const onnx::NodeProto& n);

  // The builder value of operand `i` for a broadcasting op with output rank `rank` in `layout`.
  Value broadcast_operand(const onnx::NodeProto& n, int i, std::size_t rank, Layout layout);

  void binary(const onnx::NodeProto& n);

  void sum(const onnx::NodeProto& n);

  int normalized_axis(const onnx::NodeProto& n, int64_t axis, std::size_t rank);

  void concat(const onnx::NodeProto& n);

  void split(const onnx::NodeProto& n);

  void reshape(const onnx::NodeProto& n);

  void transpose(const onnx::NodeProto& n);

  void dropout(const onnx::NodeProto& n);

  void gather(const onnx::NodeProto& n);

  // The integer contents of constant input `i` (axes, starts, pads…), or a failure naming it.
  std::vector<int64_t> const_ints(const onnx::NodeProto& n, int i, std::string_view what);

  // Slice of a runtime tensor with constant starts, ends, axes and steps 1: one tf.slice.
  void slice(const onnx::NodeProto& n);

  // Slice and Pad keep their input's layout: the input as it is, their two per-axis arguments
  // (begin and size, pads before and after) reordered to channels-last where the input is.
  template <typename Build>
  void in_input_layout(const onnx::NodeProto& n, const TensorInfo& x, Shape first, Shape second, Build build);

  // Gather of a runtime tensor at constant indices (PyTorch's q, k, v = proj[0], proj[1],
  // proj[2]; x[:, 0] of a classifier token): one tf.slice when the indices are one index or a
  // consecutive range, then a Reshape to the output shape.
  void gather_slice(const onnx::NodeProto& n);

  // Expand of an activation to the inferred shape: one tf.broadcast_to (nothing when the shape
  // does not change).
  void expand(const onnx::NodeProto& n);

  // Where(cond, x, y): one tf.where over the three broadcast together. Constant operands (masks,
  // fill values such as -inf) are non-trainable constants.
  void where(const onnx::NodeProto& n);

  // Pad with zeros (mode "constant"). torchvision's Inception-V3 export pads before each 3×3
  // average pool (F.avg_pool2d(x, 3, 1, 1) comes out as Pad + AveragePool with no padding): a Pad
  // of only spatial axes whose one reader is a pool or a convolution becomes that op's padding,
  // as TensorFlow's SAME pooling; any other Pad is a tf.pad.
  void pad(const onnx::NodeProto& n);

  std::vector<int64_t> reduce_axes(const onnx::NodeProto& n);

  void reduce(const onnx::NodeProto& n);

  void softmax(const onnx::NodeProto& n);

  // --- loss -------------------------------------------------------------------------------------
  void add_loss();

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

}  // namespace placelab::models::onnx_detail
