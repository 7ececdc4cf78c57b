#include "placelab/core/error.h"

namespace placelab::detail {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << ": ";
}

CheckFailure::~CheckFailure() noexcept(false) { throw Error(stream_.str()); }

}  // namespace placelab::detail
