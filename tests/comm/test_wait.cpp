// Pure parts of waiting and reporting: the backoff schedule, the deadline line, the
// configuration hash and the names of enums; no MPI involved.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "comm/collectives.h"
#include "comm/configuration.h"
#include "comm/guard.h"
#include "comm/mpi_progress.h"
#include "comm/stall_inspector.h"
#include "comm/wait.h"

namespace mpitron::comm {
namespace {

using std::chrono::nanoseconds;

TEST(Backoff, SpinsFor20usYieldsUntilOneMillisecondThenSleepsASixteenthOfTheWait) {
  using std::chrono::microseconds;
  EXPECT_TRUE(Backoff::spins(nanoseconds(0)));
  EXPECT_TRUE(Backoff::spins(microseconds(19)));
  EXPECT_FALSE(Backoff::spins(microseconds(20)));
  EXPECT_EQ(Backoff::next(nanoseconds(0)), nanoseconds(0));
  EXPECT_EQ(Backoff::next(microseconds(999)), nanoseconds(0));
  EXPECT_EQ(Backoff::next(microseconds(1000)), microseconds(62) + nanoseconds(500));
  EXPECT_EQ(Backoff::next(microseconds(8000)), microseconds(500));
  EXPECT_EQ(Backoff::next(microseconds(16000)), microseconds(1000));
  EXPECT_EQ(Backoff::next(std::chrono::seconds(100)), microseconds(1000));
  EXPECT_EQ(Backoff::kFirstSleep, microseconds(50));
}

TEST(Backoff, LargeTransfersYieldLongerBeforeSleeping) {
  using std::chrono::microseconds;
  EXPECT_EQ(Backoff().yield_for(), Backoff::kYieldFor);
  EXPECT_EQ(Backoff(4096).yield_for(), Backoff::kYieldFor);
  EXPECT_EQ(Backoff(std::size_t{16} << 20).yield_for(), nanoseconds(16777216));
  EXPECT_EQ(Backoff::next(microseconds(16000), nanoseconds(16777216)), nanoseconds(0));
  EXPECT_EQ(Backoff::next(microseconds(16800), nanoseconds(16777216)), microseconds(1000));
}

// The reference is the setting Open MPI reads: mpirun passes `--mca mpi_yield_when_idle` on as
// OMPI_MCA_mpi_yield_when_idle, and the ctests run this program with it set to 0, to 1 and
// unset (Open MPI's default is 0 on a node that is not oversubscribed; this test runs alone).
TEST(MpiProgress, YieldWhenIdleIsTheLibrarysSetting) {
#ifndef OPEN_MPI
  GTEST_SKIP() << "only Open MPI has mpi_yield_when_idle";
#endif
  const char* setting = std::getenv("OMPI_MCA_mpi_yield_when_idle");
  EXPECT_EQ(mpi_yields_when_idle(), setting != nullptr && std::string(setting) != "0");
}

TEST(DeadlineMessage, PointToPoint) {
  DeadlineReport report{.rank = 3,
                        .what = "recv from",
                        .peer = 1,
                        .communicator = "pp",
                        .members = {1, 3},
                        .bytes = 16384,
                        .seconds = 5,
                        .stalled = ""};
  EXPECT_EQ(deadline_message(report),
            "rank 3: recv from rank 1 on the pp communicator (16384 bytes) did not complete "
            "within 5 s");
  report.seconds = 0.25;
  EXPECT_EQ(deadline_message(report),
            "rank 3: recv from rank 1 on the pp communicator (16384 bytes) did not complete "
            "within 0.25 s");
  report.stalled = "rank 1 did not answer";
  EXPECT_EQ(deadline_message(report),
            "rank 3: recv from rank 1 on the pp communicator (16384 bytes) did not complete "
            "within 0.25 s; rank 1 did not answer");
}

TEST(StallSummary, CollectiveSortsPeersByWhatTheyAnswered) {
  const std::string doing = "all_reduce on the tp communicator (64 bytes)";
  EXPECT_EQ(
      stall_summary(2, {0, 1, 3},
                    {doing, "recv from rank 3 on the pp communicator (8 bytes)", std::nullopt},
                    doing, true),
      "arrived: ranks 0, 2; not arrived: rank 1 (waiting in recv from rank 3 on the pp "
      "communicator (8 bytes)), rank 3 (no answer: computing, stuck outside mpitron's "
      "communication waits, or gone)");
  EXPECT_EQ(stall_summary(1, {0}, {doing}, doing, true),
            "arrived: ranks 0, 1; not arrived: none (every rank is inside it: one stopped "
            "progressing, e.g. a stopped or starved process, or the network failed)");
}

TEST(StallSummary, PointToPointNamesThePeer) {
  EXPECT_EQ(
      stall_summary(0, {1}, {"barrier on the world communicator (0 bytes)"}, "send to", false),
      "rank 1 is waiting in barrier on the world communicator (0 bytes)");
  EXPECT_EQ(stall_summary(0, {1}, {std::nullopt}, "send to", false),
            "rank 1 did not answer (computing, stuck outside mpitron's communication waits, or "
            "gone)");
}

TEST(DeadlineMessage, CollectiveListsAtMostSixteenRanks) {
  DeadlineReport report{.rank = 0,
                        .what = "all_reduce",
                        .communicator = "tp",
                        .members = {0, 1},
                        .bytes = 64,
                        .seconds = 120,
                        .stalled = ""};
  EXPECT_EQ(deadline_message(report),
            "rank 0: all_reduce on the tp communicator of ranks 0, 1 (64 bytes) did not "
            "complete within 120 s");
  report.communicator = "world";
  report.members.clear();
  for (int r = 0; r < 20; ++r)
    report.members.push_back(r);
  EXPECT_EQ(deadline_message(report),
            "rank 0: all_reduce on the world communicator of ranks 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "
            "10, 11, 12, 13, 14, 15, ... (64 bytes) did not complete within 120 s");
}

TEST(Fnv1a64, PublishedTestVectors) {
  EXPECT_EQ(fnv1a_64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a_64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a_64("foobar"), 0x85944171f73967e8ULL);
  EXPECT_NE(fnv1a_64("tp=2 seed=1"), fnv1a_64("tp=2 seed=2"));
}

TEST(Names, EnumsAndErrorLines) {
  EXPECT_EQ(to_string(ReduceOp::sum), "sum");
  EXPECT_EQ(to_string(ReduceOp::avg), "avg");
  EXPECT_EQ(to_string(ReduceOp::max), "max");
  EXPECT_EQ(to_string(ReduceOp::min), "min");
  EXPECT_EQ(to_string(TransferMode::automatic), "auto");
  EXPECT_EQ(parse_transfer_mode(to_string(TransferMode::staged)), TransferMode::staged);
  EXPECT_EQ(error_line(4, "oops"), "rank 4: error: oops");
}

}  // namespace
}  // namespace mpitron::comm
