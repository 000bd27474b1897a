// Recursive-doubling all-reduce on point-to-point messages (Thakur, Rabenseifner and Gropp,
// "Optimization of collective communication operations in MPICH", 2005, section 4.4, with
// MPICH's fold for a rank count that is not a power of two), used by comm::all_reduce for small
// host buffers. Open MPI's non-blocking MPI_Iallreduce (libnbc) costs 2-3x the blocking call
// on small buffers (its schedule is built and progressed inside MPI_Test); log2(p) paired
// exchanges of the whole buffer cost about one message latency each and keep the deadline
// routine.
#pragma once

#include <cstddef>

#include "comm/communicator.h"
#include "comm/reduce_op.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// Buffers below this many bytes take recursive doubling (from kRingAllReduceMinBytes up the
/// ring moves less data per rank: 2 (p - 1) / p of the buffer instead of log2(p) buffers).
inline constexpr std::size_t kRecursiveDoublingMaxBytes = 256 * 1024;

/// True when all_reduce of `buffer` on `comm` uses recursive_doubling_all_reduce: more than one
/// rank and a non-empty CPU buffer (any dtype) of fewer than kRecursiveDoublingMaxBytes that MPI
/// reads in place (not staged, staging.h: staged host buffers keep MPI's reduction, like CUDA
/// buffers).
bool uses_recursive_doubling(const Communicator& comm, const kernels::Buffer& buffer);

/// In place on every rank of `comm`: buffer[i] becomes op over every rank's buffer[i] (avg: the
/// sum; the caller scales). With p2 the largest power of two <= p = comm.size() and
/// q = p - p2, rank 2i (i < q) first hands its buffer to rank 2i + 1, which combines them; the
/// p2 remaining ranks, renumbered 0..p2-1 in rank order, then exchange their whole buffers with
/// the partner whose number differs in bit k, for k = 0 .. log2(p2) - 1, each combining the
/// lower-numbered operand first; finally rank 2i + 1 returns the result to rank 2i. Both ends
/// of every exchange compute the same operation on the same operands in the same order, so
/// every rank ends with a bit-identical buffer. Messages are cut as collective_steps.h says;
/// each step waits through the deadline routine (wait.h) as "all_reduce". Throws MpiError when
/// an MPI call fails.
void recursive_doubling_all_reduce(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op);

}  // namespace mpitron::comm
