// Cross-rank agreement on one number or one flag ("did every rank accept its options", "all
// ranks' max error"), and how a list of ranks is written in messages. Everything here waits
// through the deadline routine (wait.h), so a missing rank ends the job instead of hanging it.
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "comm/communicator.h"

namespace mpitron::comm {

/// Collective over `comm`: `op` (sum, avg, max, min) of every rank's `value`, on every rank.
/// NaN propagates through sum and avg; max and min follow MPI's (implementation-defined) NaN
/// handling, so callers that must see a NaN map it to infinity first.
double all_reduce_scalar(const Communicator& comm, double value, ReduceOp op);

/// all_reduce_scalar of each element of `values` (the same count on every rank, at least one) in
/// one all-reduce.
std::vector<double> all_reduce_values(const Communicator& comm, const std::vector<double>& values,
                                      ReduceOp op);

/// Collective over `comm`: every rank's `value` in rank order ([comm.size()]), on every rank.
std::vector<double> all_gather_scalar(const Communicator& comm, double value);

/// Collective over `comm`: the world ranks of the members whose `flag` is true, ascending, the
/// same list on every rank (empty when no flag is set).
std::vector<int> ranks_where(const Communicator& comm, bool flag);

/// The ranks as "0, 1, 3": the first `max_listed`, then ", ..." when there are more.
std::string rank_list(std::span<const int> ranks,
                      std::size_t max_listed = std::numeric_limits<std::size_t>::max());

/// "rank 3" for one rank, "ranks 1, 3" for several (all listed).
std::string ranks_phrase(std::span<const int> ranks);

}  // namespace mpitron::comm
