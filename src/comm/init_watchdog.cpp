#include "comm/init_watchdog.h"

#include <unistd.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "comm/communicator.h"
#include "comm/errors.h"

namespace mpitron::comm {

namespace {

constexpr std::array<const char*, 13> kRankVariables{"OMPI_COMM_WORLD_RANK",
                                                     "OMPI_COMM_WORLD_LOCAL_RANK",
                                                     "OMPI_COMM_WORLD_SIZE",
                                                     "PMIX_RANK",
                                                     "PMI_RANK",
                                                     "PMI_SIZE",
                                                     "PMI_LOCAL_RANK",
                                                     "MPI_LOCALRANKID",
                                                     "SLURM_PROCID",
                                                     "SLURM_LOCALID",
                                                     "SLURM_STEP_NUM_TASKS",
                                                     "SLURM_NTASKS",
                                                     "SLURMD_NODENAME"};
constexpr const char* kTimeoutVariable = "MPITRON_INIT_TIMEOUT";

double parse_seconds(const std::string& text, std::string_view source) {
  double seconds = 0.0;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (status != std::errc() || end != text.data() + text.size() || !(seconds > 0.0) ||
      seconds > Communicator::kMaxTimeoutSeconds) {
    std::ostringstream message;
    message << source << " must be a number of seconds in (0, " << Communicator::kMaxTimeoutSeconds
            << "], got '" << text << "'";
    throw ConfigError(message.str());
  }
  return seconds;
}

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "?";
  return name.data();
}

}  // namespace

double resolve_init_timeout(const std::optional<std::string>& flag,
                            const EnvironmentMap& environment) {
  if (flag) return parse_seconds(*flag, "--init-timeout");
  const auto variable = environment.find(kTimeoutVariable);
  if (variable != environment.end()) return parse_seconds(variable->second, kTimeoutVariable);
  return kDefaultInitTimeoutSeconds;
}

EnvironmentMap rank_variables(const EnvironmentMap& environment) {
  EnvironmentMap seen;
  for (const char* name : kRankVariables) {
    const auto variable = environment.find(name);
    if (variable != environment.end()) seen.insert(*variable);
  }
  return seen;
}

EnvironmentMap init_environment() {
  EnvironmentMap environment;
  for (const char* name : kRankVariables) {
    if (const char* value = std::getenv(name)) environment.emplace(name, value);
  }
  if (const char* value = std::getenv(kTimeoutVariable))
    environment.emplace(kTimeoutVariable, value);
  return environment;
}

std::string init_timeout_message(double seconds, std::string_view host, long pid,
                                 const EnvironmentMap& rank_vars) {
  std::ostringstream line;
  line << "mpitron: error: MPI_Init did not complete within " << seconds << " s on host " << host
       << " (pid " << pid << "; rank variables:";
  for (const auto& [name, value] : rank_vars)
    line << " " << name << "=" << value;
  if (rank_vars.empty()) line << " none (not started by an MPI launcher?)";
  line << "): the launcher could not start the job (unreachable host, firewall, mismatched MPI); "
          "raise --init-timeout or MPITRON_INIT_TIMEOUT if start-up is just slow";
  return line.str();
}

InitWatchdog::InitWatchdog(double seconds)
    : Watchdog(
          seconds,
          [seconds] {
            return init_timeout_message(seconds, host_name(), static_cast<long>(getpid()),
                                        rank_variables(init_environment()));
          },
          kInitTimeoutExitCode) {}

}  // namespace mpitron::comm
