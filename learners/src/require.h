// Private: the check every learner Options::validate() is made of, so that all of them word a
// broken rule the same way — "<owner>.<field> = <value>: <rule>", the InputError format of
// STYLE.md that the scenario reader prefixes with file:line.
#pragma once

#include <string>
#include <string_view>

#include "placelab/core/error.h"
#include "placelab/core/numbers.h"  // format_6g: a number as these messages show it ("0.1", "1e-08")

namespace placelab::detail {

inline void require(bool ok, std::string_view owner, std::string_view field, const std::string& value,
                    std::string_view rule) {
  if (!ok) throw InputError(std::string(owner) + "." + std::string(field) + " = " + value + ": " + std::string(rule));
}

// `options` after its validate(owner...) passed: for constructors that check their options before
// a base class or member reads them.
template <typename Options, typename... Owner>
const Options& validated(const Options& options, const Owner&... owner) {
  options.validate(owner...);
  return options;
}

}  // namespace placelab::detail
