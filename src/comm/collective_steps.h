// The steps mpitron's own collectives on point-to-point messages are built from
// (recursive_doubling.h, ring_all_reduce.h, p2p_gather_scatter.h): a paired send and receive
// waited through the deadline routine, and the element-wise combination of two operands in a
// fixed order (communication layer internal).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "comm/chunking.h"
#include "comm/collectives.h"
#include "comm/communicator.h"
#include "comm/wait.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// Tag of these collectives' messages, apart from point_to_point's header and payload tags.
inline constexpr int kCollectiveTag = 7303;

/// Transfers below this many bytes travel as messages of at most kEagerMessageBytes. Open MPI's
/// shared-memory transport sends a message of up to 4 KiB, including its match header, eagerly
/// (btl_vader_eager_limit); a larger one takes a rendezvous and a process_vm_readv single copy.
/// On 2 ranks of a Zen 4 (bench comm and a loop of all_reduce calls) eager pieces made a 4 KiB
/// exchange about 4x faster and 16-240 KB ones 1.1-2x faster; from 512 KiB on the single copy
/// wins (pieces took 1.2-1.5x as long), and 128 KiB was even.
inline constexpr std::size_t kEagerPiecesBelowBytes = 256 * 1024;

/// kEagerPiecesBelowBytes for transfers of data the sender has not just written (all_gather's
/// blocks). All-gather on 2 ranks, eager pieces against one single-copy message: 16 KiB
/// transfers 0.75 vs 1.06 of MPI_Allgather's time, 32 KiB even, 64 KiB 1.75 vs 1.25, 128 KiB
/// 2.08 vs 1.23. A just-reduced chunk (all_reduce, reduce_scatter) gains from pieces up to
/// kEagerPiecesBelowBytes, since the peer's single-copy read would pull it out of the sender's
/// cache.
inline constexpr std::size_t kEagerPiecesBelowBytesForCopies = 32 * 1024;

/// The largest piece of a transfer below kEagerPiecesBelowBytes.
inline constexpr std::size_t kEagerMessageBytes = 4000;

/// Sends elements `send` of `buffer` to rank `to` while receiving `recv.count` elements from
/// rank `from` into `into` at element offset `recv.offset`, then waits for all of them through
/// wait_all reporting `op`. Each transfer travels as messages of at most
/// comm.max_message_elements() elements, and of at most kEagerMessageBytes when it is smaller
/// than `eager_below` bytes (the sender and the receiver of a transfer cut it alike); tag
/// kCollectiveTag. `to` or `from` may be MPI_PROC_NULL (that side moves nothing). `requests` is
/// reused storage. Throws MpiError when an MPI call fails.
void exchange(const Communicator& comm, const kernels::Buffer& buffer, Range send, int to,
              kernels::Buffer& into, Range recv, int from, std::vector<MPI_Request>& requests,
              const Operation& op, std::size_t eager_below = kEagerPiecesBelowBytes);

/// The first half of `exchange`: posts its messages into `requests` and returns without
/// waiting (the caller works meanwhile, then calls wait_all(comm, requests, op)).
void post_exchange(const Communicator& comm, const kernels::Buffer& buffer, Range send, int to,
                   kernels::Buffer& into, Range recv, int from, std::vector<MPI_Request>& requests,
                   std::size_t eager_below = kEagerPiecesBelowBytes);

/// out[i] = first[i] op second[i] for i < count (avg: the sum), on `count` elements of `dtype`
/// (any dtype); `out` may be `first` or `second`. The operand order is part of the result
/// (floating-point addition of NaNs, max/min of -0 and +0), so callers that must agree bit for
/// bit pass the operands in the same order on every rank.
void combine(kernels::DType dtype, void* out, const void* first, const void* second,
             std::size_t count, ReduceOp op);

}  // namespace mpitron::comm
