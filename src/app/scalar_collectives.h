// One-number collectives for reports and verdicts (a loss, an error, a time, a success flag),
// on top of comm's buffer collectives.
#pragma once

#include <vector>

#include "comm/collectives.h"
#include "comm/communicator.h"

namespace mpitron::app {

/// Collective over `comm`: `op` (sum, avg, max, min) of every rank's `value`, on every rank.
double all_reduce_scalar(const comm::Communicator& comm, double value, comm::ReduceOp op);

/// Collective over `comm`: every rank's `value` in rank order ([comm.size()]), on every rank.
std::vector<double> all_gather_scalar(const comm::Communicator& comm, double value);

}  // namespace mpitron::app
