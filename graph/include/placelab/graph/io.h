// Graph and placement files: the JSON formats of docs/formats.md, read with full validation and
// written so that reading them back gives the same graph. Every InputError names the file, the
// line, the field (as a JSON pointer) and the rule, e.g.
//   g.json:12: /ops/3/output_bytes = -4: must be >= 0
#pragma once

#include <filesystem>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>

#include "placelab/graph/op_graph.h"
#include "placelab/graph/placement.h"

namespace placelab {

// Parses a graph from JSON text; `origin` names the source in messages (a path, "<stdin>").
// Rejects malformed JSON, unknown or missing fields, unknown kernel classes or phases, negative
// or absurd sizes, duplicate op names, edges to unknown ops and cycles (naming the ops on it).
OpGraph parse_graph_json(std::string_view text, std::string_view origin);
// Reads a graph file; throws InputError when it cannot be opened or is invalid.
OpGraph read_graph_json(const std::filesystem::path& path);
// Writes `graph` as JSON (stable key order, one op per line) to `out`.
void write_graph_json(const OpGraph& graph, std::ostream& out);

// Parses a placement: {"placement": {"<op name>": "<device name>", ...}} naming every op, or
// {"devices": ["<device name>", ...]} in op-id order. `device_names` are the machine's.
Placement parse_placement_json(std::string_view text, std::string_view origin, const OpGraph& graph,
                               std::span<const std::string> device_names);
Placement read_placement_json(const std::filesystem::path& path, const OpGraph& graph,
                              std::span<const std::string> device_names);
// Writes the {"placement": {...}} form.
void write_placement_json(const OpGraph& graph, std::span<const DeviceId> placement,
                          std::span<const std::string> device_names, std::ostream& out);

// Writes `text` to `path` atomically (temporary file in the same folder, then rename), so that a
// crash never leaves a half-written output. Throws Error when it cannot.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace placelab
