// A reduction that runs while the caller computes: started at once, finished later. Data-parallel
// gradient buckets use it to reduce the gradients that are final while backward goes on: an
// all-reduce, or, under the distributed optimizer, a reduce-scatter.
#pragma once

#include <mpi.h>

#include <vector>

#include "comm/communicator.h"
#include "comm/reduce_op.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// all_reduce(comm, buffer, op), or a reduce-scatter in place, split into a start and an end
/// (`wait`). One object runs one reduction at a time and can be started again once it is idle; it
/// keeps its request storage, so a steady stream of reductions of the same message count
/// allocates nothing.
///
/// For host buffers a start posts non-blocking MPI calls (one per message of at most
/// comm.max_message_elements() elements) and returns; Open MPI progresses them inside MPI calls,
/// so `test` between pieces of computation moves them along. `wait` completes them through the
/// deadline routine (wait.h: past comm.timeout() the job aborts with one line) and, for avg,
/// scales the result by 1/size. CUDA buffers are reduced at once (staged, blocking) in the start.
/// Every rank of `comm` must start its pending reductions in the same order and kind, with
/// buffers of the same dtype and numel, and must not touch `buffer` until `wait` returns.
class PendingReduction {
 public:
  /// Idle: nothing started.
  PendingReduction() = default;
  PendingReduction(const PendingReduction&) = delete;
  PendingReduction& operator=(const PendingReduction&) = delete;
  /// Waits (through the deadline) for a started reduction, so the buffer is never left in use.
  ~PendingReduction();

  /// Starts reducing all of `buffer` over `comm` (MPI_Iallreduce in place). Throws
  /// std::logic_error when this object is not idle, and what all_reduce throws
  /// (std::invalid_argument for avg of an integer buffer; MpiError).
  void start_all_reduce(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op);
  /// Starts a reduce-scatter in place: `buffer` is comm.size() blocks of numel / size elements,
  /// and when `wait` returns block r of rank r holds the reduction over the ranks of their
  /// block r; the other blocks hold unspecified values. Posted as one MPI_Ireduce per block
  /// (rooted at the block's rank), so the result lands in place and each message stays within
  /// max_message_elements. Throws std::invalid_argument when numel is not a multiple of the
  /// size, plus what start_all_reduce throws.
  void start_reduce_scatter(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op);
  /// True from a start until `wait` returned.
  bool active() const { return buffer_ != nullptr; }
  /// Lets MPI progress the operation; true once it has completed (then `wait` returns at once).
  /// True when idle.
  bool test();
  /// Returns when the result is in the buffer; the object is idle again. At once when idle.
  void wait();

 private:
  // Makes this object active on `buffer` with `messages` requests to post; `name` is the
  // operation a deadline report names.
  void begin(const char* name, const Communicator& comm, kernels::Buffer& buffer, ReduceOp op,
             std::size_t messages);

  const char* name_ = "";
  Communicator comm_;
  kernels::Buffer* buffer_ = nullptr;  // while active
  kernels::Buffer result_;             // a view of what `wait` averages: the buffer or a block
  ReduceOp op_ = ReduceOp::sum;
  std::vector<MPI_Request> requests_;
};

}  // namespace mpitron::comm
