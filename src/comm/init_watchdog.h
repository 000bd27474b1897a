// A watchdog over MPI_Init: a rank whose MPI_Init never returns (the launcher cannot wire the
// job up, a host is unreachable) ends with one line naming its host and the rank variables it
// saw, instead of leaving the job hanging.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "comm/launch.h"
#include "comm/watchdog.h"

namespace mpitron::comm {

/// MPI_Init's deadline when neither --init-timeout nor MPITRON_INIT_TIMEOUT is given, in seconds.
inline constexpr double kDefaultInitTimeoutSeconds = 120.0;
/// Exit code of a process whose MPI_Init passed its deadline.
inline constexpr int kInitTimeoutExitCode = 4;

/// The MPI_Init deadline in seconds: `flag` (the text of --init-timeout) when given, else
/// MPITRON_INIT_TIMEOUT from `environment`, else kDefaultInitTimeoutSeconds. Throws ConfigError
/// "--init-timeout must be a number of seconds in (0, 1e+06], got 'x'" (or the same for
/// MPITRON_INIT_TIMEOUT) for text that is not such a number.
double resolve_init_timeout(const std::optional<std::string>& flag,
                            const EnvironmentMap& environment);

/// The rank and size variables launchers set (Open MPI, PMI/PMIx, Slurm, MPICH's Hydra) that are
/// present in `environment`.
EnvironmentMap rank_variables(const EnvironmentMap& environment);

/// The process environment's variables that resolve_init_timeout and rank_variables read.
EnvironmentMap init_environment();

/// One line, e.g. "mpitron: error: MPI_Init did not complete within 5 s on host node3 (pid 4711;
/// rank variables: OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2): the launcher could not start
/// the job (unreachable host, firewall, mismatched MPI); raise --init-timeout or
/// MPITRON_INIT_TIMEOUT if start-up is just slow". Without rank variables: "rank variables:
/// none (not started by an MPI launcher?)".
std::string init_timeout_message(double seconds, std::string_view host, long pid,
                                 const EnvironmentMap& rank_vars);

/// A Watchdog (watchdog.h) over MPI_Init: when `seconds` pass before `disarm()`, it prints
/// init_timeout_message for this process to stderr and ends the process with
/// kInitTimeoutExitCode (MPI is half started, nothing can be cleaned up).
class InitWatchdog : public Watchdog {
 public:
  explicit InitWatchdog(double seconds);
};

}  // namespace mpitron::comm
