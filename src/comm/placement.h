// Where this rank runs (host, process, local rank, CPUs, GPU), recorded at the top of every
// rank_<N>.log so a wrong placement can be seen from mpitron's own logs.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"

namespace mpitron::comm {

/// The facts of one rank's placement.
struct Placement {
  std::string host;
  long pid = 0;
  int world_rank = 0;
  NodeShare node;            ///< local rank and ranks on this node
  std::vector<int> cpus;     ///< CPUs the process may run on (sched_getaffinity), ascending
  int current_cpu = -1;      ///< the CPU it ran on when asked (sched_getcpu), -1 if unknown
  int visible_gpus = 0;      ///< CUDA devices visible to the process
  std::string cuda_visible;  ///< CUDA_VISIBLE_DEVICES, or "" when unset
};

/// This rank's placement on `world`; no communication.
Placement this_placement(const Communicator& world);

/// CPU numbers as ranges, e.g. {0, 1, 2, 3, 8, 10, 11} -> "0-3,8,10-11"; "" for none.
std::string cpu_ranges(const std::vector<int>& cpus);

/// One line, e.g. "host node3, pid 4711, world rank 5, local rank 1 of 4, CPUs 0-3 (on 2), GPU:
/// CUDA device 0 of 1 visible (CUDA_VISIBLE_DEVICES=1)" or "..., GPU: none visible".
std::string placement_text(const Placement& placement);

}  // namespace mpitron::comm
