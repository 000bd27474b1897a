// Checking error messages: the message of an expected exception, and a matcher for its parts.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace mpitron::test {

/// Matches a message containing every one of `parts` (e.g. the op or file name and the
/// offending values).
template <class... Parts>
auto names(const Parts&... parts) {
  return ::testing::AllOf(::testing::HasSubstr(std::string(parts))...);
}

/// The message of the `Exception` that `fn` throws; fails the test when it throws nothing (any
/// other exception type escapes and fails the test too).
template <class Exception, class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const Exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception thrown";
  return "";
}

}  // namespace mpitron::test
