// `mpitron bench comm --tune-table [FILE]`: times every algorithm mpitron has for all-reduce,
// all-gather and reduce-scatter, and MPI's own blocking collective, on the world it runs on and
// on its groups of every size that divides it, and writes the fastest choice per operation,
// group size and size range as an algorithm table (comm/algorithm_table.h) that runs read with
// --comm-table or MPITRON_COMM_TABLE.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "app/bench/comm_ops.h"
#include "comm/algorithm_table.h"
#include "comm/communicator.h"

namespace mpitron::app {

/// The operations --tune-table measures of `ops` (bench comm's names; send/recv has no choice).
std::vector<comm::Collective> tuned_collectives(const std::vector<std::string>& ops);

/// Group sizes --tune-table measures in a world of `world_size`: its divisors above 1, ascending.
std::vector<int> tuned_group_sizes(int world_size);

/// Throws comm::ConfigError when a tune could not write a table, before it measures: a world of
/// fewer than 2 ranks ("needs at least 2 ranks"), `ops` without a collective (send/recv alone),
/// or, checked on rank 0 only (`rank`), a `path` that cannot be written (a folder, a missing
/// folder, no permission; a file the check creates is removed again).
void check_tune_request(int world_size, int rank, const std::vector<std::string>& ops,
                        const std::string& path);

/// Measures on `world` (every rank) and writes the table to `path` on rank 0; prints one line
/// per measurement and the file written. Sizes as bench comm's (min_bytes x 4^k up to
/// max_bytes); `max_iterations` caps the calls per candidate. Returns 1 when an algorithm gave
/// another result than MPI's (it is then not chosen), else 0.
int run_comm_tune(const comm::Communicator& world, const std::vector<std::string>& ops,
                  std::size_t min_bytes, std::size_t max_bytes, int max_iterations,
                  const std::string& path);

}  // namespace mpitron::app
