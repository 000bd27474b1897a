// What this rank hands to communication, per group: the bytes of every collective's and
// point-to-point call's payload, counted where the call starts, keyed by the communicator's name
// ("tp", "pp", "dp", ...). `train` reports them per step, so the bytes a setting saves (train
// --bf16's bfloat16 messages) are counted, not estimated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "comm/communicator.h"

namespace mpitron::comm {

/// Bytes per communicator name.
using Traffic = std::map<std::string, std::uint64_t>;

/// Adds `bytes` to comm.name()'s count, unless comm has one rank (nothing leaves it). The
/// payload each call counts: all_reduce its buffer, all_gather this rank's shard (`in`),
/// reduce_scatter its whole input, broadcast the buffer (every rank), a send its message, a
/// PendingReduction what it puts on the wire (bfloat16 on a Wire::bf16). Thread-safe.
void count_traffic(const Communicator& comm, std::size_t bytes);

/// The counts so far (a copy).
Traffic traffic();

/// after[name] - before[name] for every name of `after` (counts only grow).
Traffic traffic_since(const Traffic& before, const Traffic& after);

}  // namespace mpitron::comm
