#include "comm/launch.h"

#include <array>
#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "comm/errors.h"

namespace mpitron::comm {

namespace {

constexpr std::string_view kSlurmStepId = "SLURM_STEP_ID";

// Every variable launcher_claim and launcher_rank may read.
constexpr std::array<std::string_view, 9> kLauncherVariables{
    "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", kSlurmStepId, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",  "SLURM_PROCID"};

// The value of `name` when it is an integer >= `minimum` (the whole text), else nullopt.
std::optional<int> value_at_least(const EnvironmentMap& environment, std::string_view name,
                                  int minimum) {
  const auto found = environment.find(name);
  if (found == environment.end()) return std::nullopt;
  const std::string& text = found->second;
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value < minimum) {
    return std::nullopt;
  }
  return value;
}

std::optional<int> positive_value(const EnvironmentMap& environment, std::string_view name) {
  return value_at_least(environment, name, 1);
}

std::optional<LauncherClaim> first_claim(const EnvironmentMap& environment,
                                         std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    if (const std::optional<int> tasks = positive_value(environment, name)) {
      return LauncherClaim{std::string(name), *tasks};
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<LauncherClaim> launcher_claim(const EnvironmentMap& environment) {
  if (auto claim = first_claim(environment, {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})) return claim;
  if (!environment.contains(kSlurmStepId)) return std::nullopt;
  return first_claim(environment, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
}

std::optional<std::string> launch_mismatch(const EnvironmentMap& environment, int mpi_world_size) {
  if (mpi_world_size != 1) return std::nullopt;
  const std::optional<LauncherClaim> claim = launcher_claim(environment);
  if (!claim || claim->tasks == 1) return std::nullopt;
  const std::string tasks = std::to_string(claim->tasks);
  return "the launcher started " + tasks + " tasks (" + claim->variable + "=" + tasks +
         ") but MPI sees a world of 1: every task started as its own singleton, usually because "
         "the launcher's process-management interface does not match the MPI library's. Launch "
         "with `srun --mpi=pmix -n " +
         tasks + " ...` (see `srun --mpi=list`) or with `mpirun -np " + tasks + " ...`";
}

int launcher_rank(const EnvironmentMap& environment) {
  for (std::string_view name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    if (const std::optional<int> rank = value_at_least(environment, name, 0)) return *rank;
  }
  if (!environment.contains(kSlurmStepId)) return 0;
  return value_at_least(environment, "SLURM_PROCID", 0).value_or(0);
}

bool launched_alone(const EnvironmentMap& environment) {
  const std::optional<LauncherClaim> claim = launcher_claim(environment);
  return !claim || claim->tasks == 1;
}

EnvironmentMap launcher_environment() {
  EnvironmentMap environment;
  for (std::string_view name : kLauncherVariables) {
    const std::string key(name);
    if (const char* value = std::getenv(key.c_str())) environment.emplace(key, value);
  }
  return environment;
}

void check_launch_consistency(const Communicator& world) {
  if (auto message = launch_mismatch(launcher_environment(), world.size())) {
    throw ConfigError(*message);
  }
}

}  // namespace mpitron::comm
