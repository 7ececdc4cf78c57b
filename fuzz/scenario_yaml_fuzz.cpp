// Scenario YAML (apps/src/scenario.h): the CLI's read_scenario, built into this target from the
// apps sources. It reads a path, so each input is written to one file in the temporary folder
// first (the scenario's name defaults to that file's stem; relative paths resolve beside it, and
// read_scenario only resolves them: it reads no other file).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "fuzz_util.h"
#include "scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace placelab;
  // The file is removed when the fuzzer exits (a static's destructor; a crash leaves it behind).
  struct TemporaryFile {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("placelab_fuzz_scenario_" + std::to_string(::getpid()) + ".yaml");
    ~TemporaryFile() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  };
  static const TemporaryFile temporary;
  const std::filesystem::path& file = temporary.path;
  std::FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) fuzz::finding("cannot write the temporary scenario file " + file.string());
  if (size > 0 && std::fwrite(data, 1, size, f) != size) fuzz::finding("cannot write the temporary scenario file");
  std::fclose(f);
  fuzz::expect_input_error_or_success([&] {
    (void)cli::read_scenario(file);
  });
  return 0;
}
