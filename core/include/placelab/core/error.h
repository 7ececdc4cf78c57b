// Errors and invariant checks shared by every placelab library.
// Input at a boundary (files, CLI values) throws InputError with "file:line: field = value: rule";
// broken internal invariants throw from PLACELAB_CHECK. Only apps/ catches and picks exit codes.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace placelab {

// Base of every exception placelab throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input (a file, a field, a CLI value). The message names where and what was expected;
// apps/ maps it to exit status 2.
class InputError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// Collects the streamed context of a failed PLACELAB_CHECK and throws when the statement ends.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure() noexcept(false);
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};
}  // namespace detail

}  // namespace placelab

// PLACELAB_CHECK(cond) << "context " << value; — an invariant, on in every build; throws
// placelab::Error naming the file, line, condition and context. Never for user input.
#define PLACELAB_CHECK(cond) \
  if (cond) {              \
  } else                   \
    ::placelab::detail::CheckFailure(__FILE__, __LINE__, #cond)
