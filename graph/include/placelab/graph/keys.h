// The one wording of a key that a keyed file — graph or placement JSON, machine, calibration or
// scenario YAML — does not know, so that a typo reads the same in every file a user writes.
#pragma once

#include <string>
#include <string_view>

namespace placelab {

// "unknown key; expected one of a, b, c": `expected` lists the valid keys (comma-separated);
// `of_what` (" of an op") names the mapping in files that hold several kinds.
inline std::string unknown_key_rule(std::string_view expected, std::string_view of_what = {}) {
  std::string rule = "unknown key";
  rule += of_what;
  rule += "; expected one of ";
  rule += expected;
  return rule;
}

}  // namespace placelab
