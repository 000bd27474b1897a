// Which algorithm a collective call takes: the family's algorithm table (algorithm_table.h) where
// one of its choices covers the call and can run it, else the built-in rule. Every rank of a
// communicator computes the same answer from the same arguments, which the algorithms need.
#pragma once

#include <cstddef>

#include "comm/algorithm_table.h"
#include "comm/communicator.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// The algorithm comm::all_reduce(comm, buffer) runs. MPI's (`mpi`) for one rank and for
/// buffers MPI does not read in place (CUDA and staged buffers: MPI_Iallreduce, polled by the
/// wait routine). Otherwise the table's choice for (all-reduce, comm.size(), buffer.bytes())
/// when `applicable`, else the built-in rule: rabenseifner where uses_rabenseifner_all_reduce,
/// ring where uses_ring_all_reduce, recursive_doubling where uses_recursive_doubling, else mpi
/// (integer buffers from kRecursiveDoublingMaxBytes). `mpi` on a host buffer MPI reads in place
/// is MPI_Allreduce under the deadline watch (blocking_call.h).
Algorithm all_reduce_algorithm(const Communicator& comm, const kernels::Buffer& buffer);

/// The algorithm comm::all_gather(comm, in, out, outer) runs for each rank's block of
/// `block_bytes` (the whole `in` unless the message limit tiles it) when MPI sees the blocks in
/// `space` (mpi_space(comm, in)): `mpi` for one rank or CUDA memory; otherwise the table's
/// choice for (all-gather, comm.size(), comm.size() x block_bytes), else the built-in rule: `mpi`
/// (MPI_Allgather under the deadline watch) on more than 2 ranks below
/// kMpiAllGatherBelowBytes in all, recursive_doubling on a power-of-two group below
/// kRingAllGatherBlockBytesPerRankSquared x p^2 bytes per block, else ring.
Algorithm all_gather_algorithm(const Communicator& comm, kernels::Device space,
                               std::size_t block_bytes);

/// all_gather_algorithm for a call whose per-rank input is `in` (one tile).
Algorithm all_gather_algorithm(const Communicator& comm, const kernels::Buffer& in);

/// The algorithm comm::reduce_scatter(comm, in, out, outer, op) runs: `mpi` unless
/// uses_p2p_reduce_scatter(comm, in) (one rank, CUDA and staged buffers keep MPI's
/// MPI_Ireduce_scatter_block); otherwise the table's choice for (reduce-scatter, comm.size(),
/// `in_bytes`, the whole input unless the message limit tiles it), else the built-in rule:
/// recursive_halving on a power-of-two group, else ring.
Algorithm reduce_scatter_algorithm(const Communicator& comm, const kernels::Buffer& in,
                                   std::size_t in_bytes);

/// reduce_scatter_algorithm of the whole input.
Algorithm reduce_scatter_algorithm(const Communicator& comm, const kernels::Buffer& in);

}  // namespace mpitron::comm
