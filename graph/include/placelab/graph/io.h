// Graph and placement files: the JSON formats of docs/formats.md, read with full validation and
// written so that reading them back gives the same graph. Every InputError names the file, the
// line, the field (as a JSON pointer) and the rule, e.g.
//   g.json:12: /ops/3/output_bytes = -4: must be >= 0
//
//   OpGraph g = read_graph_json("scenarios/graphs/quickstart.json");
//   std::ostringstream out;
//   write_graph_json(g, out, "quickstart");
//   write_file_atomically("results/graph.json", out.str());   // placelab/core/files.h
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"

namespace placelab {

// Limits the reader enforces (docs/formats.md): sizes in bytes and kernel dimensions are at most
// 2^50 (1 PiB), an op's flops at most 1e18; larger values are taken for unit mistakes.
inline constexpr int64_t kMaxGraphBytes = int64_t{1} << 50;
inline constexpr double kMaxOpFlops = 1e18;
// A measured op time (Op::measured_s) is at most a day: a larger one is taken for a unit mistake.
inline constexpr double kMaxMeasuredTime_s = 86400;

// The rule a measured time's device key breaks, or "" when it is valid: a device kind ("cpu",
// "gpu") or a device name — not empty, no whitespace or control characters. Whether a name is
// one of the machine's is checked when a machine is known (check_measured_times, hwmodels).
std::string measured_key_problem(std::string_view key);
// The rule a measured time in seconds breaks ("must be finite", "must be >= 0", ...), or "".
std::string measured_time_problem(double time_s);
// Sorts `times` by key into Op::measured_s's canonical order; throws InputError naming `op_name`
// and the key for a key or time the two functions above reject, or for a repeated key.
std::vector<MeasuredTime> canonical_measured_times(std::vector<MeasuredTime> times, std::string_view op_name);

// Parses a graph from JSON text; `origin` names the source in messages (a path, "<stdin>").
// Rejects malformed JSON, repeated keys, unknown or missing fields, wrong types, unknown kernel
// classes or phases, negative, non-finite or absurd numbers, duplicate op names, edges to unknown
// ops, self loops, and cycles (naming the ops on it) with an InputError. Ops get dense ids in file
// order and edges are added in file order. When `name` is not null it receives the graph's
// "name" ("" when absent); when `parameters` is not null, its trainable parameter count (-1 when
// absent: the op graph alone cannot tell trainable variables from optimizer slots).
OpGraph parse_graph_json(std::string_view text, std::string_view origin, std::string* name = nullptr,
                         int64_t* parameters = nullptr);
// Reads a graph file; throws InputError when it cannot be read or is invalid (origin = the path).
OpGraph read_graph_json(const std::filesystem::path& path, std::string* name = nullptr, int64_t* parameters = nullptr);
// Writes `graph` as JSON to `out`: every field of every op (defaults included; "measured_s" only
// when the op has measured times, and then the file is version 2, else version 1) in a fixed key
// order, one op per line, ops in id order and edges in insertion order, numbers in their shortest
// exact form. The output is a function of the graph, `name` and `parameters` only (written when
// >= 0), and parse_graph_json reads it back to an identical graph. Throws Error, naming the op,
// for a value JSON cannot carry (a non-finite number, a string that is not UTF-8).
void write_graph_json(const OpGraph& graph, std::ostream& out, std::string_view name = {}, int64_t parameters = -1);

// Parses a placement: {"placement": {"<op name>": "<device name>", ...}} naming every op, or
// {"devices": ["<device name>", ...]} in op-id order (optionally with "format":
// "placelab-placement" and "version": 1). `device_names` are the machine's, indexed by DeviceId.
// Throws InputError naming the op or device at fault: an unknown op, an op the map lacks, an
// unknown device (listing the valid ones), a list of the wrong length.
Placement parse_placement_json(std::string_view text, std::string_view origin, const OpGraph& graph,
                               std::span<const std::string> device_names);
Placement read_placement_json(const std::filesystem::path& path, const OpGraph& graph,
                              std::span<const std::string> device_names);
// The {"placement": {...}} form read without a graph or machine: (op name, device name) pairs in
// file order (nlohmann keeps object members sorted by key, so: op names in byte order), for tools that
// only rename what a placement says (`placelab export-placement`). Same checks of the document as
// parse_placement_json (format, version, keys, repeated ops, strings); InputError for the
// {"devices": [...]} form, which names no ops.
std::vector<std::pair<std::string, std::string>> parse_placement_names_json(std::string_view text,
                                                                          std::string_view origin);
std::vector<std::pair<std::string, std::string>> read_placement_names_json(const std::filesystem::path& path);
// Writes the {"placement": {...}} form, one op per line in id order. Throws InputError when
// `placement` does not fit the graph and the devices (check_placement).
void write_placement_json(const OpGraph& graph, std::span<const DeviceId> placement,
                          std::span<const std::string> device_names, std::ostream& out);

}  // namespace placelab
