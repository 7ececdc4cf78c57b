// Machine YAML (hwmodels/machine_io.h): parse_machine_yaml on arbitrary bytes. A machine that
// parses must be written (calibration.h machine_yaml) as text the parser reads again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "placelab/hwmodels/calibration.h"
#include "placelab/hwmodels/machine_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace placelab;
  fuzz::expect_input_error_or_success([&] {
    const Machine m = parse_machine_yaml(fuzz::as_text(data, size), "fuzz.yaml");
    const std::string written = machine_yaml(m, false);
    try {
      parse_machine_yaml(written, "written.yaml");
    } catch (const InputError& e) {
      fuzz::finding(std::string("a written machine does not read back: ") + e.what());
    }
  });
  return 0;
}
