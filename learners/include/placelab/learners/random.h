// The random numbers of every learner. The engine and both draws below are fixed algorithms (not
// std::uniform_real_distribution or std::normal_distribution, whose algorithms differ between
// standard libraries), so a seed gives the same stream on every platform, and the engine's state
// serialises exactly (operator<< / >>): what makes a checkpointed run resume bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace placelab {

using Rng = std::mt19937_64;

// A uniform double in [0, 1) from 53 random bits.
inline double uniform01(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// A standard normal draw (Box–Muller, the cosine branch; two uniforms per draw, so the stream
// position never depends on an earlier draw's spare value).
inline double standard_normal(Rng& rng) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1]: log is finite
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace placelab
