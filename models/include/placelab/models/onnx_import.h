// ONNX import: reads a `.onnx` model (the forward graph of an inference export), runs ONNX shape
// inference, describes each ONNX node to TrainingGraphBuilder, appends a softmax cross-entropy
// loss over the model's first output, and returns the whole training step as an OpGraph —
// gradients and optimizer updates synthesised exactly as the model zoo's are. ONNX images are
// NCHW; the builder's are NHWC, so the importer permutes image shapes (and Conv weights
// [k,c,r,s] → [r,s,c,k]) without adding ops. The ONNX library stays behind this header.
//
//   OnnxImportOptions options;
//   options.batch = 32;
//   options.optimizer = Optimizer::kMomentum;
//   OnnxImportReport report;
//   OpGraph g = import_onnx("resnet50.onnx", options, &report);
//   std::cout << report.brief_report() << "\n";
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/models/builder.h"

namespace placelab::models {

struct OnnxImportOptions {
  // Examples per step: replaces the first dimension of every graph input (symbolic or not).
  // 0 keeps the file's dimension; a symbolic one then is an error naming the input. When it
  // replaces a fixed dimension B (a file traced without dynamic axes), int64 Reshape/Expand shape
  // literals whose first entry is B get the new batch (each rewrite is listed in the report).
  int64_t batch = 0;
  // Sizes for other symbolic dimensions, by their dim_param name (e.g. {"sequence", 128}).
  std::map<std::string, int64_t> dim_values;
  Optimizer optimizer = Optimizer::kSgd;
  Granularity granularity = Granularity::kOp;
  BatchNormStyle batch_norm = BatchNormStyle::kFused;
  // BuilderOptions::shape_ops: TF 1.0–1.2's per-step shape bookkeeping ops in the gradients (no
  // FLOPs). On by default, as in the zoo's CNNs.
  bool shape_ops = true;

  // Throws InputError naming the field, its value and the rule (batch ≥ 0, dim_values > 0).
  void validate() const;
};

// One ONNX node the importer could only model approximately, and how.
struct OnnxApproximation {
  std::string node;     // the node's name (or "<op type>#<index>" when it has none)
  std::string op_type;
  std::string how;      // e.g. "Erf modelled as Tanh: one elementwise op, same cost class"
};

struct OnnxImportReport {
  std::string producer;                     // producer_name and producer_version of the file
  int64_t opset = 0;                        // default-domain opset the model imports
  std::map<std::string, int64_t> op_counts;  // ONNX op type → nodes in the file
  // Nodes whose inputs are all constants (shape arithmetic, Constant, Shape…): folded at import
  // as TensorFlow's constant folding would, no op emitted.
  int64_t folded_nodes = 0;
  std::vector<OnnxApproximation> approximations;
  std::vector<std::string> inputs;  // graph inputs fed by the input pipeline, in order
  std::string logits;               // the output the loss is computed over
  BuildStats stats;                 // trainable parameters and forward FLOPs of the built graph

  // A few lines: producer, opset, nodes, parameters, forward GFLOPs, approximations.
  std::string brief_report() const;
};

// Imports the ONNX model at `path` as a training graph.
// - Graph inputs (those that are not initializers) become the outputs of one input-pipeline op,
//   plus an integer label tensor with one label per row of the loss.
// - Initializers that feed weights (Conv, Gemm/MatMul B and C, Gather tables, LSTM/GRU W/R/B,
//   arithmetic operands with more than one element, the whole of one a Slice or Gather reads)
//   become trainable variables; BatchNormalization
//   and LayerNormalization use the builder's own scale/offset variables, whose sizes equal the
//   ONNX ones, and moving statistics.
// - Integer shape arithmetic (Shape → Gather/Slice/Concat/Unsqueeze/… → Reshape/Slice inputs) is
//   evaluated once the dimensions are fixed and folded to constants before the nodes are built.
// - A zero Pad whose only reader is a pooling or convolution node becomes that node's padding.
// - The loss is the mean sparse softmax cross-entropy over the first graph output, its leading
//   dimensions flattened into rows and its last dimension the classes.
// `report`, when not null, receives what was imported and what was approximated.
// Throws InputError naming the file (and the node and op type where one is at fault) when the
// file cannot be read, is not an ONNX ModelProto (garbage, truncated), fails shape inference,
// leaves a tensor shape unknown, or uses an op the importer cannot model.
OpGraph import_onnx(const std::filesystem::path& path, const OnnxImportOptions& options = {},
                    OnnxImportReport* report = nullptr);
// The same for a model already in memory (the serialized ModelProto's bytes); `origin` names it in
// messages. import_onnx reads the file and calls this.
OpGraph import_onnx_bytes(std::string_view bytes, std::string_view origin, const OnnxImportOptions& options = {},
                          OnnxImportReport* report = nullptr);

// The scope of an ONNX node name, as the importer names the node's ops: the name up to its last
// '/', leading '/'s dropped. PyTorch ≥ 1.13 names nodes after the module that ran them, so
// "/layer1/layer1.0/conv1/Conv" gives "layer1/layer1.0/conv1" and its ops read
// "layer1/layer1.0/conv1/Conv2D". "" for a name without '/' (the importer then scopes the node by
// its whole name).
std::string onnx_node_scope(std::string_view node_name);
// The distinct non-empty onnx_node_scope()s of the nodes of the model at `path`, in node order
// (constant-folded nodes included). InputError naming the file when it cannot be read or parsed.
std::vector<std::string> onnx_node_scopes(const std::filesystem::path& path);

}  // namespace placelab::models
