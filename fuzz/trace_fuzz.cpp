// Kineto and TensorFlow traces (profiler/trace_import.h): import_trace_text on arbitrary bytes.
// Inputs of odd length import guided by a graph (the zoo's cifar10_cnn), so that the graph-matching
// path is fuzzed too; even ones without.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "placelab/models/zoo.h"
#include "placelab/profiler/trace_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace placelab;
  static const models::Model guide = models::make_model(models::ModelSpec::parse("cifar10_cnn"));
  TraceImportOptions options;
  if (size % 2 == 1) options.graph = &guide.graph;
  fuzz::expect_input_error_or_success([&] {
    const TraceImport t = import_trace_text(fuzz::as_text(data, size), "fuzz.json", options);
    (void)t.report.brief();
    (void)t.report.usage_table();
  });
  return 0;
}
