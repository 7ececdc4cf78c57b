#include "placelab/core/units.h"

#include <cmath>

#include <fmt/format.h>

namespace placelab {

std::string format_seconds(double s) {
  double a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a < 1e-6) return fmt::format("{:.1f} ns", s * 1e9);
  if (a < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (a < 1) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string format_rate(double bps) {
  if (bps >= 1e9) return fmt::format("{:.1f} GB/s", bps / 1e9);
  if (bps >= 1e6) return fmt::format("{:.1f} MB/s", bps / 1e6);
  return fmt::format("{:.0f} B/s", bps);
}

std::string format_flops(double f) {
  if (f >= 1e12) return fmt::format("{:.2f} TFLOP", f / 1e12);
  if (f >= 1e9) return fmt::format("{:.2f} GFLOP", f / 1e9);
  if (f >= 1e6) return fmt::format("{:.2f} MFLOP", f / 1e6);
  return fmt::format("{:.0f} FLOP", f);
}

}  // namespace placelab
