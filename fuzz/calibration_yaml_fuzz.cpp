// Calibration YAML (hwmodels/calibration.h): the same bytes through parse_calibration_yaml and
// parse_calibrated_machine_yaml. A calibration that parses must be written (calibration_yaml) as
// text the parser reads again.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "placelab/hwmodels/calibration.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace placelab;
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::expect_input_error_or_success([&] {
    const Calibration c = parse_calibration_yaml(text, "fuzz.yaml");
    const std::string written = calibration_yaml(c);
    try {
      parse_calibration_yaml(written, "written.yaml");
    } catch (const InputError& e) {
      fuzz::finding(std::string("a written calibration does not read back: ") + e.what());
    }
  });
  fuzz::expect_input_error_or_success([&] { parse_calibrated_machine_yaml(text, "fuzz.yaml"); });
  return 0;
}
