// The steps mpitron's own collectives on point-to-point messages are built from
// (recursive_doubling.h, ring_all_reduce.h, p2p_gather_scatter.h): a paired send and receive
// waited through the deadline routine, and the element-wise combination of two operands in a
// fixed order (communication layer internal).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "comm/chunking.h"
#include "comm/communicator.h"
#include "comm/eager.h"
#include "comm/reduce_op.h"
#include "comm/wait.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// Tag of these collectives' messages, apart from point_to_point's header and payload tags.
inline constexpr int kCollectiveTag = 7303;

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

/// Transfers of at least this many bytes whose receiver combines them with its own data
/// (exchange_and_combine) travel as messages of kCombinePieceBytes, each combined as soon as it
/// has arrived while the next one is already posted: the piece is still in cache when it is
/// read, and the scratch it lands in is two pieces, not the whole transfer. It pays once the
/// ranks' buffers outgrow the last-level cache (32 MiB on the Zen 4 measured): 16 MiB all-reduce
/// on 2 ranks (8 MiB transfers) 1.03 -> 0.91 of MPI_Allreduce's time, on 4 ranks (ring, 4 MiB
/// transfers) 0.96 -> 0.86, 64 MiB on 2 ranks 0.47 -> 0.44; below, the extra rendezvous cost
/// more than they save: 4 MiB on 2 ranks (2 MiB transfers) 1.00 -> 1.42, 8 MiB 1.14 -> 1.19.
inline constexpr std::size_t kCombinePiecesFromBytes = 4 * 1024 * 1024;

/// The pieces of kCombinePiecesFromBytes: two of them and the piece of this rank's data they
/// are combined with fit one core's 1 MiB L2 (16 MiB all-reduce on 2 ranks: 128 KiB pieces 1.15
/// of MPI's time, 256 KiB 0.92-1.05, 384 KiB 1.34-1.46, 1 MiB 1.16-1.39).
inline constexpr std::size_t kCombinePieceBytes = 256 * 1024;

/// What exchange_and_combine does with the `count` elements that arrive: target[target_offset +
/// j] = mine[mine_offset + j] op theirs[j] for j < count, or theirs[j] op mine[..] when
/// `theirs_first` (the operand order is part of the result, see combine). `target` may be
/// `mine` at the same offset.
struct Combination {
  const kernels::Buffer* mine = nullptr;
  std::size_t mine_offset = 0;
  kernels::Buffer* target = nullptr;
  std::size_t target_offset = 0;
  std::size_t count = 0;
  bool theirs_first = false;
  ReduceOp op = ReduceOp::sum;
};

/// Sends elements `send` of `buffer` to rank `to` while receiving `combination.count` elements
/// from rank `from` and combining them as `combination` says, then waits for the sends; every
/// wait goes through the deadline routine reporting `op`. A transfer below
/// kCombinePiecesFromBytes is cut like exchange's (eager pieces below kEagerPiecesBelowBytes)
/// and combined once all of it has arrived; a larger one travels as pieces of
/// kCombinePieceBytes, each combined on arrival. Messages never exceed
/// comm.max_message_elements(), and the sender and the receiver of a transfer cut it alike.
/// `target` must not overlap `send` (the sends may be in flight while pieces are combined). Tag
/// kCollectiveTag; `requests` is reused storage. Throws MpiError when an MPI call fails.
void exchange_and_combine(const Communicator& comm, const kernels::Buffer& buffer, Range send,
                          int to, int from, const Combination& combination,
                          std::vector<MPI_Request>& requests, const Operation& op);

/// out[i] = first[i] op second[i] for i < count (avg: the sum), on `count` elements of `dtype`
/// (any dtype; bfloat16 as combine_bf16 does); `out` may be `first` or `second`. The operand order
/// is part of the result (floating-point addition of NaNs, max/min of -0 and +0), so callers that
/// must agree bit for bit pass the operands in the same order on every rank.
void combine(kernels::DType dtype, void* out, const void* first, const void* second,
             std::size_t count, ReduceOp op);

}  // namespace mpitron::comm
