// What every fuzz target in this folder shares: the rule that InputError is the expected outcome
// of bad input and anything else escaping a loader is a finding. libFuzzer saves the input of an
// abort as a crash artifact; the message printed first names the exception.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <typeinfo>

#include "placelab/core/error.h"

namespace placelab::fuzz {

// Runs `load`. InputError is swallowed (the loader did its job); any other exception — a
// PLACELAB_CHECK failure (placelab::Error), std::out_of_range, a library's own exception — is
// printed and aborts, which libFuzzer reports as a crash with the input saved.
template <typename F>
void expect_input_error_or_success(F&& load) {
  try {
    load();
  } catch (const InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "placelab fuzz: %s escaped the loader: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "placelab fuzz: a non-std exception escaped the loader\n");
    std::abort();
  }
}

// A property of a successful load that failed (a round trip that does not return what it read).
[[noreturn]] inline void finding(std::string_view what) {
  std::fprintf(stderr, "placelab fuzz: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

inline std::string_view as_text(const uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace placelab::fuzz
