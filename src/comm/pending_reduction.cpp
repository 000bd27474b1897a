#include "comm/pending_reduction.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "comm/collectives.h"
#include "comm/errors.h"
#include "comm/mpi_util.h"

namespace mpitron::comm {

void PendingReduction::begin(const char* name, const Communicator& comm, kernels::Buffer result,
                             ReduceOp op, std::size_t messages) {
  name_ = name;
  comm_ = comm;
  op_ = op;
  result_ = std::move(result);
  requests_.assign(messages, MPI_REQUEST_NULL);
  active_ = true;
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
  begin("all_reduce", comm, kernels::Buffer::view(buffer, 0, buffer.numel()), op,
        message_count(buffer.numel(), limit));
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    const Range range = message_range(buffer.numel(), limit, i);
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, element(buffer, range.offset), mpi_count(range.count),
                             type, mpi_reduce, comm.native(), &requests_[i]),
              "MPI_Iallreduce");
  }
}

void PendingReduction::start_reduce_scatter(const Communicator& comm, kernels::Buffer& buffer,
                                            std::size_t block, std::size_t offset,
                                            std::size_t count, ReduceOp op) {
  if (active()) throw std::logic_error("PendingReduction: start while a reduction is pending");
  const auto size = static_cast<std::size_t>(comm.size());
  if (offset + count > block || block * size > buffer.numel() ||
      count > comm.max_message_elements()) {
    throw std::invalid_argument("PendingReduction: a reduce-scatter of elements [" +
                                std::to_string(offset) + ", " + std::to_string(offset + count) +
                                ") of " + std::to_string(size) + " blocks of " +
                                std::to_string(block) + " in " + std::to_string(buffer.numel()));
  }
  const std::size_t rank = static_cast<std::size_t>(comm.rank());
  kernels::Buffer mine = kernels::Buffer::view(buffer, rank * block + offset, count);
  if (packed_.numel() != count * size || packed_.dtype() != buffer.dtype() ||
      packed_.device() != buffer.device()) {
    packed_ = kernels::Buffer(count * size, buffer.dtype(), buffer.device());
  }
  const std::size_t element_bytes = kernels::dtype_size(buffer.dtype());
  for (std::size_t r = 0; r < size; ++r) {
    kernels::copy_bytes(buffer, (r * block + offset) * element_bytes, packed_,
                        r * count * element_bytes, count * element_bytes);
  }
  if (buffer.device() != kernels::Device::cpu) {
    reduce_scatter(comm, packed_, mine, 1, op);
    return;
  }
  begin("reduce_scatter", comm, std::move(mine), op, 1);
  check_mpi(MPI_Ireduce_scatter_block(packed_.data(), result_.data(), mpi_count(count),
                                      mpi_type(buffer.dtype()), mpi_op(op, buffer.dtype()),
                                      comm.native(), &requests_[0]),
            "MPI_Ireduce_scatter_block");
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
  active_ = false;
  wait_all(comm_, requests_, {name_, -1, result_.bytes()});
  finish_average(comm_, result_, op_);
}

}  // namespace mpitron::comm
