// The two steps the all-reduce algorithms on point-to-point messages are built from
// (ring_all_reduce.h, recursive_doubling.h): a paired send and receive waited through the deadline
// routine, and the element-wise combination of two operands in a fixed order (communication layer
// internal).
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

/// Tag of these algorithms' messages, apart from point_to_point's header and payload tags.
inline constexpr int kReductionTag = 7303;

/// Sends elements `send` of `buffer` to rank `to` while receiving `recv.count` elements from
/// rank `from` into `into` at element offset `recv.offset`, each as messages of at most
/// comm.max_message_elements() (tag kReductionTag), then waits for all of them through wait_all
/// reporting `op`. `to` or `from` may be MPI_PROC_NULL (that side moves nothing). `requests` is
/// reused storage. Throws MpiError when an MPI call fails.
void exchange(const Communicator& comm, const kernels::Buffer& buffer, Range send, int to,
              kernels::Buffer& into, Range recv, int from, std::vector<MPI_Request>& requests,
              const Operation& op);

/// out[i] = first[i] op second[i] for i < count (avg: the sum), on `count` elements of `dtype`
/// (any dtype); `out` may be `first` or `second`. The operand order is part of the result
/// (floating-point addition of NaNs, max/min of -0 and +0), so callers that must agree bit for
/// bit pass the operands in the same order on every rank.
void combine(kernels::DType dtype, void* out, const void* first, const void* second,
             std::size_t count, ReduceOp op);

}  // namespace mpitron::comm
