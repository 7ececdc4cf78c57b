// Private: exact JSON encodings of learner and trainer state. Doubles are stored as their IEEE bit
// patterns (JSON numbers would round-trip too, but bit patterns also carry inf and NaN and leave
// no doubt), RNG state as the standard text form of the engine.
#pragma once

#include <bit>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placelab/graph/error.h"
#include "placelab/learners/policy.h"

namespace placelab::detail {

inline nlohmann::json bits(double x) { return std::bit_cast<uint64_t>(x); }
inline double unbits(const nlohmann::json& j) { return std::bit_cast<double>(j.get<uint64_t>()); }

inline nlohmann::json bits(const std::vector<double>& xs) {
  nlohmann::json out = nlohmann::json::array();
  for (double x : xs) out.push_back(std::bit_cast<uint64_t>(x));
  return out;
}
inline std::vector<double> unbits_vector(const nlohmann::json& j) {
  std::vector<double> out;
  out.reserve(j.size());
  for (const auto& x : j) out.push_back(std::bit_cast<double>(x.get<uint64_t>()));
  return out;
}

inline std::string rng_to_string(const Rng& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}
inline Rng rng_from_string(const std::string& text) {
  std::istringstream in(text);
  Rng rng;
  if (!(in >> rng)) throw InputError("state: rng: malformed engine state");
  return rng;
}

// Parses JSON text, turning a parse error into InputError that names `what`.
inline nlohmann::json parse_state(const std::string& text, const char* what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string(what) + ": not valid JSON: " + e.what());
  }
}

}  // namespace placelab::detail
