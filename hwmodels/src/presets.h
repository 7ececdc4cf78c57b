// The built-in machine presets, compiled in from hwmodels/presets/*.yaml by CMake (the generated
// presets.cpp in the build folder). Private to the hwmodels library.
#pragma once

#include <span>
#include <string_view>

namespace placelab::detail {

struct PresetText {
  std::string_view name;  // file name without .yaml, e.g. "k80x4"
  std::string_view yaml;  // the file's text, comments included
};

// Every preset, in the order CMake lists them.
std::span<const PresetText> builtin_presets();

}  // namespace placelab::detail
