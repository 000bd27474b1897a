// An all-reduce that runs while the caller computes: started at once, finished later. Data-parallel
// gradient buckets use it to reduce the gradients that are final while backward goes on.
#pragma once

#include <mpi.h>

#include <vector>

#include "comm/communicator.h"
#include "comm/reduce_op.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// all_reduce(comm, buffer, op) split into a start (`start`) and an end (`wait`). One object
/// runs one all-reduce at a time and can be started again once it is idle; it keeps its request
/// storage, so a steady stream of all-reduces of the same message count allocates nothing.
///
/// For host buffers `start` posts MPI_Iallreduce (one per message of at most
/// comm.max_message_elements() elements) and returns; Open MPI progresses the operation inside
/// MPI calls, so `test` between pieces of computation moves it along. `wait` completes it
/// through the deadline routine (wait.h: past comm.timeout() the job aborts with one line) and,
/// for avg, scales by 1/size. CUDA buffers are reduced at once (staged, blocking) in `start`.
/// Every rank of `comm` must start its pending all-reduces in the same order, with buffers of
/// the same dtype and numel, and must not touch `buffer` until `wait` returns.
class PendingAllReduce {
 public:
  /// Idle: nothing started.
  PendingAllReduce() = default;
  PendingAllReduce(const PendingAllReduce&) = delete;
  PendingAllReduce& operator=(const PendingAllReduce&) = delete;
  /// Waits (through the deadline) for a started all-reduce, so the buffer is never left in use.
  ~PendingAllReduce();

  /// Starts reducing `buffer` over `comm`. Throws std::logic_error when this object is not
  /// idle, and what all_reduce throws (std::invalid_argument for avg of an integer buffer;
  /// MpiError).
  void start(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op);

  /// True from `start` until `wait` returned.
  bool active() const { return buffer_ != nullptr; }

  /// Lets MPI progress the operation; true once it has completed (then `wait` returns at once).
  /// True when idle.
  bool test();

  /// Returns when the result is in the buffer; the object is idle again. At once when idle.
  void wait();

 private:
  Communicator comm_;
  kernels::Buffer* buffer_ = nullptr;  // while active
  ReduceOp op_ = ReduceOp::sum;
  std::vector<MPI_Request> requests_;
};

}  // namespace mpitron::comm
