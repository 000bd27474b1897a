#include "comm/pending_reduction.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "comm/collectives.h"
#include "comm/errors.h"
#include "comm/mpi_util.h"

namespace mpitron::comm {

void PendingReduction::begin(const char* name, const Communicator& comm, kernels::Buffer& buffer,
                             ReduceOp op, std::size_t messages) {
  name_ = name;
  comm_ = comm;
  op_ = op;
  requests_.assign(messages, MPI_REQUEST_NULL);
  buffer_ = &buffer;
}

void PendingReduction::start_all_reduce(const Communicator& comm, kernels::Buffer& buffer,
                                        ReduceOp op) {
  if (active()) throw std::logic_error("PendingReduction: start while a reduction is pending");
  if (buffer.device() != kernels::Device::cpu) {
    all_reduce(comm, buffer, op);
    return;
  }
  const MPI_Datatype type = mpi_type(buffer.dtype());
  const MPI_Op mpi_reduce = mpi_op(op, buffer.dtype());
  const std::size_t limit = comm.max_message_elements();
  begin("all_reduce", comm, buffer, op, message_count(buffer.numel(), limit));
  result_ = kernels::Buffer::view(buffer, 0, buffer.numel());
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    const Range range = message_range(buffer.numel(), limit, i);
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, element(buffer, range.offset), mpi_count(range.count),
                             type, mpi_reduce, comm.native(), &requests_[i]),
              "MPI_Iallreduce");
  }
}

void PendingReduction::start_reduce_scatter(const Communicator& comm, kernels::Buffer& buffer,
                                            ReduceOp op) {
  if (active()) throw std::logic_error("PendingReduction: start while a reduction is pending");
  const auto size = static_cast<std::size_t>(comm.size());
  if (buffer.numel() % size != 0) {
    throw std::invalid_argument("PendingReduction: a reduce-scatter of " +
                                std::to_string(buffer.numel()) + " elements over " +
                                std::to_string(size) + " ranks");
  }
  const std::size_t block = buffer.numel() / size;
  const auto rank = static_cast<std::size_t>(comm.rank());
  if (buffer.device() != kernels::Device::cpu) {
    kernels::Buffer own(block, buffer.dtype(), buffer.device());
    reduce_scatter(comm, buffer, own, 1, op);
    kernels::Buffer mine = kernels::Buffer::view(buffer, rank * block, block);
    kernels::copy(own, mine);
    return;
  }
  const MPI_Datatype type = mpi_type(buffer.dtype());
  const MPI_Op mpi_reduce = mpi_op(op, buffer.dtype());
  const std::size_t limit = comm.max_message_elements();
  const std::size_t per_block = message_count(block, limit);
  begin("reduce_scatter", comm, buffer, op, per_block * size);
  result_ = kernels::Buffer::view(buffer, rank * block, block);
  for (std::size_t root = 0; root < size; ++root) {
    for (std::size_t i = 0; i < per_block; ++i) {
      const Range range = message_range(block, limit, i);
      void* data = element(buffer, root * block + range.offset);
      check_mpi(MPI_Ireduce(root == rank ? MPI_IN_PLACE : data, data, mpi_count(range.count), type,
                            mpi_reduce, static_cast<int>(root), comm.native(),
                            &requests_[root * per_block + i]),
                "MPI_Ireduce");
    }
  }
}

PendingReduction::~PendingReduction() {
  try {
    wait();
  } catch (...) {  // a failed request: the exception that unwinds past here already says why
  }
}

bool PendingReduction::test() {
  if (!active()) return true;
  int done = 0;
  check_mpi(
      MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
      "MPI_Testall");
  return done != 0;
}

void PendingReduction::wait() {
  if (!active()) return;
  const std::size_t bytes = buffer_->bytes();
  buffer_ = nullptr;
  wait_all(comm_, requests_, {name_, -1, bytes});
  finish_average(comm_, result_, op_);
}

}  // namespace mpitron::comm
