// An all-reduce that runs while the caller computes: started at once, finished later. Data-parallel
// gradient buckets use it to reduce the gradients that are final while backward goes on.
#pragma once

#include <mpi.h>

#include <vector>

#include "comm/collectives.h"
#include "comm/communicator.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// all_reduce(comm, buffer, op) split into a start (the constructor) and an end (`wait`).
///
/// For host buffers the constructor posts MPI_Iallreduce (one per message of at most
/// comm.max_message_elements() elements) and returns; Open MPI progresses the operation inside
/// MPI calls, so `test` between pieces of computation moves it along. `wait` completes it
/// through the deadline routine (wait.h: past comm.timeout() the job aborts with one line) and,
/// for avg, scales by 1/size. CUDA buffers are reduced at once (staged, blocking) in the
/// constructor. Every rank of `comm` must start its pending all-reduces in the same order, with
/// buffers of the same dtype and numel, and must not touch `buffer` until `wait` returns.
/// Throws what all_reduce throws (std::invalid_argument for avg of an integer buffer; MpiError).
class PendingAllReduce {
 public:
  PendingAllReduce(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op);
  PendingAllReduce(const PendingAllReduce&) = delete;
  PendingAllReduce& operator=(const PendingAllReduce&) = delete;
  /// Waits (through the deadline) if `wait` was not called, so the buffer is never left in use.
  ~PendingAllReduce();

  /// Lets MPI progress the operation; true once it has completed (then `wait` returns at once).
  bool test();

  /// Returns when the result is in `buffer`.
  void wait();

 private:
  Communicator comm_;
  kernels::Buffer* buffer_;
  ReduceOp op_;
  std::vector<MPI_Request> requests_;
  bool finished_ = false;
};

}  // namespace mpitron::comm
