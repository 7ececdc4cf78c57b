#include "placelab/graph/io.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/core/json_locator.h"
#include "placelab/core/keys.h"
#include "placelab/core/numbers.h"

namespace placelab {
namespace {

using nlohmann::json;

constexpr std::string_view kGraphFormat = "placelab-graph";
constexpr std::string_view kPlacementFormat = "placelab-placement";
constexpr int64_t kFormatVersion = 1;
// Graph files: version 2 adds the op field "measured_s"; version 1 files still load.
constexpr int64_t kGraphVersionMeasured = 2;
// Version 3 adds the top-level "execution" and the op fields "module" and "call" (PyTorch graphs).
constexpr int64_t kGraphVersionEager = 3;


// A value as it appears in a message: compact JSON, cut at 60 bytes (excerpt).
std::string show(const json& v) { return excerpt(v.dump(-1, ' ', false, json::error_handler_t::replace)); }

std::string quote_name(std::string_view s) { return show(json(std::string(s))); }

// A SAX handler that accepts every value and keeps the first error nlohmann reports, with the
// byte position that json::parse's exceptions do not always carry.
struct ErrorPosition : json::json_sax_t {
  std::size_t position = 0;
  int id = 0;
  std::string token;
  std::string message;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t pos, const std::string& last_token, const nlohmann::detail::exception& e) override {
    position = pos;
    id = e.id;
    token = last_token;
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: ".
    message = e.what();
    std::size_t colon = message.find(": ", message.find("parse error"));
    if (message.find("parse error") != std::string::npos && colon != std::string::npos)
      message = message.substr(colon + 2);
    else if (message.find("] ") != std::string::npos)
      message = message.substr(message.find("] ") + 2);
    return false;
  }
};

// The context of one file being read: turns "pointer, rule" into "origin:line: pointer ...: rule".
class Reader {
 public:
  Reader(std::string_view text, std::string_view origin) : text_(text), origin_(origin), where_(text) {}

  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const {
    throw InputError(std::string(origin_) + ":" + std::to_string(where_.line_of(pointer)) + ": " +
                     (pointer.empty() ? "/" : pointer) + ": " + message);
  }
  [[noreturn]] void fail_value(const std::string& pointer, const json& value, const std::string& rule) const {
    throw InputError(std::string(origin_) + ":" + std::to_string(where_.line_of(pointer)) + ": " +
                     (pointer.empty() ? "/" : pointer) + " = " + show(value) + ": " + rule);
  }

  // Parses the text; malformed JSON and repeated keys are InputErrors with the line.
  json parse() const {
    if (auto byte = where_.first_byte_deeper_than(kMaxJsonDepth))
      throw InputError(std::string(origin_) + ":" + std::to_string(where_.line_of_byte(*byte)) + ": nested deeper than " +
                       std::to_string(kMaxJsonDepth) + " levels");
    json doc;
    try {
      doc = json::parse(text_);
    } catch (const json::exception& e) {
      // Only parse_error carries a position; a number too large for a double (out_of_range 406)
      // does not. Parsing again with a SAX handler that accepts everything recovers the position
      // nlohmann reports to handlers for every kind of error.
      ErrorPosition at;
      json::sax_parse(text_, &at);
      if (at.message.empty()) at.message = e.what();
      std::size_t byte = at.position > 0 ? at.position - 1 : 0;  // position counts bytes read
      if (at.id == 406) {
        // The token is complete and valid JSON, just not a finite double: report it as a value.
        std::string pointer = where_.pointer_at_byte(byte);
        throw InputError(std::string(origin_) + ":" + std::to_string(where_.line_of(pointer)) + ": " +
                         (pointer.empty() ? "/" : pointer) + " = " + at.token + ": must be finite");
      }
      throw InputError(std::string(origin_) + ":" + std::to_string(where_.line_of_byte(byte)) +
                       ": malformed JSON (column " + std::to_string(where_.column_of_byte(byte)) + "): " + at.message);
    }
    if (auto dup = where_.find_duplicate_key())
      throw InputError(std::string(origin_) + ":" + std::to_string(dup->line) + ": " + dup->pointer +
                       ": repeated key: each key may appear once in an object");
    return doc;
  }

  const json& object(const json& v, const std::string& pointer) const {
    if (!v.is_object()) fail_value(pointer, v, "must be an object");
    return v;
  }
  const json& array(const json& v, const std::string& pointer) const {
    if (!v.is_array()) fail_value(pointer, v, "must be an array");
    return v;
  }

  // Rejects keys of `obj` outside `allowed`, naming the first unknown one and the valid ones.
  void check_keys(const json& obj, const std::string& pointer, std::span<const std::string_view> allowed,
                  std::string_view what) const {
    for (const auto& [key, value] : obj.items()) {
      bool known = false;
      for (std::string_view a : allowed) known = known || a == key;
      if (!known)
        fail_value(pointer + "/" + json_pointer_token(key), value,
                   unknown_key_rule(join_names(allowed), what));
    }
  }

  // The member `key` of `obj`, or null when absent.
  static const json* member(const json& obj, std::string_view key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  const json& required(const json& obj, const std::string& pointer, std::string_view key) const {
    const json* v = member(obj, key);
    if (!v) fail(pointer, "missing required field \"" + std::string(key) + "\"");
    return *v;
  }

  std::string string(const json& v, const std::string& pointer, bool non_empty) const {
    if (!v.is_string()) fail_value(pointer, v, "must be a string");
    if (non_empty && v.get_ref<const std::string&>().empty()) fail_value(pointer, v, "must not be empty");
    return v.get<std::string>();
  }
  bool boolean(const json& v, const std::string& pointer) const {
    if (!v.is_boolean()) fail_value(pointer, v, "must be true or false");
    return v.get<bool>();
  }
  // An integer in [lo, hi]; a number written with a fraction or exponent is accepted when its
  // value is whole (JSON writers of other languages print 4.0).
  int64_t integer(const json& v, const std::string& pointer, int64_t lo, int64_t hi) const {
    if (!v.is_number()) fail_value(pointer, v, "must be an integer");
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) fail_value(pointer, v, "must be <= " + std::to_string(hi));
      return check_low(static_cast<int64_t>(u), v, pointer, lo);
    }
    if (v.is_number_integer()) {
      int64_t i = v.get<int64_t>();
      if (i > hi) fail_value(pointer, v, "must be <= " + std::to_string(hi));
      return check_low(i, v, pointer, lo);
    }
    double d = v.get<double>();
    if (!std::isfinite(d)) fail_value(pointer, v, "must be finite");
    if (d != std::floor(d)) fail_value(pointer, v, "must be an integer");
    if (d < static_cast<double>(lo)) fail_value(pointer, v, "must be >= " + std::to_string(lo));
    // 2^63 itself rounds to double(INT64_MAX) and would overflow the cast.
    if (d > static_cast<double>(hi) || d >= 0x1p63) fail_value(pointer, v, "must be <= " + std::to_string(hi));
    return static_cast<int64_t>(d);
  }
  // A finite number in [0, hi]; `hi_text` spells hi in the message.
  double number(const json& v, const std::string& pointer, double hi, const std::string& hi_text) const {
    if (!v.is_number()) fail_value(pointer, v, "must be a number");
    double d = v.get<double>();
    if (!std::isfinite(d)) fail_value(pointer, v, "must be finite");
    if (d < 0) fail_value(pointer, v, "must be >= 0");
    if (d > hi) fail_value(pointer, v, "must be <= " + hi_text);
    return d;
  }
  int64_t bytes(const json& v, const std::string& pointer) const { return integer(v, pointer, 0, kMaxGraphBytes); }

  // 1-based line of the value at `pointer`, for messages that mention a second place.
  int line_of(const std::string& pointer) const { return where_.line_of(pointer); }

 private:
  int64_t check_low(int64_t i, const json& v, const std::string& pointer, int64_t lo) const {
    if (i < lo) fail_value(pointer, v, "must be >= " + std::to_string(lo));
    return i;
  }

  std::string_view text_;
  std::string_view origin_;
  JsonLocator where_;
};

const std::string kMaxBytesText = std::to_string(kMaxGraphBytes) + " (2^50 bytes)";

std::string valid_kernel_classes() {
  std::string out;
  for (int i = 0; i < kNumKernelClasses; ++i) {
    if (i) out += ", ";
    out += kernel_class_name(static_cast<KernelClass>(i));
  }
  return out;
}

KernelSignature read_kernel(const Reader& r, const json& v, const std::string& p) {
  r.object(v, p);
  std::string name = r.string(r.required(v, p, "class"), p + "/class", false);
  auto cls = kernel_class_from_name(name);
  if (!cls) r.fail_value(p + "/class", v["class"], "unknown kernel class; valid classes are " + valid_kernel_classes());
  auto fields = kernel_fields(*cls);
  std::vector<std::string_view> allowed{"class"};
  allowed.insert(allowed.end(), fields.begin(), fields.end());
  r.check_keys(v, p, allowed, " of a " + name + " kernel");
  KernelSignature sig{*cls, {}};
  for (std::size_t i = 0; i < fields.size(); ++i) {
    std::string field(fields[i]);
    sig.dims[i] = r.integer(r.required(v, p, field), p + "/" + field, 0, kMaxGraphBytes);
  }
  return sig;
}

constexpr std::string_view kOpFields[] = {"name",         "type",           "phase",      "kernel",
                                          "flops",        "bytes_accessed", "output_bytes",
                                          "persistent_bytes", "cpu_only",   "layer",      "colocation",
                                          "measured_s",   "module",         "call"};
constexpr std::string_view kEdgeFields[] = {"src", "dst", "bytes", "control"};
constexpr std::string_view kGraphFields[] = {"format", "version", "name", "parameters", "execution", "ops", "edges"};

Op read_op(const Reader& r, const json& v, const std::string& p, int64_t version) {
  r.object(v, p);
  r.check_keys(v, p, kOpFields, " of an op");
  Op op;
  op.name = r.string(r.required(v, p, "name"), p + "/name", true);
  op.type = r.string(r.required(v, p, "type"), p + "/type", true);
  if (const json* phase = Reader::member(v, "phase")) {
    auto parsed = phase_from_name(r.string(*phase, p + "/phase", false));
    if (!parsed) r.fail_value(p + "/phase", *phase, "unknown phase; valid phases are forward, backward, update, other");
    op.phase = *parsed;
  }
  if (const json* kernel = Reader::member(v, "kernel")) op.kernel = read_kernel(r, *kernel, p + "/kernel");
  if (const json* flops = Reader::member(v, "flops")) {
    op.flops = r.number(*flops, p + "/flops", kMaxOpFlops, "1e18");
  } else {
    op.flops = kernel_flops(op.kernel);
    if (op.flops > kMaxOpFlops)
      r.fail(p + "/kernel", "implies " + format_exact(op.flops) + " flops: must be <= 1e18");
  }
  if (const json* b = Reader::member(v, "bytes_accessed")) {
    op.bytes_accessed = r.number(*b, p + "/bytes_accessed", static_cast<double>(kMaxGraphBytes), kMaxBytesText);
  } else {
    op.bytes_accessed = kernel_bytes(op.kernel);
    if (op.bytes_accessed > static_cast<double>(kMaxGraphBytes))
      r.fail(p + "/kernel", "implies " + format_exact(op.bytes_accessed) + " bytes accessed: must be <= " + kMaxBytesText);
  }
  if (const json* b = Reader::member(v, "output_bytes")) op.output_bytes = r.bytes(*b, p + "/output_bytes");
  if (const json* b = Reader::member(v, "persistent_bytes")) op.persistent_bytes = r.bytes(*b, p + "/persistent_bytes");
  if (const json* b = Reader::member(v, "cpu_only")) op.cpu_only = r.boolean(*b, p + "/cpu_only");
  if (const json* l = Reader::member(v, "layer"))
    op.layer = static_cast<int32_t>(r.integer(*l, p + "/layer", -1, std::numeric_limits<int32_t>::max()));
  if (const json* c = Reader::member(v, "colocation")) op.colocation = r.string(*c, p + "/colocation", false);
  if (const json* m = Reader::member(v, "measured_s")) {
    const std::string mp = p + "/measured_s";
    if (version < kGraphVersionMeasured)
      r.fail(mp, "needs \"version\": 2 (version 1 files have no measured times)");
    r.object(*m, mp);
    // nlohmann keeps members sorted by key, the canonical order; keys are unique (parse()).
    for (const auto& [key, value] : m->items()) {
      const std::string kp = mp + "/" + json_pointer_token(key);
      if (std::string rule = measured_key_problem(key); !rule.empty())
        r.fail(kp, "device key " + quote_name(key) + ": " + rule);
      if (!value.is_number()) r.fail_value(kp, value, "must be a number (seconds)");
      const double t = value.get<double>();
      if (std::string rule = measured_time_problem(t); !rule.empty()) r.fail_value(kp, value, rule);
      op.measured_s.push_back({key, t});
    }
  }
  for (const char* key : {"module", "call"})
    if (Reader::member(v, key) && version < kGraphVersionEager)
      r.fail(p + "/" + key, "needs \"version\": 3 (module paths came with version 3)");
  if (const json* m = Reader::member(v, "module")) op.module = r.string(*m, p + "/module", false);
  if (const json* c = Reader::member(v, "call"))
    op.call = static_cast<int32_t>(r.integer(*c, p + "/call", 0, std::numeric_limits<int32_t>::max()));
  return op;
}


// A JSON string literal for a name in a written file; Error naming `what` when not UTF-8.
std::string literal(const std::string& s, const std::string& what) {
  try {
    return json(s).dump();
  } catch (const json::type_error&) {
    throw Error("cannot write " + what + ": it is not valid UTF-8");
  }
}

std::string finite(double d, const std::string& what) {
  if (!std::isfinite(d)) throw Error("cannot write " + what + " = " + std::to_string(d) + ": JSON numbers are finite");
  return format_exact(d);
}

}  // namespace

std::string measured_key_problem(std::string_view key) {
  if (key.empty()) return "must not be empty; use a device kind (cpu, gpu) or a device name of the machine";
  for (char c : key)
    if (static_cast<unsigned char>(c) <= ' ' || c == '\x7f')
      return "must be a device kind (cpu, gpu) or a device name, without whitespace or control characters";
  return "";
}

std::string measured_time_problem(double time_s) {
  if (!std::isfinite(time_s)) return "must be finite";
  if (time_s < 0) return "must be >= 0";
  if (time_s > kMaxMeasuredTime_s) return "must be <= 86400 (one day, in seconds)";
  return "";
}

std::vector<MeasuredTime> canonical_measured_times(std::vector<MeasuredTime> times, std::string_view op_name) {
  const std::string where = "op " + quote_name(op_name) + ": measured time for device key ";
  for (const MeasuredTime& m : times) {
    if (std::string rule = measured_key_problem(m.device); !rule.empty())
      throw InputError(where + quote_name(m.device) + ": " + rule);
    if (std::string rule = measured_time_problem(m.time_s); !rule.empty())
      throw InputError(where + quote_name(m.device) + " = " + format_exact(m.time_s) + ": " + rule);
  }
  std::sort(times.begin(), times.end(), [](const MeasuredTime& a, const MeasuredTime& b) { return a.device < b.device; });
  for (std::size_t i = 1; i < times.size(); ++i)
    if (times[i].device == times[i - 1].device)
      throw InputError(where + quote_name(times[i].device) + ": repeated key: each device key may appear once");
  return times;
}

OpGraph parse_graph_json(std::string_view text, std::string_view origin, std::string* name, int64_t* parameters) {
  Reader r(text, origin);
  const json doc = r.parse();
  r.object(doc, "");
  r.check_keys(doc, "", kGraphFields, "");
  const json& format = r.required(doc, "", "format");
  if (!format.is_string() || format.get_ref<const std::string&>() != kGraphFormat)
    r.fail_value("/format", format, "must be \"placelab-graph\" (this is not a placelab graph file)");
  const json& version = r.required(doc, "", "version");
  const int64_t file_version = r.integer(version, "/version", 0, std::numeric_limits<int64_t>::max());
  if (file_version < kFormatVersion || file_version > kGraphVersionEager)
    r.fail_value("/version", version, "must be 1, 2 or 3, the versions this placelab reads");
  Execution execution = Execution::kDataflow;
  if (const json* e = Reader::member(doc, "execution")) {
    if (file_version < kGraphVersionEager) r.fail("/execution", "needs \"version\": 3 (execution came with version 3)");
    auto parsed = execution_from_name(r.string(*e, "/execution", false));
    if (!parsed) r.fail_value("/execution", *e, "must be \"dataflow\" (TensorFlow 1.x) or \"eager\" (PyTorch)");
    execution = *parsed;
  }
  std::string graph_name;
  if (const json* n = Reader::member(doc, "name")) graph_name = r.string(*n, "/name", false);
  int64_t graph_parameters = -1;
  if (const json* n = Reader::member(doc, "parameters"))
    graph_parameters = r.integer(*n, "/parameters", 0, std::numeric_limits<int64_t>::max());

  OpGraph graph;
  const json& ops = r.array(r.required(doc, "", "ops"), "/ops");
  // A graph of no ops has no step to place or time: every command that takes it would only
  // divide by zero further on.
  if (ops.empty()) r.fail("/ops", "a graph needs at least one op");
  std::unordered_map<std::string, std::size_t> first_use;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    std::string p = "/ops/" + std::to_string(i);
    Op op = read_op(r, ops[i], p, file_version);
    auto [it, inserted] = first_use.emplace(op.name, i);
    if (!inserted) {
      std::string first = "/ops/" + std::to_string(it->second) + "/name";
      r.fail_value(p + "/name", ops[i]["name"],
                   "duplicate op name; first used by " + first + " (line " + std::to_string(r.line_of(first)) + ")");
    }
    graph.add_op(std::move(op));
  }

  // The file index of the first edge between each (src, dst) pair, to point at the edge that
  // closes a cycle.
  std::unordered_map<uint64_t, std::size_t> edge_index;
  if (const json* edges = Reader::member(doc, "edges")) {
    r.array(*edges, "/edges");
    for (std::size_t i = 0; i < edges->size(); ++i) {
      std::string p = "/edges/" + std::to_string(i);
      const json& e = r.object((*edges)[i], p);
      r.check_keys(e, p, kEdgeFields, " of an edge");
      OpId ends[2] = {0, 0};
      const char* keys[2] = {"src", "dst"};
      for (int k = 0; k < 2; ++k) {
        const json& end = r.required(e, p, keys[k]);
        auto id = graph.find(r.string(end, p + "/" + keys[k], false));
        if (!id) r.fail_value(p + "/" + keys[k], end, "unknown op: no op in /ops has this name");
        ends[k] = *id;
      }
      if (ends[0] == ends[1]) r.fail_value(p + "/dst", e["dst"], "an edge cannot connect an op to itself");
      // An eager graph's op order is its program order: an op consumes only what ran before it.
      if (execution == Execution::kEager && ends[0] > ends[1])
        r.fail_value(p + "/dst", e["dst"],
                     "comes before its producer in /ops; an \"eager\" graph lists its ops in program order");
      Tensor t;
      if (const json* b = Reader::member(e, "bytes")) t.bytes = r.bytes(*b, p + "/bytes");
      if (const json* c = Reader::member(e, "control")) t.control = r.boolean(*c, p + "/control");
      if (t.control && t.bytes != 0)
        r.fail_value(p + "/bytes", e["bytes"], "must be 0 on a control edge (control edges carry no data)");
      edge_index.emplace(uint64_t{ends[0]} << 32 | ends[1], i);
      graph.add_edge(ends[0], ends[1], t);
    }
  }

  std::vector<OpId> cycle = graph.find_cycle();
  if (!cycle.empty()) {
    std::string names;
    for (OpId v : cycle) names += (names.empty() ? "" : " -> ") + graph.op(v).name;
    const std::string& last = graph.op(cycle.back()).name;
    const std::string& first = graph.op(cycle.front()).name;
    std::size_t closing = edge_index.at(uint64_t{cycle.back()} << 32 | cycle.front());
    r.fail("/edges/" + std::to_string(closing),
           "the op graph has a cycle: " + names + " (this edge, " + last + " -> " + first + ", closes it)");
  }
  graph.set_execution(execution);
  if (name) *name = std::move(graph_name);
  if (parameters) *parameters = graph_parameters;
  return graph;
}

OpGraph read_graph_json(const std::filesystem::path& path, std::string* name, int64_t* parameters) {
  return parse_graph_json(read_text_file(path), path.string(), name, parameters);
}

void write_graph_json(const OpGraph& graph, std::ostream& out, std::string_view name, int64_t parameters) {
  // The lowest version that holds what the graph has, so such files stay readable by older
  // placelabs: 1, 2 with measured times, 3 for an eager graph or module paths.
  bool measured = false, modules = graph.execution() != Execution::kDataflow;
  for (OpId id = 0; id < graph.num_ops(); ++id) {
    const Op& op = graph.op(id);
    measured = measured || !op.measured_s.empty();
    modules = modules || !op.module.empty() || op.call != 0;
  }
  const int64_t version = modules ? kGraphVersionEager : measured ? kGraphVersionMeasured : kFormatVersion;
  std::string s = "{\n  \"format\": \"placelab-graph\",\n  \"version\": " + std::to_string(version) +
                  ",\n  \"name\": " + literal(std::string(name), "the graph name") + ",\n";
  if (parameters >= 0) s += "  \"parameters\": " + std::to_string(parameters) + ",\n";
  if (version >= kGraphVersionEager)
    s += "  \"execution\": \"" + std::string(execution_name(graph.execution())) + "\",\n";
  s += "  \"ops\": [";
  for (OpId id = 0; id < graph.num_ops(); ++id) {
    const Op& op = graph.op(id);
    std::string what = "op " + std::to_string(id);
    s += id ? ",\n    {" : "\n    {";
    s += "\"name\": " + literal(op.name, what + " name");
    s += ", \"type\": " + literal(op.type, what + " type");
    s += ", \"phase\": \"" + std::string(phase_name(op.phase)) + "\"";
    s += ", \"kernel\": {\"class\": \"" + std::string(kernel_class_name(op.kernel.cls)) + "\"";
    auto fields = kernel_fields(op.kernel.cls);
    for (std::size_t i = 0; i < fields.size(); ++i)
      s += ", \"" + std::string(fields[i]) + "\": " + std::to_string(op.kernel.dims[i]);
    s += "}";
    s += ", \"flops\": " + finite(op.flops, op.name + " flops");
    s += ", \"bytes_accessed\": " + finite(op.bytes_accessed, op.name + " bytes_accessed");
    s += ", \"output_bytes\": " + std::to_string(op.output_bytes);
    s += ", \"persistent_bytes\": " + std::to_string(op.persistent_bytes);
    s += std::string(", \"cpu_only\": ") + (op.cpu_only ? "true" : "false");
    s += ", \"layer\": " + std::to_string(op.layer);
    s += ", \"colocation\": " + literal(op.colocation, what + " colocation");
    if (!op.measured_s.empty()) {
      s += ", \"measured_s\": {";
      for (std::size_t i = 0; i < op.measured_s.size(); ++i) {
        const MeasuredTime& m = op.measured_s[i];
        s += (i ? ", " : "") + literal(m.device, what + " measured_s key") + ": " +
             finite(m.time_s, op.name + " measured_s[" + m.device + "]");
      }
      s += "}";
    }
    if (modules) s += ", \"module\": " + literal(op.module, what + " module") + ", \"call\": " + std::to_string(op.call);
    s += "}";
  }
  s += graph.num_ops() ? "\n  ],\n  \"edges\": [" : "],\n  \"edges\": [";
  // boost::edges() of a bidirectional adjacency_list walks its global edge list, i.e. insertion
  // order; writing that order makes every op's in- and out-edge order survive the round trip.
  const auto& g = graph.adjacency();
  bool first = true;
  for (auto [it, end] = boost::edges(g); it != end; ++it) {
    const Tensor& t = g[*it];
    s += first ? "\n    {" : ",\n    {";
    first = false;
    s += "\"src\": " + literal(g[boost::source(*it, g)].name, "an edge source");
    s += ", \"dst\": " + literal(g[boost::target(*it, g)].name, "an edge target");
    s += ", \"bytes\": " + std::to_string(t.bytes);
    s += std::string(", \"control\": ") + (t.control ? "true" : "false") + "}";
  }
  s += first ? "]\n}\n" : "\n  ]\n}\n";
  out << s;
}

namespace {

// The checks every placement file passes whatever reads it: an object of known keys, the format and
// version when present, exactly one of "placement" and "devices". Returns those two members (one null).
std::pair<const json*, const json*> placement_members(const Reader& r, const json& doc) {
  r.object(doc, "");
  static constexpr std::string_view kFields[] = {"format", "version", "placement", "devices"};
  r.check_keys(doc, "", kFields, "");
  if (const json* format = Reader::member(doc, "format"))
    if (!format->is_string() || format->get_ref<const std::string&>() != kPlacementFormat)
      r.fail_value("/format", *format, "must be \"placelab-placement\" (this is not a placelab placement file)");
  if (const json* version = Reader::member(doc, "version"))
    if (r.integer(*version, "/version", 0, std::numeric_limits<int64_t>::max()) != kFormatVersion)
      r.fail_value("/version", *version, "must be 1, the only version this placelab reads");
  const json* by_name = Reader::member(doc, "placement");
  const json* in_order = Reader::member(doc, "devices");
  if (by_name && in_order)
    r.fail("/devices", "a placement file has \"placement\" or \"devices\", not both");
  if (!by_name && !in_order)
    r.fail("", "missing \"placement\" (op name -> device name) or \"devices\" (device names in op-id order)");
  return {by_name, in_order};
}

}  // namespace

Placement parse_placement_json(std::string_view text, std::string_view origin, const OpGraph& graph,
                               std::span<const std::string> device_names) {
  PLACELAB_CHECK(device_names.size() <= std::numeric_limits<DeviceId>::max()) << device_names.size() << " devices";
  Reader r(text, origin);
  const json doc = r.parse();
  const auto [by_name, in_order] = placement_members(r, doc);

  std::unordered_map<std::string_view, DeviceId> device_ids;
  std::string valid;
  for (std::size_t d = 0; d < device_names.size(); ++d) {
    device_ids.emplace(device_names[d], static_cast<DeviceId>(d));
    valid += (d ? ", " : "") + device_names[d];
  }
  auto device = [&](const json& v, const std::string& p, const std::string& op_name) {
    auto it = device_ids.find(r.string(v, p, false));
    if (it == device_ids.end())
      r.fail_value(p, v, "unknown device for op " + quote_name(op_name) + "; valid devices are " + valid);
    return it->second;
  };

  Placement placement(graph.num_ops(), 0);
  if (by_name) {
    r.object(*by_name, "/placement");
    std::vector<bool> seen(graph.num_ops(), false);
    for (const auto& [op_name, value] : by_name->items()) {
      std::string p = "/placement/" + json_pointer_token(op_name);
      auto id = graph.find(op_name);
      if (!id) r.fail_value(p, value, "unknown op " + quote_name(op_name) + ": the graph has no op of this name");
      placement[*id] = device(value, p, op_name);
      seen[*id] = true;
    }
    std::string missing;
    std::size_t num_missing = 0;
    for (OpId id = 0; id < graph.num_ops(); ++id) {
      if (seen[id]) continue;
      if (++num_missing <= 5) missing += (missing.empty() ? "" : ", ") + quote_name(graph.op(id).name);
    }
    if (num_missing)
      r.fail("/placement", "op " + missing + (num_missing > 5 ? ", ..." : "") + (num_missing > 1 ? " are" : " is") +
                               " missing (" + std::to_string(num_missing) +
                               " in all): the placement must name every op of the graph");
  } else {
    r.array(*in_order, "/devices");
    if (in_order->size() != graph.num_ops())
      r.fail("/devices", "has " + std::to_string(in_order->size()) + " entries: must have one per op (" +
                             std::to_string(graph.num_ops()) + "), in op-id order");
    for (OpId id = 0; id < graph.num_ops(); ++id)
      placement[id] = device((*in_order)[id], "/devices/" + std::to_string(id), graph.op(id).name);
  }
  return placement;
}

Placement read_placement_json(const std::filesystem::path& path, const OpGraph& graph,
                              std::span<const std::string> device_names) {
  return parse_placement_json(read_text_file(path), path.string(), graph, device_names);
}

std::vector<std::pair<std::string, std::string>> parse_placement_names_json(std::string_view text,
                                                                          std::string_view origin) {
  Reader r(text, origin);
  const json doc = r.parse();
  const auto [by_name, in_order] = placement_members(r, doc);
  if (!by_name)
    r.fail("/devices", "lists devices in op-id order and names no ops: the graph is needed to read it; write the "
                       "\"placement\" form (op name -> device name), as `placelab run` does in best_placement.json");
  r.object(*by_name, "/placement");
  std::vector<std::pair<std::string, std::string>> ops;
  ops.reserve(by_name->size());
  for (const auto& [op_name, value] : by_name->items())
    ops.emplace_back(op_name, r.string(value, "/placement/" + json_pointer_token(op_name), false));
  return ops;
}

std::vector<std::pair<std::string, std::string>> read_placement_names_json(const std::filesystem::path& path) {
  return parse_placement_names_json(read_text_file(path), path.string());
}

void write_placement_json(const OpGraph& graph, std::span<const DeviceId> placement,
                          std::span<const std::string> device_names, std::ostream& out) {
  check_placement(placement, graph.num_ops(), device_names.size(), "write_placement_json");
  std::string s = "{\n  \"format\": \"placelab-placement\",\n  \"version\": 1,\n  \"placement\": {";
  for (OpId id = 0; id < graph.num_ops(); ++id) {
    s += id ? ",\n    " : "\n    ";
    s += literal(graph.op(id).name, "op " + std::to_string(id) + " name") + ": " +
         literal(device_names[placement[id]], "device " + std::to_string(placement[id]) + " name");
  }
  s += graph.num_ops() ? "\n  }\n}\n" : "}\n}\n";
  out << s;
}

}  // namespace placelab
