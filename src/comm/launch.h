// Launch sanity: does the launcher's idea of the job size agree with MPI's?
//
// When a launcher and the MPI library speak different process-management interfaces (PMI), each
// task of `srun -n 4` calls MPI_Init as a separate singleton: four independent rank-0 copies of
// the job run side by side and nothing fails. This check turns that into one clear error. The
// decision is a pure function of an environment map, so it is unit-tested without launching.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "comm/communicator.h"

namespace mpitron::comm {

/// Environment variables, name -> value (the process environment, or a test's stand-in).
using EnvironmentMap = std::map<std::string, std::string, std::less<>>;

/// The number of tasks a launcher says it started, and the variable that says so.
struct LauncherClaim {
  std::string variable;  ///< e.g. "SLURM_STEP_NUM_TASKS"
  int tasks = 0;         ///< a positive task count
  bool operator==(const LauncherClaim&) const = default;
};

/// The job size the launcher of this process claims, from the first of these that is set to a
/// positive integer:
/// - OMPI_COMM_WORLD_SIZE (Open MPI's mpirun / orted),
/// - PMI_SIZE (PMI-1/PMI-2 launchers: MPICH's Hydra, `srun --mpi=pmi2`),
/// - inside an srun step only (SLURM_STEP_ID is set): SLURM_STEP_NUM_TASKS, else SLURM_NTASKS.
/// Outside a step (the shell of `salloc`, an `sbatch` batch script) SLURM_NTASKS describes the
/// allocation, not how this process was started, so it is ignored there: a plain `mpirun` in an
/// allocation is a normal launch. Values that are not positive integers are ignored. Returns
/// nullopt when no launcher variable applies (e.g. a program started by hand).
std::optional<LauncherClaim> launcher_claim(const EnvironmentMap& environment);

/// The error text when the launch is inconsistent, nullopt when it is fine. Inconsistent means
/// MPI's world size is 1 while `launcher_claim` says N > 1 tasks: every task then started as a
/// singleton. The text names the variable and N and suggests `srun --mpi=pmix` or `mpirun -np N`.
/// Any world size other than 1 is accepted as it is (MPI knows best once it sees several ranks).
std::optional<std::string> launch_mismatch(const EnvironmentMap& environment, int mpi_world_size);

/// The rank the launcher gave this process, read without MPI (so a program can decide which rank
/// prints before, or instead of, starting MPI): the first of these that is set to a non-negative
/// integer: OMPI_COMM_WORLD_RANK (Open MPI), PMI_RANK (PMI-1/PMI-2), PMIX_RANK (PMIx), and inside
/// an srun step only (SLURM_STEP_ID is set), SLURM_PROCID. Returns 0 when none applies (a
/// program started by hand is rank 0 of its world of one).
int launcher_rank(const EnvironmentMap& environment);

/// True when no launcher variable says that this process has company: `launcher_claim` is
/// nullopt (started by hand, or a shell of salloc/sbatch) or claims 1 task. Such a process
/// can report bad arguments without asking any other rank.
bool launched_alone(const EnvironmentMap& environment);

/// The variables `launcher_claim` and `launcher_rank` read, taken from this process's environment
/// (getenv); unset variables are absent from the map.
EnvironmentMap launcher_environment();

/// Call once, right after MPI starts and before any communication. Throws ConfigError with
/// `launch_mismatch`'s text when `world` has size 1 but the launcher started several tasks; each
/// of those tasks is its own world of one, so each reports and exits without waiting on others.
void check_launch_consistency(const Communicator& world);

}  // namespace mpitron::comm
