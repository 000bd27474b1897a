// Collective operations on kernels::Buffer (float32, float64, int32 or int64; CPU or CUDA memory).
//
// Common rules:
// - Every rank of the communicator calls the operation with buffers of the same dtype and
//   numel (MPI cannot check that for collectives; point-to-point calls check shapes).
// - CUDA buffers are staged through reused pinned host memory, or handed to MPI directly when
//   the communicator's transfer mode selects it; results are identical either way.
// - Host buffers that MPI reads in place are reduced and gathered by mpitron's own algorithms
//   on point-to-point messages (recursive_doubling.h, butterfly.h, ring_all_reduce.h,
//   p2p_gather_scatter.h): their reduction order is documented and the same on every run, and
//   all_reduce leaves bit-identical buffers on every rank. Staged host buffers, CUDA buffers and
//   broadcast use MPI's non-blocking collectives.
// - Transfers above `comm.max_message_elements()` (default INT_MAX) are cut into several
//   messages, so element counts above INT_MAX work.
// - Each call blocks through the deadline routine (wait.h): past `comm.timeout()` the job
//   aborts with one line naming the operation, communicator, ranks and bytes.
// - Local argument errors throw std::invalid_argument naming the operation and the sizes;
//   MPI failures throw MpiError.
#pragma once

#include <cstddef>
#include <string>

#include "comm/communicator.h"
#include "comm/reduce_op.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// In place: buffer[i] becomes op over every rank's buffer[i]. buffer: any shape, [n].
void all_reduce(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op);

/// Gathers along the last dimension: `in` is viewed as [outer, chunk] and `out` as
/// [outer, size*chunk]; rank r's `in` lands in out[:, r*chunk : (r+1)*chunk]. With outer = 1
/// this concatenates along dim 0; with outer = prod(leading dims) it gathers the last dim.
/// Throws std::invalid_argument unless outer >= 1 divides in.numel(), out.numel() ==
/// size * in.numel(), and in/out share dtype and device.
void all_gather(const Communicator& comm, const kernels::Buffer& in, kernels::Buffer& out,
                std::size_t outer);

/// The inverse layout of all_gather, reduced: `in` is [outer, size*chunk], `out` is
/// [outer, chunk] and out[o, c] = op over ranks of that rank's in[o, rank*chunk + c], where
/// `rank` is this rank. Same argument checks as all_gather with in/out swapped.
void reduce_scatter(const Communicator& comm, const kernels::Buffer& in, kernels::Buffer& out,
                    std::size_t outer, ReduceOp op = ReduceOp::sum);

/// Every rank's `buffer` becomes rank `root`'s (root is a rank of `comm`). Throws
/// std::invalid_argument when root is outside [0, size).
void broadcast(const Communicator& comm, kernels::Buffer& buffer, int root);

/// Returns once every rank of `comm` has entered the barrier (MPI_Ibarrier + deadline).
void barrier(const Communicator& comm);

}  // namespace mpitron::comm
