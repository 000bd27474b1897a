// The rule that chooses how the CPU kernels' idle OpenMP threads wait between parallel loops:
// spin a short while, then sleep, when the rank's threads have cores of their own; sleep at
// once when they share cores with other ranks' threads. (openmp_wait.cpp applies it at start;
// these are its parts without the environment and the clock, for tests.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mpitron::kernels {

/// How long an idle thread spins before it sleeps when its cores are its own, in microseconds.
/// Measured 2026-12-04 on an Intel Xeon VM (2 vCPUs, model 167, 13 ns a spin), the train
/// example's step at 1 rank x 2 threads: about 615 ms sleeping at once, 520, 480 and 465 ms
/// spinning 13, 40 and 130 us first; with another process busy on one of the 2 vCPUs, which the
/// rule cannot see, 850-940 ms sleeping at once and 900, 980-1040 and 1150-1490 ms spinning 13,
/// 40 and 100 us. 50 us keeps most of the gain and, interpolated between the midpoints of the 40
/// and 100 us ranges (50 us itself was not timed there), about 40 % of the loss of 100 us
/// (docs/performance.md, "Idle threads").
inline constexpr double kOwnCoresSpinMicroseconds = 50.0;

/// The tasks of Slurm's step on node `node_id` (SLURM_NODEID), from SLURM_STEP_TASKS_PER_NODE's
/// form "2(x3),1" (2 tasks on each of nodes 0-2, then 1 on node 3). std::nullopt when the text
/// is malformed or names fewer nodes.
std::optional<std::int64_t> slurm_tasks_on_node(std::string_view tasks_per_node,
                                                std::int64_t node_id);

/// The ranks of this job on this host, from the launcher's environment values (each nullptr
/// when unset): Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, then MPICH/Hydra's MPI_LOCALNRANKS, then
/// Slurm's SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID. 1 (a rank started alone) when none is
/// set or readable.
std::int64_t ranks_on_this_host(const char* ompi_local_size, const char* hydra_local_ranks,
                                const char* slurm_tasks_per_node, const char* slurm_node_id);

/// The CPUs of a Linux CPU list such as "0-3,8-11" (cpuset.cpus.effective, sysfs), or
/// std::nullopt when the text is not one. A trailing newline is allowed.
std::optional<std::int64_t> cpu_list_count(std::string_view list);

/// Whether `threads` threads of each of `ranks_here` ranks have cores of their own: the process
/// may run on at least `threads` CPUs (`cpus_in_mask`, its affinity mask), and the ranks of the
/// host together fit its CPUs (ranks_here * threads <= `cpus_for_job`: the online CPUs, or
/// fewer where a cgroup cpuset limits them). Ranks that share a smaller mask outside a cgroup
/// (taskset) look like ranks with masks of their own.
bool threads_have_own_cores(std::int64_t threads, std::int64_t ranks_here,
                            std::int64_t cpus_in_mask, std::int64_t cpus_for_job);

/// GOMP_SPINCOUNT for spinning `microseconds` when one spin (a load and a pause instruction)
/// takes `nanoseconds_per_spin`; at least 1. (A pause takes 3 to 140 cycles by CPU kind, so a
/// count alone is not a time.)
std::int64_t spin_count(double microseconds, double nanoseconds_per_spin);

/// The one-line warning for `threads` threads per rank on a process that may run on
/// `cpus_in_mask` CPUs of the `cpus_for_job` here (the online CPUs, or fewer where a cgroup
/// cpuset limits them), or std::nullopt when the threads fit the mask: a mask narrower than that
/// (bound by the launcher) asks to bind each rank to as many cores as threads or not at all; a
/// mask of them all asks for fewer threads. (Called from main, not before it: it allocates.)
std::optional<std::string> cpu_mask_warning_text(std::int64_t threads, std::int64_t cpus_in_mask,
                                                 std::int64_t cpus_for_job);

}  // namespace mpitron::kernels
