// The ring all-reduce on point-to-point messages (Patarasuk and Yuan, "Bandwidth optimal
// all-reduce algorithms for clusters of workstations", 2009; the algorithm of Baidu's ring
// all-reduce, Horovod and NCCL's rings), used by comm::all_reduce for large host buffers.
// Open MPI's non-blocking MPI_Iallreduce (libnbc) takes about twice the time of the blocking
// MPI_Allreduce at every size on 2 ranks (a reduce then a broadcast of the whole buffer); the
// ring moves 2 (p - 1) / p of the buffer through each rank and keeps the deadline routine.
#pragma once

#include <cstddef>

#include "comm/communicator.h"
#include "comm/reduce_op.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// Buffers of at least this many bytes take the ring (below it the latency of 2 (p - 1) steps
/// outweighs the bandwidth saved).
inline constexpr std::size_t kRingAllReduceMinBytes = 256 * 1024;

/// True when all_reduce of `buffer` on `comm` takes a bandwidth-optimal algorithm on
/// point-to-point messages (ring_all_reduce, or rabenseifner_all_reduce on a power-of-two group,
/// butterfly.h): more than one rank, a CPU buffer of float32, float64 or bfloat16
/// (reduces_in_floating_point, algorithm_table.h; CUDA buffers keep MPI's
/// reduction in both transfer modes, so staged and direct results stay identical) of at least
/// kRingAllReduceMinBytes and at least comm.size() elements.
bool uses_large_all_reduce(const Communicator& comm, const kernels::Buffer& buffer);

/// True when all_reduce of `buffer` on `comm` uses ring_all_reduce: uses_large_all_reduce but
/// not uses_rabenseifner_all_reduce (butterfly.h): a rank count that is not a power of two, or
/// a buffer of at least kRabenseifnerMaxBytes.
bool uses_ring_all_reduce(const Communicator& comm, const kernels::Buffer& buffer);

/// In place on every rank of `comm`: buffer[i] becomes op over every rank's buffer[i] (avg:
/// the sum; the caller scales). The buffer, [n] with n >= comm.size(), is cut into size nearly
/// equal chunks; in p - 1 reduce-scatter steps rank r sends chunk (r - s) mod p to rank r + 1
/// and adds chunk (r - s - 1) mod p received from rank r - 1 into its own, after which it holds
/// chunk (r + 1) mod p reduced over all ranks; p - 1 all-gather steps then pass the reduced
/// chunks around. Every rank ends with the same values (each chunk is reduced once, in ring
/// order, and copied). Messages respect comm.max_message_elements(); each step waits through
/// the deadline routine (wait.h) as "all_reduce (ring)". Throws MpiError when an MPI call fails.
void ring_all_reduce(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op);

}  // namespace mpitron::comm
