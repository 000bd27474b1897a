// The MPI_Init watchdog's pure parts: where the deadline comes from, which variables are named,
// the line it prints. The watchdog itself is run for real by the init_watchdog_* ctests.
#include <gtest/gtest.h>

#include "comm/errors.h"
#include "comm/init_watchdog.h"

namespace mpitron::comm {
namespace {

TEST(InitTimeout, FlagBeatsEnvironmentBeatsDefault) {
  const EnvironmentMap with_variable{{"MPITRON_INIT_TIMEOUT", "30"}};
  EXPECT_EQ(resolve_init_timeout(std::nullopt, {}), 120.0);
  EXPECT_EQ(resolve_init_timeout(std::nullopt, with_variable), 30.0);
  EXPECT_EQ(resolve_init_timeout("2.5", with_variable), 2.5);
}

TEST(InitTimeout, RejectsWhatIsNotAPositiveNumberOfSeconds) {
  const auto message_of = [](const std::optional<std::string>& flag, const EnvironmentMap& env) {
    try {
      resolve_init_timeout(flag, env);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of("0", {}),
            "--init-timeout must be a number of seconds in (0, 1e+06], got '0'");
  EXPECT_EQ(message_of("10s", {}),
            "--init-timeout must be a number of seconds in (0, 1e+06], got '10s'");
  EXPECT_EQ(message_of("2e6", {}),
            "--init-timeout must be a number of seconds in (0, 1e+06], got '2e6'");
  EXPECT_EQ(message_of(std::nullopt, {{"MPITRON_INIT_TIMEOUT", "nan"}}),
            "MPITRON_INIT_TIMEOUT must be a number of seconds in (0, 1e+06], got 'nan'");
}

TEST(InitTimeout, MessageNamesHostPidAndTheRankVariablesSeen) {
  const EnvironmentMap environment{{"SLURM_PROCID", "5"}, {"HOME", "/root"}, {"PMI_SIZE", "8"}};
  const EnvironmentMap seen = rank_variables(environment);
  EXPECT_EQ(seen, (EnvironmentMap{{"PMI_SIZE", "8"}, {"SLURM_PROCID", "5"}}));
  EXPECT_EQ(init_timeout_message(5, "node3", 4711, seen),
            "mpitron: error: MPI_Init did not complete within 5 s on host node3 (pid 4711; rank "
            "variables: PMI_SIZE=8 SLURM_PROCID=5): the launcher could not start the job "
            "(unreachable host, firewall, mismatched MPI); raise --init-timeout or "
            "MPITRON_INIT_TIMEOUT if start-up is just slow");
  EXPECT_NE(init_timeout_message(5, "node3", 1, {})
                .find("rank variables: none (not started by an MPI launcher?)"),
            std::string::npos);
}

}  // namespace
}  // namespace mpitron::comm
