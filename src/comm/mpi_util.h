// Small helpers shared by the collective and point-to-point implementations (communication layer
// internal).
#pragma once

#include <mpi.h>

#include <cstddef>

#include "comm/chunking.h"
#include "comm/communicator.h"
#include "comm/reduce_op.h"
#include "comm/wait.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// MPI_FLOAT for f32, MPI_DOUBLE for f64, MPI_INT32_T for i32, MPI_INT64_T for i64, MPI_UINT16_T
/// for bf16 (bfloat16 travels as 16-bit words; mpi_op gives its reductions).
MPI_Datatype mpi_type(kernels::DType dtype);

/// MPI_SUM for sum and avg, MPI_MAX, MPI_MIN; for bf16 the user-defined bf16_mpi_op(op), which
/// runs on host memory. Throws std::invalid_argument for avg of an integer `dtype` (its mean is
/// no integer); every rank throws alike, before any message.
MPI_Op mpi_op(ReduceOp op, kernels::DType dtype);

/// mpi_op(op, buffer.dtype()) for a reduction of `buffer` on `comm`. Also throws
/// std::invalid_argument for a bf16 CUDA buffer that MPI would reduce in device memory
/// (comm.direct_transfers()): bf16_mpi_op runs on the host, so such buffers must be staged.
MPI_Op reduction_op(const Communicator& comm, const kernels::Buffer& buffer, ReduceOp op);

/// For `op` == avg, scales the reduced `buffer` by 1/comm.size() (kernels::scale; a bf16 buffer
/// is scaled in float32 and rounded once); else nothing.
void finish_average(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op);

/// `count` as an MPI count; throws std::length_error above INT_MAX (callers chunk first).
int mpi_count(std::size_t count);

/// Address of element `index` of `buffer` (no bounds check; callers stay inside).
void* element(kernels::Buffer& buffer, std::size_t index);
const void* element(const kernels::Buffer& buffer, std::size_t index);

/// Moves `count` elements as consecutive messages of at most `comm.max_message_elements()`
/// elements: for each Range `post(range)` starts one non-blocking MPI call and returns its
/// request, which is waited for (wait_one, reporting `op`) before the next is posted.
template <class Post>
void for_each_message(const Communicator& comm, std::size_t count, std::size_t limit,
                      const Operation& op, Post post) {
  const std::size_t messages = message_count(count, limit);
  for (std::size_t i = 0; i < messages; ++i) {
    MPI_Request request = post(message_range(count, limit, i));
    wait_one(comm, request, op);
  }
}

}  // namespace mpitron::comm
