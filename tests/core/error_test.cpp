// PLACELAB_CHECK: a broken invariant throws placelab::Error naming the condition and its context
// (core/error.h).
#include "placelab/core/error.h"

#include <string>

#include <gtest/gtest.h>

namespace placelab {
namespace {

TEST(Check, ThrowsWithContext) {
  try {
    int x = 3;
    PLACELAB_CHECK(x == 4) << "x is " << x;
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("check failed: x == 4: x is 3"), std::string::npos);
  }
}

}  // namespace
}  // namespace placelab
