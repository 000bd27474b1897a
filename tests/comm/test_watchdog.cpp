// comm::Watchdog: past its deadline it prints its line and ends the process with its exit code
// (a death test); disarmed in time, it does nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "comm/watchdog.h"

namespace mpitron::comm {
namespace {

TEST(Watchdog, PastItsDeadlineEndsTheProcessWithItsLineAndCode) {
  EXPECT_EXIT(
      {
        const Watchdog watchdog(
            0.05, [] { return std::string("rank 0: error: call stalled"); }, 3);
        std::this_thread::sleep_for(std::chrono::seconds(5));
      },
      ::testing::ExitedWithCode(3), "rank 0: error: call stalled");
}

TEST(Watchdog, DisarmedInTimeItDoesNothing) {
  bool called = false;
  {
    Watchdog watchdog(
        30.0,
        [&called] {
          called = true;
          return std::string();
        },
        3);
    watchdog.disarm();
  }
  const Watchdog destroyed_in_time(
      30.0, [] { return std::string(); }, 3);
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace mpitron::comm
