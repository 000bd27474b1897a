#include "comm/pending_all_reduce.h"

#include <algorithm>
#include <stdexcept>

#include "comm/collectives.h"
#include "comm/errors.h"
#include "comm/mpi_util.h"

namespace mpitron::comm {

void PendingAllReduce::start(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op) {
  if (active()) throw std::logic_error("PendingAllReduce: start while an all-reduce is pending");
  if (buffer.device() != kernels::Device::cpu) {
    all_reduce(comm, buffer, op);
    return;
  }
  const MPI_Datatype type = mpi_type(buffer.dtype());
  const MPI_Op mpi_reduce = mpi_op(op, buffer.dtype());
  const std::size_t limit = comm.max_message_elements();
  const std::size_t messages = message_count(buffer.numel(), limit);
  comm_ = comm;
  op_ = op;
  requests_.assign(messages, MPI_REQUEST_NULL);
  buffer_ = &buffer;
  for (std::size_t i = 0; i < messages; ++i) {
    const Range range = message_range(buffer.numel(), limit, i);
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, element(buffer, range.offset), mpi_count(range.count),
                             type, mpi_reduce, comm.native(), &requests_[i]),
              "MPI_Iallreduce");
  }
}

PendingAllReduce::~PendingAllReduce() {
  try {
    wait();
  } catch (...) {  // a failed request: the exception that unwinds past here already says why
  }
}

bool PendingAllReduce::test() {
  if (!active()) return true;
  int done = 0;
  check_mpi(
      MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
      "MPI_Testall");
  return done != 0;
}

void PendingAllReduce::wait() {
  if (!active()) return;
  kernels::Buffer& buffer = *buffer_;
  buffer_ = nullptr;
  wait_all(comm_, requests_, {"all_reduce", -1, buffer.bytes()});
  finish_average(comm_, buffer, op_);
}

}  // namespace mpitron::comm
