// Private: exact JSON encodings of learner and trainer state. Doubles are stored as their IEEE bit
// patterns (JSON numbers would round-trip too, but bit patterns also carry inf and NaN and leave
// no doubt), RNG state as the standard text form of the engine.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placelab/core/error.h"
#include "placelab/learners/learner.h"
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

// A float vector as base64 of its little-endian IEEE bytes: exact, and 5.3 characters a value —
// the neural learners' millions of weights and Adam moments stay a few tens of MB in a checkpoint.
inline std::string floats_to_base64(const float* data, std::size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(n * 4, '\0');
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(data[i]);
    for (int k = 0; k < 4; ++k) bytes[4 * i + static_cast<std::size_t>(k)] = static_cast<char>((u >> (8 * k)) & 0xFF);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = 0;
    const std::size_t len = std::min<std::size_t>(3, bytes.size() - i);
    for (std::size_t k = 0; k < len; ++k) chunk |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + k])) << (16 - 8 * k);
    for (std::size_t k = 0; k < 4; ++k) out += k <= len ? kAlphabet[(chunk >> (18 - 6 * k)) & 0x3F] : '=';
  }
  return out;
}
// The inverse; throws InputError naming `what` on malformed text.
inline std::vector<float> floats_from_base64(const std::string& text, const char* what) {
  const auto value = [&](char c) -> uint32_t {
    if (c >= 'A' && c <= 'Z') return static_cast<uint32_t>(c - 'A');
    if (c >= 'a' && c <= 'z') return static_cast<uint32_t>(c - 'a' + 26);
    if (c >= '0' && c <= '9') return static_cast<uint32_t>(c - '0' + 52);
    if (c == '+') return 62;
    if (c == '/') return 63;
    throw InputError(std::string(what) + ": not base64");
  };
  if (text.size() % 4 != 0) throw InputError(std::string(what) + ": not base64");
  std::string bytes;
  bytes.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    uint32_t chunk = 0;
    int len = 3;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=') {
        if (i + 4 != text.size() || k < 2) throw InputError(std::string(what) + ": not base64");
        len = std::min(len, static_cast<int>(k) - 1);
        continue;
      }
      chunk |= value(c) << (18 - 6 * k);
    }
    for (int k = 0; k < len; ++k) bytes += static_cast<char>((chunk >> (16 - 8 * k)) & 0xFF);
  }
  if (bytes.size() % 4 != 0) throw InputError(std::string(what) + ": not a whole number of floats");
  std::vector<float> out(bytes.size() / 4);
  for (std::size_t i = 0; i < out.size(); ++i) {
    uint32_t u = 0;
    for (int k = 0; k < 4; ++k) u |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[4 * i + static_cast<std::size_t>(k)])) << (8 * k);
    out[i] = std::bit_cast<float>(u);
  }
  return out;
}

// Parses JSON text, turning a parse error into InputError that names `what`.
inline nlohmann::json parse_state(const std::string& text, const char* what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string(what) + ": not valid JSON: " + e.what());
  }
}

// The fields every learner's state starts with: whose state it is and over which search space.
inline nlohmann::json state_header(const Learner& learner) {
  nlohmann::json j;
  j["learner"] = learner.name();
  j["num_groups"] = learner.space().num_groups;
  j["devices"] = learner.space().devices;
  return j;
}

// Throws InputError unless `j` (inside a try that turns json errors into InputError) is a state of
// `learner` over its search space: a state never loads into another learner or space.
inline void check_state_header(const nlohmann::json& j, const Learner& learner) {
  if (j.at("learner").get<std::string>() != learner.name())
    throw InputError("learner state: learner = \"" + j.at("learner").get<std::string>() + "\": must be \"" +
                     learner.name() + "\"");
  if (j.at("num_groups").get<std::size_t>() != learner.space().num_groups ||
      j.at("devices").get<std::vector<DeviceId>>() != learner.space().devices)
    throw InputError("learner state: num_groups/devices: must match the learner's search space");
}

// The group placement stored under `key`, checked: one device of the search space per group.
inline Placement space_placement(const nlohmann::json& j, const char* key, const SearchSpace& space) {
  Placement p = j.at(key).get<Placement>();
  if (p.size() != space.num_groups) throw InputError(std::string("learner state: ") + key + ": must place every group");
  for (DeviceId d : p)
    if (std::find(space.devices.begin(), space.devices.end(), d) == space.devices.end())
      throw InputError(std::string("learner state: ") + key + ": device " + std::to_string(d) +
                       " is not in the search space");
  return p;
}

}  // namespace placelab::detail
