// ONNX import: ModelProto → shape inference → TrainingGraphBuilder calls → training OpGraph.
// This file holds the public entry points; the Importer and ShapeFolder live under onnx/. Only this
// file and those under onnx/ include the ONNX and protobuf headers (slow to compile).
#include "placelab/models/onnx_import.h"

#include <limits>
#include <set>
#include <sstream>
#include <string_view>

#include "onnx/importer.h"
#include "placelab/core/error.h"
#include "placelab/core/files.h"

namespace placelab::models {

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
  return onnx_detail::Importer(file, model, options, r).run();
}

OpGraph import_onnx(const std::filesystem::path& path, const OnnxImportOptions& options, OnnxImportReport* report) {
  options.validate();
  return import_onnx_bytes(read_text_file(path), path.string(), options, report);
}

}  // namespace placelab::models
