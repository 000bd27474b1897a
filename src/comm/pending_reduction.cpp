#include "comm/pending_reduction.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "comm/collectives.h"
#include "comm/errors.h"
#include "comm/mpi_util.h"
#include "comm/traffic.h"
#include "kernels/ops.h"

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

void PendingReduction::round_for_wire(const kernels::Buffer& source, std::size_t result) {
  if (source.dtype() != kernels::DType::f32) {
    throw std::invalid_argument("PendingReduction: a bfloat16 wire needs a float32 buffer, not " +
                                kernels::to_string(source.dtype()));
  }
  const auto resize = [&](kernels::Buffer& buffer, std::size_t numel) {
    if (buffer.numel() != numel || buffer.device() != source.device()) {
      buffer = kernels::Buffer(numel, kernels::DType::bf16, source.device());
    }
  };
  resize(wire_send_, source.numel());
  kernels::convert(source, wire_send_);
  if (result == 0) {
    wire_result_ = kernels::Buffer::view(wire_send_, 0, wire_send_.numel());
  } else {
    if (wire_result_.data() == wire_send_.data()) wire_result_ = kernels::Buffer();
    resize(wire_result_, result);
  }
}

void PendingReduction::start_all_reduce(const Communicator& comm, kernels::Buffer& buffer,
                                        ReduceOp op, Wire wire) {
  if (active()) throw std::logic_error("PendingReduction: start while a reduction is pending");
  widen_ = wire == Wire::bf16;
  if (widen_) round_for_wire(buffer, 0);
  kernels::Buffer& reduced = widen_ ? wire_result_ : buffer;
  const std::size_t limit = comm.max_message_elements();
  begin("all_reduce", comm, kernels::Buffer::view(buffer, 0, buffer.numel()), op,
        message_count(buffer.numel(), limit));
  if (buffer.device() != kernels::Device::cpu) {
    all_reduce(comm, reduced, ReduceOp::sum);
    requests_.clear();
    return;
  }
  count_traffic(comm, reduced.bytes());
  const MPI_Datatype type = mpi_type(reduced.dtype());
  const MPI_Op mpi_reduce = reduction_op(comm, reduced, op);
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    const Range range = message_range(reduced.numel(), limit, i);
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, element(reduced, range.offset), mpi_count(range.count),
                             type, mpi_reduce, comm.native(), &requests_[i]),
              "MPI_Iallreduce");
  }
}

void PendingReduction::start_reduce_scatter(const Communicator& comm, kernels::Buffer& buffer,
                                            std::size_t block, std::size_t offset,
                                            std::size_t count, ReduceOp op, Wire wire) {
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
  widen_ = wire == Wire::bf16;
  if (widen_) round_for_wire(packed_, count);
  const kernels::Buffer& sent = widen_ ? wire_send_ : packed_;
  kernels::Buffer result = kernels::Buffer::view(widen_ ? wire_result_ : mine, 0, count);
  begin("reduce_scatter", comm, std::move(mine), op, 1);
  if (buffer.device() != kernels::Device::cpu) {
    reduce_scatter(comm, sent, result, 1, ReduceOp::sum);
    requests_.clear();
    return;
  }
  count_traffic(comm, sent.bytes());
  check_mpi(MPI_Ireduce_scatter_block(sent.data(), result.data(), mpi_count(count),
                                      mpi_type(sent.dtype()), reduction_op(comm, sent, op),
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
  if (widen_) kernels::convert(wire_result_, result_);
  finish_average(comm_, result_, op_);
}

}  // namespace mpitron::comm
