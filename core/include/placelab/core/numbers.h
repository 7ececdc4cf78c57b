// Reading a number that is the whole of a text — a field value, a name's suffix, a CLI argument —
// the one way every loader does it; and the ways messages print numbers and values back.
#pragma once

#include <charconv>
#include <cstddef>
#include <optional>
#include <string>
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

// The shortest text that reads back to exactly `value` (std::to_chars); integral values print
// without a fraction, so byte counts held as doubles stay readable; NaN and infinities print as
// "nan", "inf". For values quoted from a file.
std::string format_exact(double value);

// `value` to 6 significant digits (printf's %.6g): for figures derived from a file's values.
std::string format_6g(double value);

// What a message shows of a value it quotes: all of `text` when it is at most `max_bytes` long,
// else its first max_bytes - 3 bytes (cut on a UTF-8 boundary) and "...". A file that is one long
// value, or no file of ours at all, is named, not printed back.
std::string excerpt(std::string_view text, std::size_t max_bytes = 60);

}  // namespace placelab
