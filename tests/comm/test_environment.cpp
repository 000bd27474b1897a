// Environment-level behaviour in a running job: MPI errors become exceptions (on the world and
// on split communicators), configuration agreement, transfer modes and run_guarded.
#include <gtest/gtest.h>

#include "comm/configuration.h"
#include "comm/errors.h"
#include "comm/guard.h"
#include "comm/mpi_progress.h"
#include "comm/topology.h"
#include "mpi_test_main.h"

namespace mpitron::test {
namespace {

using test::world;

TEST(Environment, MpiErrorsAreReturnedAsExceptionsOnEveryCommunicator) {
  const comm::ParallelTopology topology(world(), world().size(), 1, 1);
  int value = 0;
  for (const comm::Communicator* comm :
       {&topology.world(), &topology.tp_comm(), &topology.dp_comm()}) {
    try {
      comm::check_mpi(MPI_Send(&value, 1, MPI_INT, comm->size() + 3, 0, comm->native()),
                      "MPI_Send");
      ADD_FAILURE() << "a send to a missing rank succeeded on " << comm->name();
    } catch (const comm::MpiError& error) {
      EXPECT_NE(error.code(), MPI_SUCCESS);
      EXPECT_EQ(std::string(error.what()),
                "MPI_Send failed: " + comm::mpi_error_string(error.code()));
      EXPECT_NE(std::string(error.what()).find("rank"), std::string::npos) << error.what();
    }
  }
}

// After MPI_Init mpi_yields_when_idle reads Open MPI's variable directly; the reference is the
// library's MPI_T control variable, read here (ctest's mpiexec passes --mca mpi_yield_when_idle
// 1; comm_mpi_yield_when_idle_0 and _1 check the MPI_T path against 0 and 1 before MPI_Init).
TEST(Environment, YieldWhenIdleIsWhatMpiTReads) {
  int provided = 0, index = 0, count = 0;
  ASSERT_EQ(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided), MPI_SUCCESS);
  if (MPI_T_cvar_get_index("mpi_yield_when_idle", &index) != MPI_SUCCESS) {
    MPI_T_finalize();
    GTEST_SKIP() << "the MPI library has no mpi_yield_when_idle";
  }
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  ASSERT_EQ(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count), MPI_SUCCESS);
  int value = 0;  // a C bool in Open MPI: its first byte
  ASSERT_EQ(MPI_T_cvar_read(handle, &value), MPI_SUCCESS);
  MPI_T_cvar_handle_free(&handle);
  MPI_T_finalize();
  EXPECT_EQ(comm::mpi_yields_when_idle(), (value & 0xff) != 0);
}

TEST(Environment, SameConfigurationPasses) {
  EXPECT_NO_THROW(comm::check_same_configuration(world(), "tp=2 pp=1 dp=1 seed=1 version=0.1"));
}

TEST(Environment, DifferingConfigurationNamesTheRanksOnEveryRank) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int odd = world().size() - 1;  // the last rank runs another seed
  const std::string description = world().rank() == odd ? "tp=2 seed=2" : "tp=2 seed=1";
  std::string others = world().size() == 2 ? "rank 0" : "ranks 0";
  for (int r = 1; r < odd; ++r)
    others += ", " + std::to_string(r);
  const std::string expected =
      "configuration differs between ranks: " + others + (world().size() == 2 ? " runs" : " run") +
      " \"tp=2 seed=1\"; rank " + std::to_string(odd) + " runs \"tp=2 seed=2\"";
  try {
    comm::check_same_configuration(world(), description);
    ADD_FAILURE() << "differing configurations were accepted";
  } catch (const comm::ConfigError& error) {
    EXPECT_EQ(std::string(error.what()), expected);
  }
}

// A long description is shown from a little before its first difference, so the differing
// setting is in the message however far into the description it sits.
TEST(Environment, DifferingLongConfigurationsShowWhereTheyDiffer) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::string common(300, 'x');
  const bool odd = world().rank() == world().size() - 1;
  try {
    comm::check_same_configuration(world(), common + (odd ? "\"steps\":3}" : "\"steps\":2}"));
    ADD_FAILURE() << "differing configurations were accepted";
  } catch (const comm::ConfigError& error) {
    // 40 characters before the first difference, the digit: 32 x and "steps":.
    const std::string shown = "\"..." + std::string(32, 'x') + "\"steps\":";
    EXPECT_NE(std::string(error.what()).find(shown + "2}\""), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(shown + "3}\""), std::string::npos) << error.what();
  }
}

TEST(Environment, AgreementEndsEveryRankWhenOneRankRejectsItsOptions) {
  const int bad = world().size() - 1;  // the last rank's setup fails
  const auto setup = [&]() -> std::string {
    if (world().rank() == bad) throw comm::ConfigError("--hidden must be >= 1, got 0");
    return "tp=1";
  };
  try {
    comm::agree_on_configuration(world(), setup);
    ADD_FAILURE() << "a rejected configuration was accepted";
  } catch (const comm::ConfigError& error) {
    EXPECT_EQ(std::string(error.what()),
              world().rank() == bad ? "--hidden must be >= 1, got 0"
                                    : "rank " + std::to_string(bad) +
                                          " rejected the configuration (see its error line)");
  }
  EXPECT_EQ(comm::agree_on_configuration(world(), [] { return std::string("tp=1"); }), "tp=1");
}

TEST(Environment, TransferModes) {
  comm::Communicator& w = world();
  const comm::TransferMode mode = w.transfer_mode();
  EXPECT_EQ(comm::parse_transfer_mode("auto"), comm::TransferMode::automatic);
  EXPECT_EQ(comm::parse_transfer_mode("staged"), comm::TransferMode::staged);
  EXPECT_EQ(comm::parse_transfer_mode("direct"), comm::TransferMode::direct);
  EXPECT_THROW(comm::parse_transfer_mode("fast"), std::invalid_argument);
  w.set_transfer_mode(comm::TransferMode::staged);
  EXPECT_FALSE(w.direct_transfers());
  if (!w.mpi_cuda_aware()) {
    EXPECT_THROW(w.set_transfer_mode(comm::TransferMode::direct), comm::ConfigError);
    w.set_transfer_mode(comm::TransferMode::automatic);
    EXPECT_FALSE(w.direct_transfers());
  }
  w.set_transfer_mode(mode);
}

TEST(Environment, RunGuardedReturnsTheBodysCodeOrTwoForConfigErrors) {
  EXPECT_EQ(comm::run_guarded(world(), [] { return 7; }), 7);
  ::testing::internal::CaptureStderr();
  const int code =
      comm::run_guarded(world(), []() -> int { throw comm::ConfigError("bad sizes"); });
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, comm::kConfigErrorExitCode);
  EXPECT_EQ(printed, "rank " + std::to_string(world().rank()) + ": error: bad sizes\n");
}

TEST(Environment, InvalidSettingsAreRejected) {
  comm::Communicator& w = world();
  EXPECT_THROW(w.set_timeout(0), std::invalid_argument);
  EXPECT_THROW(w.set_timeout(-1), std::invalid_argument);
  EXPECT_THROW(w.set_max_message_elements(0), std::invalid_argument);
  EXPECT_THROW(w.global_rank(w.size()), std::out_of_range);
  EXPECT_EQ(w.global_rank(w.rank()), w.world_rank());
  EXPECT_THROW(comm::Communicator().rank(), std::logic_error);
}

}  // namespace
}  // namespace mpitron::test
