#include "placelab/core/numbers.h"

#include <cstdio>

#include "placelab/core/error.h"

namespace placelab {

std::string format_exact(double value) {
  if (value == 0) value = 0;  // -0 and 0 print alike
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  PLACELAB_CHECK(ec == std::errc{}) << "to_chars failed for " << value;
  return std::string(buf, end);
}

std::string format_6g(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", value);
  return buf;
}

std::string excerpt(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t cut = max_bytes < 3 ? 0 : max_bytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  std::string out(text.substr(0, cut));
  out += "...";
  return out;
}

}  // namespace placelab
