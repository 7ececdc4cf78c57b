// Graph JSON (graph/io.h): parse_graph_json on arbitrary bytes. A graph that parses must survive
// the round trip the header promises: write_graph_json, parse again, write again — same text.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_util.h"
#include "placelab/graph/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace placelab;
  fuzz::expect_input_error_or_success([&] {
    std::string name;
    int64_t parameters = -1;
    const OpGraph g = parse_graph_json(fuzz::as_text(data, size), "fuzz.json", &name, &parameters);
    std::ostringstream first;
    write_graph_json(g, first, name, parameters);
    std::string name2;
    int64_t parameters2 = -1;
    OpGraph back;
    try {
      back = parse_graph_json(first.str(), "written.json", &name2, &parameters2);
    } catch (const InputError& e) {
      fuzz::finding(std::string("a written graph does not read back: ") + e.what());
    }
    std::ostringstream second;
    write_graph_json(back, second, name2, parameters2);
    if (first.str() != second.str()) fuzz::finding("a graph read back from its JSON writes different JSON");
  });
  return 0;
}
