// The one wording of a key that a keyed file — graph or placement JSON, machine, calibration or
// scenario YAML — does not know, so that a typo reads the same in every file a user writes; and
// the one way a message lists names ("a, b, c").
#pragma once

#include <string>
#include <string_view>

namespace placelab {

// "a, b, c": the names (strings or string views, any range of them) a message offers, joined by
// `separator`.
template <typename Names>
std::string join_names(const Names& names, std::string_view separator = ", ") {
  std::string out;
  for (const auto& name : names) {
    if (!out.empty()) out += separator;
    out += std::string_view(name);
  }
  return out;
}

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
