// A reduction that runs while the caller computes: started at once, finished later. Data-parallel
// gradient buckets use it to reduce the gradients that are final while backward goes on: an
// all-reduce, or, under the distributed optimizer, a reduce-scatter of its blocks.
#pragma once

#include <mpi.h>

#include <vector>

#include "comm/communicator.h"
#include "comm/reduce_op.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// What a pending reduction's messages carry: the buffer's own dtype, or (for a float32 buffer)
/// bfloat16: the elements are rounded to bfloat16 (kernels::convert) when the reduction starts,
/// reduced in bfloat16 (bf16_reduction.h: float32 adds, each rounded once to bfloat16) and
/// widened back into the float32 buffer by `wait`, which then averages in float32. Megatron-LM's
/// --grad-reduce-in-bf16; half the bytes of a float32 reduction.
enum class Wire { native, bf16 };

/// all_reduce(comm, buffer, op), or a reduce-scatter of strided blocks, split into a start and
/// an end (`wait`). One object runs one reduction at a time and can be started again once it is
/// idle; it keeps its request storage and packing scratch, so a steady stream of reductions of
/// the same sizes allocates nothing.
///
/// For host buffers a start posts non-blocking MPI calls and returns; Open MPI progresses them
/// inside MPI calls, so `test` between pieces of computation moves them along. `wait` completes
/// them through the deadline routine (wait.h: past comm.timeout() the job aborts with one line)
/// and, for avg, scales the result by 1/size. CUDA buffers are reduced at once (staged, blocking)
/// in the start. Every rank of `comm` must start its pending reductions in the same order and
/// kind, with the same dtype and sizes, and must not touch the buffer until `wait` returns.
class PendingReduction {
 public:
  /// Idle: nothing started.
  PendingReduction() = default;
  PendingReduction(const PendingReduction&) = delete;
  PendingReduction& operator=(const PendingReduction&) = delete;
  /// Waits (through the deadline) for a started reduction, so the buffer is never left in use.
  ~PendingReduction();

  /// Starts reducing all of `buffer` over `comm` (MPI_Iallreduce in place, one per message of at
  /// most comm.max_message_elements() elements). Throws std::logic_error when this object is not
  /// idle, and what all_reduce throws (std::invalid_argument for avg of an integer buffer;
  /// MpiError); std::invalid_argument for Wire::bf16 on a buffer that is not float32.
  void start_all_reduce(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op,
                        Wire wire = Wire::native);
  /// Starts a reduce-scatter of `buffer` seen as comm.size() blocks of `block` elements: for
  /// every rank r, elements [r block + offset, r block + offset + count) are reduced over the
  /// ranks into rank r's buffer, in place; every other element is left as it is. The ranges are
  /// packed into this object's scratch first (count x size elements), then one
  /// MPI_Ireduce_scatter_block runs (Open MPI progresses it in a few rounds, where a rooted
  /// MPI_Ireduce per block, polled, takes many). Throws std::invalid_argument when the ranges
  /// do not fit in the buffer or count exceeds comm.max_message_elements(), plus what
  /// start_all_reduce throws.
  void start_reduce_scatter(const Communicator& comm, kernels::Buffer& buffer, std::size_t block,
                            std::size_t offset, std::size_t count, ReduceOp op,
                            Wire wire = Wire::native);
  /// True from a start until `wait` returned.
  bool active() const { return active_; }
  /// Lets MPI progress the operation; true once it has completed (then `wait` returns at once).
  /// True when idle.
  bool test();
  /// Returns when the result is in the buffer; the object is idle again. At once when idle.
  void wait();

 private:
  // Makes this object active, with `messages` requests to post and `result` (a view of the
  // caller's buffer) to average in `wait`; `name` is the operation a deadline report names.
  void begin(const char* name, const Communicator& comm, kernels::Buffer result, ReduceOp op,
             std::size_t messages);
  // Wire::bf16: `source` (float32) rounded into wire_send_ (numel elements); wire_result_ gets
  // `result` elements for the reduced values that `wait` widens. Throws for a non-float32
  // source.
  void round_for_wire(const kernels::Buffer& source, std::size_t result);

  const char* name_ = "";
  Communicator comm_;
  bool active_ = false;
  kernels::Buffer result_;       // a view of the elements `wait` averages
  kernels::Buffer packed_;       // the reduce-scatter's send buffer
  bool widen_ = false;           // Wire::bf16: `wait` widens wire_result_ into result_
  kernels::Buffer wire_send_;    // Wire::bf16: the rounded elements sent
  kernels::Buffer wire_result_;  // Wire::bf16: the reduced bfloat16 elements
  ReduceOp op_ = ReduceOp::sum;
  std::vector<MPI_Request> requests_;
};

}  // namespace mpitron::comm
