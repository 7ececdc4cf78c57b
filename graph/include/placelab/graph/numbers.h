// Reading a number that is the whole of a text — a field value, a name's suffix, a CLI argument —
// the one way every loader does it.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace placelab {

// The T (an integer or floating-point type) that is all of `text`, as std::from_chars reads it (no
// leading '+' or spaces, no locale), or nullopt when `text` is empty, holds anything else, or is
// out of T's range.
template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace placelab
