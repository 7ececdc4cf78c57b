// Machine descriptions in YAML (docs/machines.md) and the built-in presets (hwmodels/presets/,
// compiled into the library so the CLI works from any folder).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "placelab/hwmodels/machine.h"

namespace placelab {

// Parses and finalises a machine from YAML text; `origin` names the source in messages. Throws
// InputError "origin:line: devices[2].memory_bytes = -4: must be > 0" on bad input.
Machine parse_machine_yaml(std::string_view text, std::string_view origin);
// Reads a machine file.
Machine read_machine_yaml(const std::filesystem::path& path);
// A preset by name ("k80x4") or, when `name_or_path` names an existing file or ends in .yaml/.yml,
// that file. Throws InputError listing the presets for an unknown name.
Machine load_machine(std::string_view name_or_path);

// The names of the built-in presets, sorted.
std::vector<std::string> preset_names();
// The YAML text of a preset (with its source comments); throws InputError for an unknown name.
std::string_view preset_yaml(std::string_view name);

}  // namespace placelab
