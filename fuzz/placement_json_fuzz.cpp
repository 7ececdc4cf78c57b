// Placement JSON (graph/io.h): parse_placement_json on arbitrary bytes, against a fixed graph of
// four ops and a machine of three devices. A placement that parses writes and reads back equal.
#include <array>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_util.h"
#include "placelab/graph/io.h"

namespace {

const char* kGraph = R"({"format": "placelab-graph", "version": 1, "name": "fuzz",
  "ops": [
    {"name": "x", "type": "Placeholder", "cpu_only": true, "output_bytes": 1024},
    {"name": "w", "type": "VariableV2", "output_bytes": 4096},
    {"name": "mm", "type": "MatMul", "kernel": {"class": "gemm", "m": 8, "n": 32, "k": 32, "batch": 1}, "output_bytes": 1024},
    {"name": "relu", "type": "Relu", "kernel": {"class": "elementwise", "elements": 256, "inputs": 1}, "output_bytes": 1024}
  ],
  "edges": [
    {"src": "x", "dst": "mm", "bytes": 1024}, {"src": "w", "dst": "mm", "bytes": 4096}, {"src": "mm", "dst": "relu", "bytes": 1024}
  ]})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace placelab;
  static const OpGraph graph = parse_graph_json(kGraph, "fuzz-graph.json");
  static const std::array<std::string, 3> devices{"cpu:0", "gpu:0", "gpu:1"};
  fuzz::expect_input_error_or_success([&] {
    const Placement p = parse_placement_json(fuzz::as_text(data, size), "fuzz.json", graph, devices);
    std::ostringstream out;
    write_placement_json(graph, p, devices, out);
    Placement back;
    try {
      back = parse_placement_json(out.str(), "written.json", graph, devices);
    } catch (const InputError& e) {
      fuzz::finding(std::string("a written placement does not read back: ") + e.what());
    }
    if (back != p) fuzz::finding("a placement read back from its JSON differs");
  });
  return 0;
}
