#include "placelab/hwmodels/machine_io.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "placelab/core/error.h"
#include "placelab/core/files.h"
#include "placelab/core/keys.h"
#include "placelab/core/numbers.h"
#include "placelab/hwmodels/cluster.h"
#include "placelab/hwmodels/cost_model.h"
#include "presets.h"

namespace placelab {
namespace {

// What a numeric field measures; decides which unit suffixes it accepts (docs/machines.md).
enum class Quantity { kFlops, kBandwidth, kBytes, kSeconds };

struct Unit {
  std::string_view suffix;
  double factor;
};

// Decimal (10^3) and binary (2^10) byte prefixes, shared by bytes and bytes/s.
constexpr Unit kByteUnits[] = {
    {"B", 1},        {"kB", 1e3},  {"KB", 1e3},  {"MB", 1e6},  {"GB", 1e9},  {"TB", 1e12},
    {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40},
};
constexpr Unit kFlopUnits[] = {
    {"FLOP/s", 1},     {"kFLOP/s", 1e3},  {"MFLOP/s", 1e6},  {"GFLOP/s", 1e9},  {"TFLOP/s", 1e12},
    {"PFLOP/s", 1e15}, {"FLOPS", 1},      {"GFLOPS", 1e9},   {"TFLOPS", 1e12}, {"PFLOPS", 1e15},
};
constexpr Unit kTimeUnits[] = {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"µs", 1e-6}, {"ns", 1e-9}};

std::string_view quantity_example(Quantity q) {
  switch (q) {
    case Quantity::kFlops: return "a number of FLOP/s, e.g. 4.37e12 or \"4.37 TFLOP/s\"";
    case Quantity::kBandwidth: return "a number of bytes/s, e.g. 11.3e9 or \"11.3 GB/s\"";
    case Quantity::kBytes: return "a number of bytes, e.g. 12884901888 or \"12 GiB\"";
    case Quantity::kSeconds: return "a number of seconds, e.g. 5e-6 or \"5 us\"";
  }
  return "a number";
}

// The range a quantity's value must lie in, as the message words it. Positive and finite is not
// enough: a rate of 1e-320 is a denormal whose reciprocal (a time) is infinite, and a value far
// beyond any machine's is a typo the simulator should not take.
struct Range {
  double low, high;
  std::string_view text;
};
Range quantity_range(Quantity q) {
  switch (q) {
    case Quantity::kFlops: return {1e3, 1e19, "in [1e3, 1e19] FLOP/s"};
    case Quantity::kBandwidth: return {1e3, 1e16, "in [1e3, 1e16] bytes/s"};
    case Quantity::kBytes: return {1, 1e18, "in [1, 1e18] bytes"};
    case Quantity::kSeconds: return {0, 1e4, "in [0, 1e4] seconds"};
  }
  return {0, 0, ""};
}


// "<number>" or "<number>[spaces]<unit>" with a unit of quantity q; nullopt when malformed.
std::optional<double> parse_quantity(std::string_view text, Quantity q) {
  if (auto plain = parse_number<double>(text)) return plain;
  std::size_t end = text.find_last_of("0123456789.");
  if (end == std::string_view::npos) return std::nullopt;
  std::string_view number = text.substr(0, end + 1);
  std::string_view unit = text.substr(end + 1);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  if (unit.empty()) return std::nullopt;
  auto value = parse_number<double>(number);
  if (!value) return std::nullopt;
  auto lookup = [&](std::span<const Unit> units, std::string_view suffix) -> std::optional<double> {
    for (const Unit& u : units)
      if (u.suffix == suffix) return *value * u.factor;
    return std::nullopt;
  };
  switch (q) {
    case Quantity::kFlops: return lookup(kFlopUnits, unit);
    case Quantity::kSeconds: return lookup(kTimeUnits, unit);
    case Quantity::kBytes: return lookup(kByteUnits, unit);
    case Quantity::kBandwidth:
      if (unit.size() < 2 || unit.substr(unit.size() - 2) != "/s") return std::nullopt;
      return lookup(kByteUnits, unit.substr(0, unit.size() - 2));
  }
  return std::nullopt;
}

std::string describe_node(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar: return node.Scalar();
    case YAML::NodeType::Sequence: return "<a sequence>";
    case YAML::NodeType::Map: return "<a mapping>";
    case YAML::NodeType::Null: return "<empty>";
    case YAML::NodeType::Undefined: return "<missing>";
  }
  return "<?>";
}


const detail::PresetText* find_preset(std::string_view name);
bool looks_like_path(std::string_view name_or_path);
std::string preset_list();

// The text of a machine file; throws InputError naming it when it cannot be read.
std::string read_text(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(path.string() + ": cannot open machine file");
  return read_text_file(path);  // regular files only, bounded
}

// Reads one machine document, remembering the line of every entry and field so that errors
// found later (by Machine::finalize) can point at the line too. `allow_cluster`: whether the
// document may be a `cluster:` (false for a cluster's node, so that clusters do not nest).
class MachineReader {
 public:
  explicit MachineReader(std::string_view origin, bool allow_cluster = true)
      : origin_(origin), allow_cluster_(allow_cluster) {}

  Machine read(std::string_view text) {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
      int line = e.mark.is_null() ? 1 : e.mark.line + 1;
      throw InputError(origin_ + ":" + std::to_string(line) + ": YAML syntax error: " + e.msg);
    }
    try {
      return read_root(root);
    } catch (const YAML::Exception& e) {
      // yaml-cpp's own errors (e.g. an alias to nowhere) still get a line.
      int line = e.mark.is_null() ? 1 : e.mark.line + 1;
      throw InputError(origin_ + ":" + std::to_string(line) + ": " + e.msg);
    }
  }

 private:
  static constexpr std::string_view kRootKeys[] = {"name",  "description",   "devices", "switches",
                                                   "links", "route_figures", "cluster"};
  static constexpr std::string_view kClusterKeys[] = {"node", "nodes", "network"};
  static constexpr std::string_view kNetworkKeys[] = {"bandwidth_Bps", "latency_s", "nics", "attach_bandwidth_Bps"};
  static constexpr std::string_view kDeviceKeys[] = {
      "name", "kind", "model", "peak_flops", "memory_bandwidth_Bps", "memory_bytes", "streams", "launch_overhead_s",
      "full_speed_ops", "dispatch_s", "copy_engine", "efficiency"};
  static constexpr std::string_view kEfficiencyKeys[] = {
      "base", "winograd_speedup", "host_op_s", "gemm", "conv2d", "conv2d_backprop_input", "conv2d_backprop_filter",
      "elementwise", "reduction", "embedding", "softmax", "copy"};
  static constexpr std::string_view kCurveKeys[] = {"compute_max", "compute_half_flops", "memory_max",
                                                    "memory_half_bytes"};
  static constexpr std::string_view kLinkKeys[] = {"a",         "b",         "kind", "bandwidth_Bps",
                                                   "latency_s", "reverse_bandwidth_Bps", "reverse_latency_s"};
  static constexpr std::string_view kRouteFigureKeys[] = {"from", "to", "bandwidth_Bps", "latency_s"};

  int line_of(const YAML::Node& node, int fallback) const {
    if (!node.IsDefined()) return fallback;
    const YAML::Mark mark = node.Mark();
    return mark.is_null() || mark.line < 0 ? fallback : mark.line + 1;
  }

  // The value is cut at 60 bytes (on a UTF-8 boundary): a file that is one long scalar, or a
  // file that is no machine at all (/etc/passwd named as a node), is named, not printed back.
  [[noreturn]] void fail(int line, const std::string& field, const std::string& value, std::string_view rule) const {
    std::string shown = excerpt(value);
    if (shown.size() < value.size()) shown += " (" + std::to_string(value.size()) + " bytes)";
    throw InputError(origin_ + ":" + std::to_string(line) + ": " + field + (value.empty() ? "" : " = " + shown) +
                     ": " + std::string(rule));
  }

  // Checks that `node` is a mapping whose keys are all in `allowed` (each at most once) and that
  // every key in `required` is present. Records the line of `path` and of each field.
  void check_map(const YAML::Node& node, const std::string& path, int parent_line,
                 std::span<const std::string_view> allowed, std::span<const std::string_view> required) {
    int line = line_of(node, parent_line);
    if (!node.IsMap())
      fail(line, path.empty() ? "(document)" : path, describe_node(node),
           "must be a mapping with keys " + join_names(allowed));
    lines_[path] = line;
    std::set<std::string> seen;
    for (const auto& kv : node) {
      const YAML::Node& key = kv.first;
      int key_line = line_of(key, line);
      if (!key.IsScalar())
        fail(key_line, path.empty() ? "(document)" : path, "", "keys must be plain names, not " + describe_node(key));
      const std::string& name = key.Scalar();
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end())
        fail(key_line, field_path(path, name), "", unknown_key_rule(join_names(allowed)));
      if (!seen.insert(name).second) fail(key_line, field_path(path, name), "", "duplicate key");
      // An empty value's mark points at the next token, often the next line: use the key's.
      lines_[field_path(path, name)] = kv.second.IsNull() ? key_line : line_of(kv.second, key_line);
    }
    for (std::string_view r : required)
      if (!seen.count(std::string(r))) fail(line, field_path(path, r), "", "missing (required)");
  }

  std::string field_path(const std::string& path, std::string_view key) const {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }
  int field_line(const std::string& path, std::string_view key) const {
    auto it = lines_.find(field_path(path, key));
    return it == lines_.end() ? 1 : it->second;
  }

  std::string read_string(const YAML::Node& map, const std::string& path, std::string_view key) {
    const YAML::Node node = map[std::string(key)];
    std::string field = field_path(path, key);
    if (!node.IsScalar()) fail(field_line(path, key), field, describe_node(node), "must be a string");
    return node.Scalar();
  }

  double read_quantity(const YAML::Node& map, const std::string& path, std::string_view key, Quantity q,
                       bool allow_zero) {
    const YAML::Node node = map[std::string(key)];
    std::string field = field_path(path, key);
    int line = field_line(path, key);
    if (!node.IsScalar()) fail(line, field, describe_node(node), "must be " + std::string(quantity_example(q)));
    auto value = parse_quantity(node.Scalar(), q);
    if (!value) fail(line, field, node.Scalar(), "must be " + std::string(quantity_example(q)));
    if (!std::isfinite(*value)) fail(line, field, node.Scalar(), "must be finite");
    if (allow_zero ? *value < 0 : *value <= 0) fail(line, field, node.Scalar(), allow_zero ? "must be >= 0" : "must be > 0");
    const Range range = quantity_range(q);
    if (*value != 0 && (*value < range.low || *value > range.high))
      fail(line, field, node.Scalar(), "must be " + std::string(range.text));
    return *value;
  }

  Machine read_root(const YAML::Node& root) {
    static constexpr std::string_view kRequiredName[] = {"name"};
    check_map(root, "", 1, kRootKeys, kRequiredName);
    const std::string name = read_string(root, "", "name");
    if (name.empty()) fail(field_line("", "name"), "name", "", "must not be empty");
    if (root["cluster"]) {
      if (!allow_cluster_)
        fail(field_line("", "cluster"), "cluster", "",
             "a cluster's node must be a single-node machine, not a cluster");
      for (std::string_view key : {"devices", "switches", "links", "route_figures"})
        if (root[std::string(key)])
          fail(field_line("", key), std::string(key), "", "not allowed beside `cluster` (a cluster's devices come from its node)");
      Machine m = read_cluster(root, name);
      if (root["description"]) m.description = read_string(root, "", "description");
      return m;
    }
    if (!root["devices"]) fail(lines_.at(""), "devices", "", "missing (required unless the machine is a `cluster`)");
    Machine m;
    m.name = name;
    if (root["description"]) m.description = read_string(root, "", "description");

    const YAML::Node devices = root["devices"];
    if (!devices.IsSequence() || devices.size() == 0)
      fail(field_line("", "devices"), "devices", describe_node(devices), "must be a non-empty sequence of devices");
    // Routing is quadratic in devices: the bound of a cluster holds for one machine too, checked
    // before any route is searched (5,000 GPUs in one node took 1.9 GB).
    if (devices.size() > kMaxClusterDevices)
      fail(field_line("", "devices"), "devices", std::to_string(devices.size()) + " devices",
           "a machine may hold at most " + std::to_string(kMaxClusterDevices) + " devices");
    for (std::size_t i = 0; i < devices.size(); ++i)
      m.devices.push_back(read_device(devices[i], "devices[" + std::to_string(i) + "]", field_line("", "devices")));

    if (root["switches"]) {
      const YAML::Node switches = root["switches"];
      if (!switches.IsSequence())
        fail(field_line("", "switches"), "switches", describe_node(switches), "must be a sequence of names");
      if (switches.size() > kMaxClusterDevices)
        fail(field_line("", "switches"), "switches", std::to_string(switches.size()) + " switches",
             "a machine may hold at most " + std::to_string(kMaxClusterDevices) + " switches");
      for (std::size_t i = 0; i < switches.size(); ++i) {
        std::string path = "switches[" + std::to_string(i) + "]";
        int line = line_of(switches[i], field_line("", "switches"));
        lines_[path] = line;
        if (!switches[i].IsScalar()) fail(line, path, describe_node(switches[i]), "must be a name");
        m.switches.push_back(switches[i].Scalar());
      }
    }

    if (root["links"]) {
      const YAML::Node links = root["links"];
      if (!links.IsSequence())
        fail(field_line("", "links"), "links", describe_node(links), "must be a sequence of links");
      if (links.size() > 16 * kMaxClusterDevices)
        fail(field_line("", "links"), "links", std::to_string(links.size()) + " links",
             "a machine may hold at most " + std::to_string(16 * kMaxClusterDevices) + " links");
      for (std::size_t i = 0; i < links.size(); ++i)
        m.links.push_back(read_link(links[i], "links[" + std::to_string(i) + "]", field_line("", "links")));
    }

    if (root["route_figures"]) {
      const YAML::Node figures = root["route_figures"];
      if (!figures.IsSequence())
        fail(field_line("", "route_figures"), "route_figures", describe_node(figures),
             "must be a sequence of route figures");
      if (figures.size() > 16 * kMaxClusterDevices)
        fail(field_line("", "route_figures"), "route_figures", std::to_string(figures.size()) + " entries",
             "a machine may hold at most " + std::to_string(16 * kMaxClusterDevices) + " route figures");
      for (std::size_t i = 0; i < figures.size(); ++i)
        m.route_figures.push_back(read_route_figure(figures[i], "route_figures[" + std::to_string(i) + "]",
                                                    field_line("", "route_figures")));
    }

    try {
      m.finalize();
    } catch (const MachineError& e) {
      fail_at_field(e);
    }
    return m;
  }

  // `cluster: {node, nodes, network}`: `nodes` copies of the node machine (a preset or a machine
  // file, relative to this file's folder), named node0 … node<N-1>, joined by the network
  // (compose_cluster).
  Machine read_cluster(const YAML::Node& root, const std::string& name) {
    static constexpr std::string_view kRequired[] = {"node", "nodes", "network"};
    const YAML::Node cluster = root["cluster"];
    check_map(cluster, "cluster", field_line("", "cluster"), kClusterKeys, kRequired);
    const std::string node = read_string(cluster, "cluster", "node");
    const int node_line = field_line("cluster", "node");
    if (node.empty()) fail(node_line, "cluster.node", "", "must not be empty");

    const YAML::Node count = cluster["nodes"];
    const int count_line = field_line("cluster", "nodes");
    const std::string count_text = count.IsScalar() ? count.Scalar() : describe_node(count);
    const std::optional<int> num_nodes = count.IsScalar() ? parse_number<int>(count_text) : std::nullopt;
    if (!num_nodes || *num_nodes < 1 || static_cast<std::size_t>(*num_nodes) > kMaxClusterNodes)
      fail(count_line, "cluster.nodes", count_text, "must be an integer in 1.." + std::to_string(kMaxClusterNodes));

    NetworkSpec net = read_network(cluster);
    const Machine local = read_node_machine(node, node_line);
    const std::size_t total = static_cast<std::size_t>(*num_nodes) * local.devices.size();
    if (total > kMaxClusterDevices)
      fail(count_line, "cluster.nodes", count_text,
           std::to_string(*num_nodes) + " nodes of " + std::to_string(local.devices.size()) + " devices (" + local.name +
               ") make " + std::to_string(total) + "; a cluster may hold at most " +
               std::to_string(kMaxClusterDevices) + " devices");
    std::vector<ClusterNode> nodes;
    nodes.reserve(static_cast<std::size_t>(*num_nodes));
    for (int i = 0; i < *num_nodes; ++i) nodes.push_back({"node" + std::to_string(i), local});
    try {
      Machine m = compose_cluster(name, nodes, net);
      return m;
    } catch (const MachineError& e) {
      // network.* fields are this file's cluster.network.*; the rest concern the composed
      // machine as a whole (the node's names, a route): the node's line.
      const std::string field = e.field();
      if (field.rfind("network", 0) == 0) {
        std::string path = "cluster." + field;
        while (!lines_.count(path) && path.find_last_of(".[") != std::string::npos) path.resize(path.find_last_of(".["));
        throw InputError(origin_ + ":" + std::to_string(lines_.count(path) ? lines_.at(path) : node_line) +
                         ": cluster." + e.what());
      }
      if (field == "nodes") throw InputError(origin_ + ":" + std::to_string(count_line) + ": cluster." + e.what());
      throw InputError(origin_ + ":" + std::to_string(node_line) + ": cluster.node = " + node + ": " + e.what());
    }
  }

  NetworkSpec read_network(const YAML::Node& cluster) {
    static constexpr std::string_view kRequired[] = {"bandwidth_Bps", "latency_s"};
    const std::string path = "cluster.network";
    const YAML::Node network = cluster["network"];
    check_map(network, path, field_line("cluster", "network"), kNetworkKeys, kRequired);
    NetworkSpec net;
    net.bandwidth_Bps = read_quantity(network, path, "bandwidth_Bps", Quantity::kBandwidth, false);
    net.latency_s = read_quantity(network, path, "latency_s", Quantity::kSeconds, true);
    if (network["attach_bandwidth_Bps"])
      net.attach_bandwidth_Bps = read_quantity(network, path, "attach_bandwidth_Bps", Quantity::kBandwidth, false);
    if (const YAML::Node nics = network["nics"]) {
      const int line = field_line(path, "nics");
      const std::string rule = "must be a sequence of attach points, each a switch or device name of the node "
                               "or a sequence of them (one NIC each)";
      if (!nics.IsSequence() || nics.size() == 0) fail(line, path + ".nics", describe_node(nics), rule);
      if (nics.size() > kMaxNicsPerNode)
        fail(line, path + ".nics", std::to_string(nics.size()) + " NICs",
             "must be at most " + std::to_string(kMaxNicsPerNode) + " per node");
      for (std::size_t k = 0; k < nics.size(); ++k) {
        const std::string entry = path + ".nics[" + std::to_string(k) + "]";
        const YAML::Node nic = nics[k];
        lines_[entry] = line_of(nic, line);
        std::vector<std::string> points;
        if (nic.IsScalar()) {
          points.push_back(nic.Scalar());
        } else if (nic.IsSequence() && nic.size() > 0) {
          for (std::size_t j = 0; j < nic.size(); ++j) {
            const std::string point = entry + "[" + std::to_string(j) + "]";
            lines_[point] = line_of(nic[j], lines_[entry]);
            if (!nic[j].IsScalar()) fail(lines_[point], point, describe_node(nic[j]), "must be a switch or device name");
            points.push_back(nic[j].Scalar());
          }
        } else {
          fail(lines_[entry], entry, describe_node(nic), rule);
        }
        for (const std::string& p : points)
          if (p.empty()) fail(lines_[entry], entry, "", "attach points must not be empty");
        net.nics.push_back(std::move(points));
      }
    }
    return net;
  }

  // The machine a cluster's `node` names: a preset, or a machine file (relative to this file's
  // folder). Its own errors keep their file and line, after this file's.
  Machine read_node_machine(const std::string& node, int node_line) const {
    auto nested_fail = [&](const std::string& message) -> Machine {
      throw InputError(origin_ + ":" + std::to_string(node_line) + ": cluster.node = " + node + ": " + message);
    };
    try {
      if (!looks_like_path(node))
        if (const detail::PresetText* p = find_preset(node))
          return MachineReader("hwmodels/presets/" + std::string(p->name) + ".yaml", false).read(p->yaml);
      std::filesystem::path path{node};
      if (path.is_relative()) path = std::filesystem::path(origin_).parent_path() / path;
      std::error_code ec;
      if (!looks_like_path(node) && !std::filesystem::is_regular_file(path, ec))
        return nested_fail("not a preset or a machine file; presets: " + preset_list());
      // Only a regular file: a file's node must not be able to name /dev/zero or a pipe.
      if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
        return nested_fail("not a regular file");
      return MachineReader(path.string(), false).read(read_text(path));
    } catch (const InputError& e) {
      if (std::string_view(e.what()).rfind(origin_ + ":", 0) == 0) throw;
      return nested_fail(e.what());
    }
  }

  // The line of a finalize() error's field: the field itself, else the closest enclosing entry.
  [[noreturn]] void fail_at_field(const MachineError& e) const {
    std::string path = e.field();
    while (true) {
      if (auto it = lines_.find(path); it != lines_.end())
        throw InputError(origin_ + ":" + std::to_string(it->second) + ": " + e.what());
      std::size_t cut = path.find_last_of(".[");
      if (cut == std::string::npos || cut == 0) break;
      path.resize(cut);
    }
    throw InputError(origin_ + ":1: " + e.what());
  }

  Device read_device(const YAML::Node& node, const std::string& path, int parent_line) {
    static constexpr std::string_view kRequired[] = {
        "name", "kind", "peak_flops", "memory_bandwidth_Bps", "memory_bytes", "streams", "launch_overhead_s"};
    check_map(node, path, parent_line, kDeviceKeys, kRequired);
    Device d;
    d.name = read_string(node, path, "name");
    std::string kind = read_string(node, path, "kind");
    if (kind == "cpu") {
      d.kind = DeviceKind::kCpu;
    } else if (kind == "gpu") {
      d.kind = DeviceKind::kGpu;
    } else {
      fail(field_line(path, "kind"), path + ".kind", kind, "must be cpu or gpu");
    }
    if (node["model"]) d.model = read_string(node, path, "model");
    d.peak_flops_per_s = read_quantity(node, path, "peak_flops", Quantity::kFlops, false);
    d.memory_bandwidth_Bps = read_quantity(node, path, "memory_bandwidth_Bps", Quantity::kBandwidth, false);
    double bytes = read_quantity(node, path, "memory_bytes", Quantity::kBytes, false);
    if (bytes > 0x1p62)
      fail(field_line(path, "memory_bytes"), path + ".memory_bytes", node["memory_bytes"].Scalar(),
           "must be < 2^62 bytes");
    d.memory_bytes = std::llround(bytes);
    const YAML::Node streams = node["streams"];
    const std::string text = streams.IsScalar() ? streams.Scalar() : describe_node(streams);
    const std::optional<int> streams_value = parse_number<int>(text);
    if (!streams.IsScalar() || !streams_value || *streams_value < 1 || *streams_value > 256)
      fail(field_line(path, "streams"), path + ".streams", text, "must be an integer in 1..256");
    d.streams = *streams_value;
    if (const YAML::Node full = node["full_speed_ops"]) {
      const std::string v = full.IsScalar() ? full.Scalar() : describe_node(full);
      const std::optional<int> value = parse_number<int>(v);
      if (!full.IsScalar() || !value || *value < 1 || *value > d.streams)
        fail(field_line(path, "full_speed_ops"), path + ".full_speed_ops", v,
             "must be an integer in 1..streams (" + std::to_string(d.streams) + ")");
      d.full_speed_ops = *value;
    }
    d.launch_overhead_s = read_quantity(node, path, "launch_overhead_s", Quantity::kSeconds, true);
    if (node["dispatch_s"]) {
      if (d.kind != DeviceKind::kCpu)
        fail(field_line(path, "dispatch_s"), path + ".dispatch_s", node["dispatch_s"].IsScalar() ? node["dispatch_s"].Scalar() : "",
             "only a CPU has it: the host thread that issues an eager program's ops runs on a CPU");
      d.dispatch_s = read_quantity(node, path, "dispatch_s", Quantity::kSeconds, true);
    }
    if (const YAML::Node ce = node["copy_engine"]) {
      const std::string v = ce.IsScalar() ? ce.Scalar() : describe_node(ce);
      if (v != "true" && v != "false") fail(field_line(path, "copy_engine"), path + ".copy_engine", v, "must be true or false");
      d.copy_engine = v == "true";
    }
    if (node["efficiency"]) d.efficiency = read_efficiency(node, path, d.kind);
    return d;
  }

  std::string profile_list() const { return join_names(efficiency_profile_names()); }

  EfficiencyProfile named_profile(const std::string& name, int line, const std::string& field) const {
    if (auto p = builtin_efficiency_profile(name)) return *p;
    fail(line, field, name, "not a built-in efficiency profile; profiles: " + profile_list());
  }

  // The flat efficiencies of AnalyticCostModel::Options for a device kind, as a profile: what a
  // device without `efficiency` gets, and the base of a spelled-out profile without `base`.
  static EfficiencyProfile flat_profile(DeviceKind kind) {
    const AnalyticCostModel::Options defaults;
    EfficiencyProfile p;
    p.name = "custom";
    for (int c = 0; c < kNumKernelClasses; ++c) {
      const ClassEfficiency& e = defaults.efficiency[AnalyticCostModel::efficiency_index(kind)][static_cast<std::size_t>(c)];
      p.classes[static_cast<std::size_t>(c)] = {e.compute, 0, e.memory, 0};
    }
    return p;
  }

  double read_plain(const YAML::Node& map, const std::string& path, std::string_view key) {
    const YAML::Node node = map[std::string(key)];
    const std::string text = node.IsScalar() ? node.Scalar() : describe_node(node);
    const std::optional<double> v = node.IsScalar() ? parse_number<double>(text) : std::nullopt;
    if (!v || !std::isfinite(*v)) fail(field_line(path, key), field_path(path, key), text, "must be a number");
    return *v;
  }

  // `efficiency: k80` (a built-in profile) or a mapping: `base` (a built-in profile; default the
  // flat per-kind efficiencies), `winograd_speedup`, `host_op_s`, and per kernel class a mapping of
  // compute_max, compute_half_flops, memory_max, memory_half_bytes overriding the base's values.
  EfficiencyProfile read_efficiency(const YAML::Node& device, const std::string& device_path, DeviceKind kind) {
    const YAML::Node node = device["efficiency"];
    const std::string path = field_path(device_path, "efficiency");
    const int line = field_line(device_path, "efficiency");
    if (node.IsScalar()) return named_profile(node.Scalar(), line, path);
    check_map(node, path, line, kEfficiencyKeys, {});
    EfficiencyProfile p = node["base"] ? named_profile(read_string(node, path, "base"), field_line(path, "base"),
                                                       field_path(path, "base"))
                                       : flat_profile(kind);
    p.name = "custom";
    if (node["winograd_speedup"]) p.winograd_speedup = read_plain(node, path, "winograd_speedup");
    if (node["host_op_s"]) p.host_op_s = read_quantity(node, path, "host_op_s", Quantity::kSeconds, true);
    for (std::string_view key : kEfficiencyKeys) {
      const auto cls = kernel_class_from_name(key);
      if (!cls || !node[std::string(key)]) continue;
      const std::string cpath = field_path(path, key);
      check_map(node[std::string(key)], cpath, field_line(path, key), kCurveKeys, {});
      const YAML::Node c = node[std::string(key)];
      EfficiencyCurve& e = p.curve(*cls);
      if (c["compute_max"]) e.compute_max = read_plain(c, cpath, "compute_max");
      if (c["compute_half_flops"]) e.compute_half_flops = read_plain(c, cpath, "compute_half_flops");
      if (c["memory_max"]) e.memory_max = read_plain(c, cpath, "memory_max");
      if (c["memory_half_bytes"])
        e.memory_half_bytes = read_quantity(c, cpath, "memory_half_bytes", Quantity::kBytes, true);
    }
    if (std::string error = validate_efficiency_profile(p); !error.empty()) {
      // error is "<class>.<field> = <value>: <rule>" or "<field> = …": point at that field's line.
      const std::string field = error.substr(0, error.find(' '));
      throw InputError(origin_ + ":" + std::to_string(field_line(path, field)) + ": " + path + "." + error);
    }
    return p;
  }

  Link read_link(const YAML::Node& node, const std::string& path, int parent_line) {
    static constexpr std::string_view kRequired[] = {"a", "b", "kind", "bandwidth_Bps", "latency_s"};
    check_map(node, path, parent_line, kLinkKeys, kRequired);
    Link l;
    l.a = read_string(node, path, "a");
    l.b = read_string(node, path, "b");
    std::string kind = read_string(node, path, "kind");
    auto k = link_kind_from_name(kind);
    if (!k) fail(field_line(path, "kind"), path + ".kind", kind, "must be one of pcie, nvlink, qpi, network, memory");
    l.kind = *k;
    l.bandwidth_Bps = read_quantity(node, path, "bandwidth_Bps", Quantity::kBandwidth, false);
    l.latency_s = read_quantity(node, path, "latency_s", Quantity::kSeconds, true);
    if (node["reverse_bandwidth_Bps"])
      l.reverse_bandwidth_Bps = read_quantity(node, path, "reverse_bandwidth_Bps", Quantity::kBandwidth, false);
    if (node["reverse_latency_s"])
      l.reverse_latency_s = read_quantity(node, path, "reverse_latency_s", Quantity::kSeconds, true);
    return l;
  }

  // `from: gpu:0` or `from: [gpu:0, gpu:1]`: device names (Machine::finalize checks that they are).
  std::vector<std::string> read_names(const YAML::Node& map, const std::string& path, std::string_view key) {
    const YAML::Node node = map[std::string(key)];
    const std::string field = field_path(path, key);
    const int line = field_line(path, key);
    const std::string rule = "must be a device name or a non-empty sequence of device names";
    std::vector<std::string> names;
    if (node.IsScalar()) {
      names.push_back(node.Scalar());
    } else if (node.IsSequence() && node.size() > 0) {
      for (std::size_t k = 0; k < node.size(); ++k) {
        const std::string item = field + "[" + std::to_string(k) + "]";
        lines_[item] = line_of(node[k], line);
        if (!node[k].IsScalar()) fail(lines_[item], item, describe_node(node[k]), "must be a device name");
        names.push_back(node[k].Scalar());
      }
    } else {
      fail(line, field, describe_node(node), rule);
    }
    return names;
  }

  RouteFigure read_route_figure(const YAML::Node& node, const std::string& path, int parent_line) {
    static constexpr std::string_view kRequired[] = {"from", "to"};
    check_map(node, path, parent_line, kRouteFigureKeys, kRequired);
    RouteFigure f;
    f.from = read_names(node, path, "from");
    f.to = read_names(node, path, "to");
    if (node["bandwidth_Bps"]) f.bandwidth_Bps = read_quantity(node, path, "bandwidth_Bps", Quantity::kBandwidth, false);
    if (node["latency_s"]) f.latency_s = read_quantity(node, path, "latency_s", Quantity::kSeconds, true);
    return f;
  }

  std::string origin_;
  bool allow_cluster_ = true;
  std::map<std::string, int> lines_;  // YAML path ("devices[2].memory_bytes") → 1-based line
};

std::string preset_list() { return join_names(preset_names()); }

const detail::PresetText* find_preset(std::string_view name) {
  for (const detail::PresetText& p : detail::builtin_presets())
    if (p.name == name) return &p;
  return nullptr;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// load_machine's rule: a name ending in .yaml/.yml or containing '/' is a path, never a preset.
bool looks_like_path(std::string_view name_or_path) {
  return ends_with(name_or_path, ".yaml") || ends_with(name_or_path, ".yml") ||
         name_or_path.find('/') != std::string_view::npos;
}

}  // namespace

Machine parse_machine_yaml(std::string_view text, std::string_view origin) {
  return MachineReader(origin).read(text);
}

Machine read_machine_yaml(const std::filesystem::path& path) {
  return parse_machine_yaml(read_text(path), path.string());
}

Machine load_machine(std::string_view name_or_path) {
  const bool path_like = looks_like_path(name_or_path);
  if (!path_like) {
    if (const detail::PresetText* p = find_preset(name_or_path))
      return parse_machine_yaml(p->yaml, "hwmodels/presets/" + std::string(p->name) + ".yaml");
  }
  std::filesystem::path path{std::string(name_or_path)};
  std::error_code ec;
  if (path_like || std::filesystem::is_regular_file(path, ec)) return read_machine_yaml(path);
  throw InputError("machine = " + std::string(name_or_path) +
                   ": not a preset or a machine file; presets: " + preset_list());
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const detail::PresetText& p : detail::builtin_presets()) names.emplace_back(p.name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string_view preset_yaml(std::string_view name) {
  if (const detail::PresetText* p = find_preset(name)) return p->yaml;
  throw InputError("preset = " + std::string(name) + ": unknown machine preset; presets: " + preset_list());
}

}  // namespace placelab
