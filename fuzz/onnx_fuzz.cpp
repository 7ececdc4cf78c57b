// ONNX models (models/onnx_import.h): import_onnx_bytes on arbitrary bytes, with batch 2 so that
// a symbolic batch dimension (as in tests/data/onnx/tiny_cnn.onnx) is no error.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "placelab/models/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace placelab;
  models::OnnxImportOptions options;
  options.batch = 2;
  fuzz::expect_input_error_or_success([&] {
    models::OnnxImportReport report;
    (void)models::import_onnx_bytes(fuzz::as_text(data, size), "fuzz.onnx", options, &report);
    (void)report.brief_report();
  });
  return 0;
}
