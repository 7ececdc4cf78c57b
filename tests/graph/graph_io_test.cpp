#include "placelab/graph/io.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/core/json_locator.h"
#include "../core/temp_dir.h"

namespace placelab {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Helpers

// A graph document with op i on line 5 + i and edge j on line 7 + ops.size() + j.
std::string doc(const std::vector<std::string>& ops, const std::vector<std::string>& edges) {
  std::string s = "{\n  \"format\": \"placelab-graph\",\n  \"version\": 1,\n  \"ops\": [\n";
  for (std::size_t i = 0; i < ops.size(); ++i) s += "    " + ops[i] + (i + 1 < ops.size() ? ",\n" : "\n");
  s += "  ],\n  \"edges\": [\n";
  for (std::size_t i = 0; i < edges.size(); ++i) s += "    " + edges[i] + (i + 1 < edges.size() ? ",\n" : "\n");
  return s + "  ]\n}\n";
}

const std::vector<std::string> kAbc = {R"({"name": "a", "type": "MatMul"})", R"({"name": "b", "type": "Relu"})",
                                       R"({"name": "c", "type": "Relu"})"};

// Op `i` of kAbc replaced by `op`.
std::vector<std::string> abc_with(std::size_t i, std::string op) {
  auto ops = kAbc;
  ops[i] = std::move(op);
  return ops;
}

std::string graph_error(std::string_view text) {
  try {
    parse_graph_json(text, "g.json");
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError for:\n" << text;
  return "";
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

void expect_same_graph(const OpGraph& a, const OpGraph& b) {
  ASSERT_EQ(a.num_ops(), b.num_ops());
  ASSERT_EQ(a.num_edges(), b.num_edges());
  for (OpId id = 0; id < a.num_ops(); ++id) {
    const Op& x = a.op(id);
    const Op& y = b.op(id);
    SCOPED_TRACE("op " + x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.phase, y.phase);
    EXPECT_EQ(x.kernel, y.kernel);
    EXPECT_EQ(x.flops, y.flops);  // exact: numbers are written in a form that reads back exactly
    EXPECT_EQ(x.bytes_accessed, y.bytes_accessed);
    EXPECT_EQ(x.output_bytes, y.output_bytes);
    EXPECT_EQ(x.persistent_bytes, y.persistent_bytes);
    EXPECT_EQ(x.cpu_only, y.cpu_only);
    EXPECT_EQ(x.layer, y.layer);
    EXPECT_EQ(x.colocation, y.colocation);
    EXPECT_EQ(x.measured_s, y.measured_s);
    auto edges = [](const OpGraph& g, OpId v, bool out) {
      std::vector<std::tuple<OpId, int64_t, bool>> list;
      auto add = [&](OpId w, const Tensor& t) { list.emplace_back(w, t.bytes, t.control); };
      out ? g.for_each_out_edge(v, add) : g.for_each_in_edge(v, add);
      return list;
    };
    EXPECT_EQ(edges(a, id, true), edges(b, id, true));
    EXPECT_EQ(edges(a, id, false), edges(b, id, false));
  }
}

std::string written(const OpGraph& g, std::string_view name = {}) {
  std::ostringstream out;
  write_graph_json(g, out, name);
  return out.str();
}

using testing::slurp;

// A fresh directory for one test.
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("placelab_io_test_") {}
};

// ---------------------------------------------------------------------------------------------
// Reading graphs

TEST(GraphJson, ReadsOpsAndEdgesInFileOrderWithDefaults) {
  std::string name = "unset";
  OpGraph g = parse_graph_json(doc(kAbc, {R"({"src": "a", "dst": "b", "bytes": 8})", R"({"src": "b", "dst": "c"})",
                                          R"({"src": "a", "dst": "c", "control": true})"}),
                               "g.json", &name);
  EXPECT_EQ(name, "");
  ASSERT_EQ(g.num_ops(), 3u);
  ASSERT_EQ(g.num_edges(), 3u);
  const Op& a = g.op(0);
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.type, "MatMul");
  EXPECT_EQ(a.phase, Phase::kForward);
  EXPECT_EQ(a.kernel, KernelSignature::noop());
  EXPECT_EQ(a.flops, 0);
  EXPECT_EQ(a.bytes_accessed, 0);
  EXPECT_EQ(a.output_bytes, 0);
  EXPECT_EQ(a.persistent_bytes, 0);
  EXPECT_FALSE(a.cpu_only);
  EXPECT_EQ(a.layer, -1);
  EXPECT_EQ(a.colocation, "");
  std::vector<std::tuple<OpId, int64_t, bool>> out_a;
  g.for_each_out_edge(0, [&](OpId w, const Tensor& t) { out_a.emplace_back(w, t.bytes, t.control); });
  EXPECT_EQ(out_a, (std::vector<std::tuple<OpId, int64_t, bool>>{{1, 8, false}, {2, 0, true}}));
}

TEST(GraphJson, FlopsAndBytesDefaultToTheKernelsOwn) {
  OpGraph g = parse_graph_json(
      doc(abc_with(0, R"({"name": "a", "type": "MatMul", "kernel": {"class": "gemm", "m": 64, "n": 32, "k": 16, "batch": 2}})"), {}),
      "g.json");
  EXPECT_EQ(g.op(0).kernel, KernelSignature::gemm(64, 32, 16, 2));
  EXPECT_EQ(g.op(0).flops, 2.0 * 64 * 32 * 16 * 2);
  EXPECT_EQ(g.op(0).bytes_accessed, kernel_bytes(KernelSignature::gemm(64, 32, 16, 2)));
  // Given values win over the kernel's.
  OpGraph h = parse_graph_json(
      doc(abc_with(0, R"({"name": "a", "type": "MatMul", "kernel": {"class": "gemm", "m": 2, "n": 2, "k": 2, "batch": 1}, "flops": 1.5, "bytes_accessed": 7})"), {}),
      "g.json");
  EXPECT_EQ(h.op(0).flops, 1.5);
  EXPECT_EQ(h.op(0).bytes_accessed, 7);
}

TEST(GraphJson, ReadsEveryOpFieldAndTheGraphName) {
  std::string name;
  std::string text = R"({"format": "placelab-graph", "version": 1, "name": "toy", "ops": [
    {"name": "w", "type": "ApplyAdam", "phase": "update", "kernel": {"class": "elementwise", "elements": 10, "inputs": 4},
     "flops": 40, "bytes_accessed": 200, "output_bytes": 0, "persistent_bytes": 80, "cpu_only": true, "layer": 3, "colocation": "w"}]})";
  OpGraph g = parse_graph_json(text, "g.json", &name);
  EXPECT_EQ(name, "toy");
  const Op& w = g.op(0);
  EXPECT_EQ(w.phase, Phase::kUpdate);
  EXPECT_EQ(w.kernel, KernelSignature::elementwise(10, 4));
  EXPECT_EQ(w.flops, 40);
  EXPECT_EQ(w.bytes_accessed, 200);
  EXPECT_EQ(w.persistent_bytes, 80);
  EXPECT_TRUE(w.cpu_only);
  EXPECT_EQ(w.layer, 3);
  EXPECT_EQ(w.colocation, "w");
  EXPECT_EQ(g.num_edges(), 0u);  // "edges" is optional
}

TEST(GraphJson, AcceptsWholeNumbersWrittenWithAFraction) {
  OpGraph g = parse_graph_json(doc(abc_with(1, R"({"name": "b", "type": "Relu", "output_bytes": 4.0, "layer": 2e0})"), {}), "g.json");
  EXPECT_EQ(g.op(1).output_bytes, 4);
  EXPECT_EQ(g.op(1).layer, 2);
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "output_bytes": 4.5})"), {})),
            "g.json:6: /ops/1/output_bytes = 4.5: must be an integer");
}

TEST(GraphJsonErrors, MalformedJsonNamesTheLineAndColumn) {
  std::string e = graph_error("{\n  \"format\": \"placelab-graph\",\n  \"ops\": [tru]\n}");
  EXPECT_TRUE(contains(e, "g.json:3: malformed JSON (column 14): syntax error while parsing value")) << e;
  e = graph_error("{\n  \"ops\": [\n    {\"name\": \"a\",}\n  ]\n}");
  EXPECT_TRUE(contains(e, "g.json:3: malformed JSON (column 18): syntax error while parsing object key")) << e;
  e = graph_error("{\"ops\": [\n");
  EXPECT_TRUE(contains(e, "g.json:2: malformed JSON")) << e;
  EXPECT_TRUE(contains(e, "unexpected end of input")) << e;
  e = graph_error("");
  EXPECT_TRUE(contains(e, "g.json:1: malformed JSON (column 1)")) << e;
}

TEST(GraphJsonErrors, RepeatedKeysAreRejected) {
  EXPECT_EQ(graph_error(doc(abc_with(2, R"({"name": "c", "type": "Relu", "type": "Tanh"})"), {})),
            "g.json:7: /ops/2/type: repeated key: each key may appear once in an object");
}

TEST(GraphJsonErrors, DocumentHeaderIsChecked) {
  EXPECT_EQ(graph_error("[1, 2]"), "g.json:1: / = [1,2]: must be an object");
  EXPECT_EQ(graph_error("{\n\"format\": \"onnx\", \"version\": 1, \"ops\": []}"),
            "g.json:2: /format = \"onnx\": must be \"placelab-graph\" (this is not a placelab graph file)");
  EXPECT_EQ(graph_error("{\"format\": \"placelab-graph\",\n \"version\": 4, \"ops\": []}"),
            "g.json:2: /version = 4: must be 1, 2 or 3, the versions this placelab reads");
  EXPECT_EQ(graph_error("{\"format\": \"placelab-graph\", \"version\": 1}"), "g.json:1: /: missing required field \"ops\"");
  EXPECT_EQ(graph_error("{\"format\": \"placelab-graph\", \"version\": 1, \"ops\": {}}"),
            "g.json:1: /ops = {}: must be an array");
  EXPECT_EQ(graph_error("{\"format\": \"placelab-graph\", \"version\": 1, \"ops\": [],\n \"op_count\": 3}"),
            "g.json:2: /op_count = 3: unknown key; expected one of format, version, name, parameters, execution, ops, edges");
}

TEST(GraphJsonErrors, MissingAndUnknownOpFields) {
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b"})"), {})), "g.json:6: /ops/1: missing required field \"type\"");
  EXPECT_EQ(graph_error(doc(abc_with(2, R"({"name": "c", "type": "Relu", "flop": 5})"), {})),
            "g.json:7: /ops/2/flop = 5: unknown key of an op; expected one of name, type, phase, kernel, flops, "
            "bytes_accessed, output_bytes, persistent_bytes, cpu_only, layer, colocation, measured_s, module, call");
  EXPECT_EQ(graph_error(doc(abc_with(0, "7"), {})), "g.json:5: /ops/0 = 7: must be an object");
}

TEST(GraphJsonErrors, WrongTypes) {
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": 3, "type": "Relu"})"), {})), "g.json:6: /ops/1/name = 3: must be a string");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "", "type": "Relu"})"), {})), "g.json:6: /ops/1/name = \"\": must not be empty");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "cpu_only": "yes"})"), {})),
            "g.json:6: /ops/1/cpu_only = \"yes\": must be true or false");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "flops": "many"})"), {})),
            "g.json:6: /ops/1/flops = \"many\": must be a number");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "layer": true})"), {})),
            "g.json:6: /ops/1/layer = true: must be an integer");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "colocation": null})"), {})),
            "g.json:6: /ops/1/colocation = null: must be a string");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "kernel": "gemm"})"), {})),
            "g.json:6: /ops/1/kernel = \"gemm\": must be an object");
}

TEST(GraphJsonErrors, UnknownPhaseListsTheValidOnes) {
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "phase": "fwd"})"), {})),
            "g.json:6: /ops/1/phase = \"fwd\": unknown phase; valid phases are forward, backward, update, other");
}

TEST(GraphJsonErrors, KernelClassAndFieldsAreChecked) {
  EXPECT_EQ(graph_error(doc(abc_with(0, R"({"name": "a", "type": "MatMul", "kernel": {"class": "matmul"}})"), {})),
            "g.json:5: /ops/0/kernel/class = \"matmul\": unknown kernel class; valid classes are noop, gemm, conv2d, "
            "conv2d_backprop_input, conv2d_backprop_filter, elementwise, reduction, embedding, softmax, copy");
  EXPECT_EQ(graph_error(doc(abc_with(0, R"({"name": "a", "type": "MatMul", "kernel": {"m": 1}})"), {})),
            "g.json:5: /ops/0/kernel: missing required field \"class\"");
  EXPECT_EQ(graph_error(doc(abc_with(0, R"({"name": "a", "type": "MatMul", "kernel": {"class": "gemm", "m": 1, "n": 1, "k": 1}})"), {})),
            "g.json:5: /ops/0/kernel: missing required field \"batch\"");
  EXPECT_EQ(graph_error(doc(abc_with(0, R"({"name": "a", "type": "MatMul", "kernel": {"class": "softmax", "rows": 1, "cols": 2, "k": 1}})"), {})),
            "g.json:5: /ops/0/kernel/k = 1: unknown key of a softmax kernel; expected one of class, rows, cols");
  EXPECT_EQ(graph_error(doc(abc_with(0, R"({"name": "a", "type": "MatMul", "kernel": {"class": "copy", "bytes": -1}})"), {})),
            "g.json:5: /ops/0/kernel/bytes = -1: must be >= 0");
}

TEST(GraphJsonErrors, ParameterCountMustBeANonNegativeInteger) {
  EXPECT_EQ(graph_error(R"({"format": "placelab-graph", "version": 1,
  "parameters": -3, "ops": []})"),
            "g.json:2: /parameters = -3: must be >= 0");
  EXPECT_EQ(graph_error(R"({"format": "placelab-graph", "version": 1, "parameters": "many", "ops": []})"),
            "g.json:1: /parameters = \"many\": must be an integer");
}

TEST(GraphJsonErrors, NegativeAndAbsurdSizes) {
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "output_bytes": -4})"), {})),
            "g.json:6: /ops/1/output_bytes = -4: must be >= 0");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "persistent_bytes": 1125899906842625})"), {})),
            "g.json:6: /ops/1/persistent_bytes = 1125899906842625: must be <= 1125899906842624");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "persistent_bytes": 18446744073709551615})"), {})),
            "g.json:6: /ops/1/persistent_bytes = 18446744073709551615: must be <= 1125899906842624");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "flops": 1e400})"), {})),
            "g.json:6: /ops/1/flops = 1e400: must be finite");
  EXPECT_EQ(graph_error(doc(kAbc, {R"({"src": "a", "dst": "b", "bytes": -2e999})"})),
            "g.json:10: /edges/0/bytes = -2e999: must be finite");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "flops": -1})"), {})),
            "g.json:6: /ops/1/flops = -1: must be >= 0");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "flops": 2e18})"), {})),
            "g.json:6: /ops/1/flops = 2e+18: must be <= 1e18");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "bytes_accessed": 1e300})"), {})),
            "g.json:6: /ops/1/bytes_accessed = 1e+300: must be <= 1125899906842624 (2^50 bytes)");
  EXPECT_EQ(graph_error("{\"format\": \"placelab-graph\", \"version\": 9.3e18, \"ops\": []}"),
            "g.json:1: /version = 9.3e+18: must be <= 9223372036854775807");
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "Relu", "layer": -2})"), {})),
            "g.json:6: /ops/1/layer = -2: must be >= -1");
  // A kernel whose own flops are absurd is caught even when flops are not given.
  EXPECT_EQ(graph_error(doc(abc_with(1, R"({"name": "b", "type": "MatMul", "kernel": {"class": "gemm", "m": 1048576, "n": 1048576, "k": 1048576, "batch": 1}})"), {})),
            "g.json:6: /ops/1/kernel: implies 2305843009213693952 flops: must be <= 1e18");
}

TEST(GraphJsonErrors, DuplicateOpNamesPointAtBothOps) {
  EXPECT_EQ(graph_error(doc(abc_with(2, R"({"name": "a", "type": "Relu"})"), {})),
            "g.json:7: /ops/2/name = \"a\": duplicate op name; first used by /ops/0/name (line 5)");
}

TEST(GraphJsonErrors, EdgesMustNameKnownOps) {
  EXPECT_EQ(graph_error(doc(kAbc, {R"({"src": "a", "dst": "b"})", R"({"src": "b", "dst": "relu_9"})"})),
            "g.json:11: /edges/1/dst = \"relu_9\": unknown op: no op in /ops has this name");
  EXPECT_EQ(graph_error(doc(kAbc, {R"({"src": "x", "dst": "b"})"})),
            "g.json:10: /edges/0/src = \"x\": unknown op: no op in /ops has this name");
  EXPECT_EQ(graph_error(doc(kAbc, {R"({"src": "a"})"})), "g.json:10: /edges/0: missing required field \"dst\"");
  EXPECT_EQ(graph_error(doc(kAbc, {R"({"src": "a", "dst": "b", "size": 4})"})),
            "g.json:10: /edges/0/size = 4: unknown key of an edge; expected one of src, dst, bytes, control");
  EXPECT_EQ(graph_error(doc(kAbc, {R"({"src": "a", "dst": "a"})"})),
            "g.json:10: /edges/0/dst = \"a\": an edge cannot connect an op to itself");
  EXPECT_EQ(graph_error(doc(kAbc, {R"({"src": "a", "dst": "b", "bytes": -8})"})),
            "g.json:10: /edges/0/bytes = -8: must be >= 0");
  EXPECT_EQ(graph_error(doc(kAbc, {R"({"src": "a", "dst": "b", "bytes": 8, "control": true})"})),
            "g.json:10: /edges/0/bytes = 8: must be 0 on a control edge (control edges carry no data)");
}

TEST(GraphJsonErrors, CyclesNameTheirOpsAndTheClosingEdge) {
  EXPECT_EQ(graph_error(doc(kAbc, {R"({"src": "a", "dst": "b"})", R"({"src": "b", "dst": "c"})",
                                   R"({"src": "c", "dst": "b"})"})),
            "g.json:12: /edges/2: the op graph has a cycle: b -> c (this edge, c -> b, closes it)");
  EXPECT_EQ(graph_error(doc(kAbc, {R"({"src": "c", "dst": "a", "control": true})", R"({"src": "a", "dst": "b"})",
                                   R"({"src": "b", "dst": "c"})"})),
            "g.json:10: /edges/0: the op graph has a cycle: a -> b -> c (this edge, c -> a, closes it)");
}

TEST(GraphJsonErrors, UnreadableFileNamesThePath) {
  try {
    read_graph_json("/nonexistent/dir/g.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/dir/g.json: cannot read: No such file or directory");
  }
}

// ---------------------------------------------------------------------------------------------
// Writing graphs

OpGraph everything_graph() {
  OpGraph g;
  // One op per kernel class, with distinct dimensions, every phase, odd strings and fractions.
  const Phase phases[] = {Phase::kForward, Phase::kBackward, Phase::kUpdate, Phase::kOther};
  for (int c = 0; c < kNumKernelClasses; ++c) {
    KernelSignature sig{static_cast<KernelClass>(c), {}};
    for (std::size_t i = 0; i < kernel_fields(sig.cls).size(); ++i) sig.dims[i] = 3 + c * 10 + static_cast<int64_t>(i);
    // Strings built with a stream: gcc 12 gives a false -Wrestrict on "x" + std::to_string(c) here.
    auto str = [](const auto&... parts) {
      std::ostringstream s;
      (s << ... << parts);
      return s.str();
    };
    Op op{.name = str("op", c, c == 1 ? "/with \"quotes\" \\ and\nnewline" : ""),
          .type = c == 2 ? "Conv2D\u00e9\u65e5" : str("T", c),
          .phase = phases[c % 4],
          .kernel = sig,
          .flops = c == 3 ? 0.1 : c == 4 ? 1e17 : kernel_flops(sig) + 0.5,
          .bytes_accessed = c == 5 ? 123.456 : kernel_bytes(sig),
          .output_bytes = c * 1000,
          .persistent_bytes = c == 6 ? kMaxGraphBytes : 0,
          .cpu_only = c % 3 == 0,
          .layer = c - 1,
          .colocation = c % 2 ? str("group/", c / 2) : ""};
    g.add_op(std::move(op));
  }
  // Edges inserted out of source order, parallel and control edges.
  g.add_edge(5, 7, {.bytes = 40});
  g.add_edge(0, 7, {.bytes = 1});
  g.add_edge(0, 1, {.bytes = 2});
  g.add_edge(0, 1, {.bytes = 3});
  g.add_edge(2, 9, {.control = true});
  g.add_edge(1, 9, {.bytes = kMaxGraphBytes});
  g.add_edge(3, 4, {});
  return g;
}

TEST(GraphJsonWrite, RoundTripGivesAnIdenticalGraph) {
  OpGraph g = everything_graph();
  std::string text = written(g, "every \"thing\"");
  std::string name;
  OpGraph back = parse_graph_json(text, "written", &name);
  EXPECT_EQ(name, "every \"thing\"");
  expect_same_graph(g, back);
  // Edges come back in insertion order, not grouped by source.
  std::vector<std::pair<OpId, OpId>> order;
  for (auto [it, end] = boost::edges(back.adjacency()); it != end; ++it)
    order.emplace_back(static_cast<OpId>(boost::source(*it, back.adjacency())),
                       static_cast<OpId>(boost::target(*it, back.adjacency())));
  EXPECT_EQ(order, (std::vector<std::pair<OpId, OpId>>{{5, 7}, {0, 7}, {0, 1}, {0, 1}, {2, 9}, {1, 9}, {3, 4}}));
  // Deterministic: the same graph gives the same bytes, also after a round trip.
  EXPECT_EQ(written(back, name), text);
  EXPECT_EQ(written(everything_graph(), name), text);
  // The optional parameter count: absent reads as -1, written only when known.
  int64_t parameters = 0;
  parse_graph_json(text, "written", nullptr, &parameters);
  EXPECT_EQ(parameters, -1);
  EXPECT_EQ(text.find("\"parameters\""), std::string::npos);
  std::ostringstream with;
  write_graph_json(g, with, name, 25'557'032);
  expect_same_graph(g, parse_graph_json(with.str(), "with", nullptr, &parameters));
  EXPECT_EQ(parameters, 25'557'032);
}

TEST(GraphJsonWrite, WritesOneOpPerLineWithEveryField) {
  OpGraph g;
  g.add_op({.name = "a", .type = "MatMul", .kernel = KernelSignature::gemm(2, 3, 4), .flops = 48, .output_bytes = 24});
  g.add_op({.name = "b", .type = "Relu", .phase = Phase::kBackward});
  g.add_edge(0, 1, {.bytes = 24});
  EXPECT_EQ(written(g, "two"),
            "{\n"
            "  \"format\": \"placelab-graph\",\n"
            "  \"version\": 1,\n"
            "  \"name\": \"two\",\n"
            "  \"ops\": [\n"
            "    {\"name\": \"a\", \"type\": \"MatMul\", \"phase\": \"forward\", \"kernel\": {\"class\": \"gemm\", \"m\": 2, "
            "\"n\": 3, \"k\": 4, \"batch\": 1}, \"flops\": 48, \"bytes_accessed\": 0, \"output_bytes\": 24, "
            "\"persistent_bytes\": 0, \"cpu_only\": false, \"layer\": -1, \"colocation\": \"\"},\n"
            "    {\"name\": \"b\", \"type\": \"Relu\", \"phase\": \"backward\", \"kernel\": {\"class\": \"noop\"}, \"flops\": 0, "
            "\"bytes_accessed\": 0, \"output_bytes\": 0, \"persistent_bytes\": 0, \"cpu_only\": false, \"layer\": -1, "
            "\"colocation\": \"\"}\n"
            "  ],\n"
            "  \"edges\": [\n"
            "    {\"src\": \"a\", \"dst\": \"b\", \"bytes\": 24, \"control\": false}\n"
            "  ]\n"
            "}\n");
}

// A version-2 document with op "a" on line 5 and op "b" on line 6 carrying `measured` as its
// measured_s.
std::string measured_doc(const std::string& measured, int version = 2) {
  return "{\n  \"format\": \"placelab-graph\",\n  \"version\": " + std::to_string(version) +
         ",\n  \"ops\": [\n    {\"name\": \"a\", \"type\": \"MatMul\"},\n    {\"name\": \"b\", \"type\": \"NoOp\", "
         "\"measured_s\": " + measured + "}\n  ]\n}\n";
}

TEST(GraphJsonMeasured, ReadsMeasuredTimesSortedByKey) {
  OpGraph g = parse_graph_json(measured_doc(R"({"gpu:1": 0.0011, "gpu": 0.0012, "cpu": 4e-3, "node0/gpu:0": 0})"), "m.json");
  EXPECT_TRUE(g.op(0).measured_s.empty());
  EXPECT_EQ(g.op(1).measured_s, (std::vector<MeasuredTime>{{"cpu", 4e-3}, {"gpu", 0.0012}, {"gpu:1", 0.0011},
                                                           {"node0/gpu:0", 0}}));
}

TEST(GraphJsonMeasured, RoundTripsAndWritesVersion2OnlyWhenUsed) {
  OpGraph g = parse_graph_json(measured_doc(R"({"gpu": 0.0012, "gpu:1": 1.1e-3})"), "m.json");
  std::string text = written(g, "m");
  EXPECT_NE(text.find("\"version\": 2,"), std::string::npos);
  EXPECT_NE(text.find("\"colocation\": \"\", \"measured_s\": {\"gpu\": 0.0012, \"gpu:1\": 0.0011}}"), std::string::npos)
      << text;
  // Ops without measured times write no measured_s key.
  EXPECT_EQ(text.find("measured_s"), text.rfind("measured_s"));
  OpGraph back = parse_graph_json(text, "written");
  expect_same_graph(g, back);
  EXPECT_EQ(written(back, "m"), text);
  // Without measured times the file stays version 1, readable by older readers.
  g.op(1).measured_s.clear();
  EXPECT_NE(written(g, "m").find("\"version\": 1,"), std::string::npos);
}

TEST(GraphJsonMeasured, ErrorsNameTheOpKeyAndRule) {
  EXPECT_EQ(graph_error(measured_doc(R"({"gpu": 0.001})", 1)),
            "g.json:6: /ops/1/measured_s: needs \"version\": 2 (version 1 files have no measured times)");
  EXPECT_EQ(graph_error(measured_doc("[0.001]")), "g.json:6: /ops/1/measured_s = [0.001]: must be an object");
  EXPECT_EQ(graph_error(measured_doc(R"({"gpu": -0.5})")), "g.json:6: /ops/1/measured_s/gpu = -0.5: must be >= 0");
  EXPECT_EQ(graph_error(measured_doc(R"({"gpu": "1ms"})")),
            "g.json:6: /ops/1/measured_s/gpu = \"1ms\": must be a number (seconds)");
  EXPECT_EQ(graph_error(measured_doc(R"({"gpu": 1e400})")), "g.json:6: /ops/1/measured_s/gpu = 1e400: must be finite");
  EXPECT_EQ(graph_error(measured_doc(R"({"gpu": 90000})")),
            "g.json:6: /ops/1/measured_s/gpu = 90000: must be <= 86400 (one day, in seconds)");
  EXPECT_EQ(graph_error(measured_doc(R"({"": 1})")),
            "g.json:6: /ops/1/measured_s/: device key \"\": must not be empty; use a device kind (cpu, gpu) or a "
            "device name of the machine");
  EXPECT_EQ(graph_error(measured_doc(R"({"gpu 0": 1})")),
            "g.json:6: /ops/1/measured_s/gpu 0: device key \"gpu 0\": must be a device kind (cpu, gpu) or a device "
            "name, without whitespace or control characters");
  EXPECT_EQ(graph_error(measured_doc(R"({"gpu": 1, "gpu": 2})")),
            "g.json:6: /ops/1/measured_s/gpu: repeated key: each key may appear once in an object");
}

TEST(GraphJsonMeasured, CanonicalMeasuredTimesSortAndCheck) {
  EXPECT_EQ(canonical_measured_times({{"gpu:1", 2}, {"cpu", 1}}, "x"),
            (std::vector<MeasuredTime>{{"cpu", 1}, {"gpu:1", 2}}));
  auto error = [](std::vector<MeasuredTime> t) {
    try {
      canonical_measured_times(std::move(t), "x");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({{"gpu", std::nan("")}}), "op \"x\": measured time for device key \"gpu\" = nan: must be finite");
  EXPECT_EQ(error({{"gpu", -1}}), "op \"x\": measured time for device key \"gpu\" = -1: must be >= 0");
  EXPECT_EQ(error({{"gpu", 1}, {"gpu", 2}}),
            "op \"x\": measured time for device key \"gpu\": repeated key: each device key may appear once");
  EXPECT_EQ(measured_time_problem(0), "");
  EXPECT_EQ(measured_key_problem("cpu"), "");
}

// Version 3: a PyTorch graph's execution and each op's module path and call round-trip; the file
// is version 3 only when the graph has them; an eager graph's edges follow its op order.
TEST(GraphJsonEager, RoundTripsModulesAndExecutionAndChecksProgramOrder) {
  const std::string doc = R"({"format": "placelab-graph", "version": 3, "execution": "eager", "ops": [
  {"name": "conv", "type": "Conv2D", "module": "layer1.0.conv1"},
  {"name": "relu", "type": "Relu", "module": "layer1.0.relu", "call": 1}],
  "edges": [{"src": "conv", "dst": "relu", "bytes": 4}]})";
  OpGraph g = parse_graph_json(doc, "e.json");
  EXPECT_EQ(g.execution(), Execution::kEager);
  EXPECT_EQ(g.op(0).module, "layer1.0.conv1");
  EXPECT_EQ(g.op(0).call, 0);
  EXPECT_EQ(g.op(1).call, 1);
  const std::string text = written(g, "e");
  EXPECT_TRUE(contains(text, "\"version\": 3,")) << text;
  EXPECT_TRUE(contains(text, "\"execution\": \"eager\"")) << text;
  OpGraph back = parse_graph_json(text, "written");
  EXPECT_EQ(back.execution(), Execution::kEager);
  EXPECT_EQ(back.op(1).module, "layer1.0.relu");
  EXPECT_EQ(written(back, "e"), text);

  std::string wrong = doc;
  const std::string forward_edge = R"("src": "conv", "dst": "relu")";
  wrong.replace(wrong.find(forward_edge), forward_edge.size(), R"("src": "relu", "dst": "conv")");
  EXPECT_EQ(graph_error(wrong), "g.json:4: /edges/0/dst = \"conv\": comes before its producer in /ops; an \"eager\" graph "
                                "lists its ops in program order");
  std::string v2 = doc;
  v2.replace(v2.find("\"version\": 3"), 12, "\"version\": 2");
  EXPECT_EQ(graph_error(v2), "g.json:1: /execution: needs \"version\": 3 (execution came with version 3)");
  std::string bad = doc;
  bad.replace(bad.find("\"eager\""), 7, "\"lazy\"");
  EXPECT_EQ(graph_error(bad), "g.json:1: /execution = \"lazy\": must be \"dataflow\" (TensorFlow 1.x) or \"eager\" (PyTorch)");
  EXPECT_TRUE(contains(graph_error(R"({"format": "placelab-graph", "version": 2, "ops": [
    {"name": "a", "type": "Relu", "module": "x"}]})"), "/ops/0/module: needs \"version\": 3"));
}

// An empty graph can be written (it is well-formed JSON), but no command can place or time it, so
// reading one back is the user's error, not a step of 0 s or a division by zero further on.
TEST(GraphJsonWrite, EmptyGraphIsWrittenButRefusedOnRead) {
  OpGraph empty;
  std::string text = written(empty);
  EXPECT_EQ(text, "{\n  \"format\": \"placelab-graph\",\n  \"version\": 1,\n  \"name\": \"\",\n  \"ops\": [],\n  \"edges\": []\n}\n");
  EXPECT_THROW(parse_graph_json(text, "empty"), InputError);
}

TEST(GraphJsonWrite, RefusesValuesJsonCannotCarry) {
  OpGraph g;
  g.add_op({.name = "a", .type = "T", .flops = std::nan("")});
  EXPECT_THROW(written(g), Error);
  OpGraph h;
  h.add_op({.name = std::string("bad\xff"), .type = "T"});
  try {
    written(h);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot write op 0 name: it is not valid UTF-8");
  }
}

// ---------------------------------------------------------------------------------------------
// Placements

const std::vector<std::string> kDevices = {"cpu:0", "gpu:0", "gpu:1"};

OpGraph placement_graph() {
  OpGraph g;
  for (const char* n : {"a", "b/x", "c"}) g.add_op({.name = n, .type = "T"});
  g.add_edge(0, 1);
  g.add_edge(1, 2);
  return g;
}

std::string placement_error(std::string_view text) {
  try {
    parse_placement_json(text, "p.json", placement_graph(), kDevices);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError for:\n" << text;
  return "";
}

TEST(PlacementJson, ReadsTheMapForm) {
  Placement p = parse_placement_json(R"({"placement": {"c": "gpu:0", "a": "cpu:0", "b/x": "gpu:1"}})", "p.json",
                                     placement_graph(), kDevices);
  EXPECT_EQ(p, (Placement{0, 2, 1}));
}

TEST(PlacementJson, ReadsTheListForm) {
  Placement p = parse_placement_json(R"({"format": "placelab-placement", "version": 1, "devices": ["gpu:1", "gpu:1", "cpu:0"]})",
                                     "p.json", placement_graph(), kDevices);
  EXPECT_EQ(p, (Placement{2, 2, 0}));
}

TEST(PlacementJson, ErrorsNameTheOpOrDeviceAtFault) {
  EXPECT_EQ(placement_error("{\"placement\": {\"a\": \"cpu:0\",\n \"b/x\": \"gpu:0\", \"c\": \"gpu:0\", \"d\": \"gpu:0\"}}"),
            "p.json:2: /placement/d = \"gpu:0\": unknown op \"d\": the graph has no op of this name");
  EXPECT_EQ(placement_error("{\"placement\": {\"a\": \"cpu:0\",\n \"b/x\": \"tpu:0\", \"c\": \"gpu:0\"}}"),
            "p.json:2: /placement/b~1x = \"tpu:0\": unknown device for op \"b/x\"; valid devices are cpu:0, gpu:0, gpu:1");
  EXPECT_EQ(placement_error("{\"placement\": {\"a\": 1, \"b/x\": \"gpu:0\", \"c\": \"gpu:0\"}}"),
            "p.json:1: /placement/a = 1: must be a string");
  EXPECT_EQ(placement_error("{\n\"placement\": {\"b/x\": \"gpu:0\"}}"),
            "p.json:2: /placement: op \"a\", \"c\" are missing (2 in all): the placement must name every op of the graph");
  EXPECT_EQ(placement_error("{\n\"placement\": {\"a\": \"gpu:0\", \"b/x\": \"gpu:0\"}}"),
            "p.json:2: /placement: op \"c\" is missing (1 in all): the placement must name every op of the graph");
  EXPECT_EQ(placement_error("{\"devices\": [\"gpu:0\",\n \"gpu:7\", \"gpu:0\"]}"),
            "p.json:2: /devices/1 = \"gpu:7\": unknown device for op \"b/x\"; valid devices are cpu:0, gpu:0, gpu:1");
  EXPECT_EQ(placement_error("{\"devices\": [\"gpu:0\"]}"),
            "p.json:1: /devices: has 1 entries: must have one per op (3), in op-id order");
  EXPECT_EQ(placement_error("{\"placement\": {},\n \"devices\": []}"),
            "p.json:2: /devices: a placement file has \"placement\" or \"devices\", not both");
  EXPECT_EQ(placement_error("{}"),
            "p.json:1: /: missing \"placement\" (op name -> device name) or \"devices\" (device names in op-id order)");
  EXPECT_EQ(placement_error("{\"placment\": {}}"),
            "p.json:1: /placment = {}: unknown key; expected one of format, version, placement, devices");
  EXPECT_EQ(placement_error("{\"format\": \"placelab-graph\", \"devices\": []}"),
            "p.json:1: /format = \"placelab-graph\": must be \"placelab-placement\" (this is not a placelab placement file)");
  EXPECT_EQ(placement_error("{\"placement\": {\"a\": \"cpu:0\", \"a\": \"gpu:0\"}}"),
            "p.json:1: /placement/a: repeated key: each key may appear once in an object");
}

TEST(PlacementJson, WrittenPlacementReadsBack) {
  OpGraph g = placement_graph();
  Placement p{1, 0, 2};
  std::ostringstream out;
  write_placement_json(g, p, kDevices, out);
  EXPECT_EQ(out.str(),
            "{\n  \"format\": \"placelab-placement\",\n  \"version\": 1,\n  \"placement\": {\n"
            "    \"a\": \"gpu:0\",\n    \"b/x\": \"cpu:0\",\n    \"c\": \"gpu:1\"\n  }\n}\n");
  EXPECT_EQ(parse_placement_json(out.str(), "written", g, kDevices), p);
  std::ostringstream bad;
  EXPECT_THROW(write_placement_json(g, Placement{1, 0, 3}, kDevices, bad), InputError);
  EXPECT_THROW(write_placement_json(g, Placement{1, 0}, kDevices, bad), InputError);
}

TEST(PlacementJson, ReadsFromAFile) {
  TempDir dir;
  write_file_atomically(dir.path / "p.json", R"({"devices": ["cpu:0", "gpu:0", "gpu:1"]})");
  EXPECT_EQ(read_placement_json(dir.path / "p.json", placement_graph(), kDevices), (Placement{0, 1, 2}));
  try {
    read_placement_json(dir.path / "missing.json", placement_graph(), kDevices);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "missing.json: cannot read: No such file or directory")) << e.what();
  }
}

// A graph file that is a FIFO nobody writes to is refused at once, never waited on (read_text_file).
TEST(ReadGraphJson, RefusesAFifo) {
  TempDir dir;
  const fs::path fifo = dir.path / "graph.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(read_graph_json(fifo), InputError);
}

TEST(ReadGraphJson, AGraphOfNoOpsIsAnInputError) {
  try {
    parse_graph_json(R"({"format": "placelab-graph", "version": 1, "ops": [], "edges": []})", "empty.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "empty.json:1: /ops: a graph needs at least one op");
  }
}

// ---------------------------------------------------------------------------------------------
// The example graphs in scenarios/graphs/

const fs::path kGraphs = fs::path(PLACELAB_SOURCE_DIR) / "scenarios" / "graphs";

// Ops reachable from `from` along edges.
std::vector<bool> reachable(const OpGraph& g, OpId from) {
  std::vector<bool> seen(g.num_ops(), false);
  std::vector<OpId> unvisited{from};
  seen[from] = true;
  while (!unvisited.empty()) {
    OpId v = unvisited.back();
    unvisited.pop_back();
    g.for_each_out_edge(v, [&](OpId w, const Tensor&) {
      if (!seen[w]) unvisited.push_back(w), seen[w] = true;
    });
  }
  return seen;
}

TEST(ExampleGraphs, QuickstartIsValidCanonicalAndConsistentWithItsKernels) {
  std::string name;
  OpGraph g = read_graph_json(kGraphs / "quickstart.json", &name);
  EXPECT_EQ(name, "quickstart");
  EXPECT_GE(g.num_ops(), 30u);
  EXPECT_LE(g.num_ops(), 80u);
  // The committed file is exactly what write_graph_json prints for it.
  EXPECT_EQ(written(g, name), slurp(kGraphs / "quickstart.json"));
  int cpu_only = 0, adam = 0;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op& op = g.op(id);
    SCOPED_TRACE(op.name);
    EXPECT_EQ(op.flops, kernel_flops(op.kernel));
    EXPECT_EQ(op.bytes_accessed, kernel_bytes(op.kernel));
    // Every data edge carries at most what its producer outputs (variables hand out their weights).
    g.for_each_out_edge(id, [&](OpId, const Tensor& t) {
      EXPECT_LE(t.bytes, std::max(op.output_bytes, op.persistent_bytes));
    });
    cpu_only += op.cpu_only;
    if (op.type == "ApplyAdam") {
      ++adam;
      EXPECT_EQ(op.phase, Phase::kUpdate);
      EXPECT_GT(op.persistent_bytes, 0);
      EXPECT_FALSE(op.colocation.empty());
    }
  }
  EXPECT_EQ(cpu_only, 1);
  EXPECT_EQ(adam, 10);
  EXPECT_NO_THROW(g.topological_order());
}

TEST(ExampleGraphs, QuickstartTowersCanRunInParallel) {
  OpGraph g = read_graph_json(kGraphs / "quickstart.json");
  for (const char* fwd : {"/fc1/MatMul", "/fc2/Relu"}) {
    OpId a = *g.find(std::string("tower_a") + fwd);
    OpId b = *g.find(std::string("tower_b") + fwd);
    EXPECT_FALSE(reachable(g, a)[b]) << fwd;
    EXPECT_FALSE(reachable(g, b)[a]) << fwd;
  }
  // Both towers meet at the head, so the step needs both.
  OpId concat = *g.find("head/concat");
  EXPECT_TRUE(reachable(g, *g.find("tower_a/fc1/MatMul"))[concat]);
  EXPECT_TRUE(reachable(g, *g.find("tower_b/fc1/MatMul"))[concat]);
}

TEST(ExampleGraphs, TheGraphExampleInDocsFormatsReads) {
  // The first ```json block of docs/formats.md is its graph example; keep it valid.
  std::string md = slurp(fs::path(PLACELAB_SOURCE_DIR) / "docs" / "formats.md");
  std::size_t start = md.find("```json\n");
  ASSERT_NE(start, std::string::npos);
  start += 8;
  std::string example = md.substr(start, md.find("```", start) - start);
  std::string name;
  OpGraph g = parse_graph_json(example, "docs/formats.md", &name);
  EXPECT_EQ(name, "tiny-mlp");
  EXPECT_EQ(g.num_ops(), 6u);
  EXPECT_EQ(g.op(*g.find("fc/W/ApplyAdam")).colocation, "fc/W");
}

TEST(ExampleGraphs, MinimalUsesTheDefaults) {
  OpGraph g = read_graph_json(kGraphs / "minimal.json");
  ASSERT_EQ(g.num_ops(), 3u);
  EXPECT_TRUE(g.op(0).cpu_only);
  EXPECT_EQ(g.op(1).flops, 2.0 * 64 * 1024 * 1024);
  EXPECT_EQ(g.op(2).phase, Phase::kForward);
  EXPECT_EQ(g.num_edges(), 2u);
}

}  // namespace
}  // namespace placelab
