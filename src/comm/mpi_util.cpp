#include "comm/mpi_util.h"

#include <stdexcept>
#include <string>

#include "comm/bf16_reduction.h"
#include "kernels/ops.h"

namespace mpitron::comm {

MPI_Datatype mpi_type(kernels::DType dtype) {
  switch (dtype) {
    case kernels::DType::f64:
      return MPI_DOUBLE;
    case kernels::DType::i32:
      return MPI_INT32_T;
    case kernels::DType::i64:
      return MPI_INT64_T;
    case kernels::DType::bf16:  // 16-bit words; reduced by bf16_mpi_op
      return MPI_UINT16_T;
    case kernels::DType::f32:
      break;
  }
  return MPI_FLOAT;
}

int mpi_count(std::size_t count) {
  if (count > kMaxMessageElements) {
    throw std::length_error("MPI message of " + std::to_string(count) +
                            " elements exceeds INT_MAX");
  }
  return static_cast<int>(count);
}

void* element(kernels::Buffer& buffer, std::size_t index) {
  return static_cast<std::byte*>(buffer.data()) + index * kernels::dtype_size(buffer.dtype());
}

const void* element(const kernels::Buffer& buffer, std::size_t index) {
  return static_cast<const std::byte*>(buffer.data()) + index * kernels::dtype_size(buffer.dtype());
}

MPI_Op mpi_op(ReduceOp op, kernels::DType dtype) {
  if (dtype == kernels::DType::bf16) return bf16_mpi_op(op);
  if (op == ReduceOp::avg && !kernels::is_floating(dtype)) {
    throw std::invalid_argument("reduce op avg needs a float buffer, not " +
                                kernels::to_string(dtype) + " (use sum)");
  }
  switch (op) {
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::sum:
    case ReduceOp::avg:
      break;
  }
  return MPI_SUM;
}

MPI_Op reduction_op(const Communicator& comm, const kernels::Buffer& buffer, ReduceOp op) {
  if (buffer.dtype() == kernels::DType::bf16 && buffer.device() == kernels::Device::cuda &&
      comm.direct_transfers()) {
    throw std::invalid_argument(
        "bfloat16 reductions of CUDA buffers run on host memory: use staged transfers, not direct");
  }
  return mpi_op(op, buffer.dtype());
}

void finish_average(const Communicator& comm, kernels::Buffer& buffer, ReduceOp op) {
  if (op != ReduceOp::avg) return;
  if (buffer.dtype() != kernels::DType::bf16) {
    kernels::scale(buffer, 1.0 / comm.size(), buffer);
    return;
  }
  kernels::Buffer wide(buffer.numel(), kernels::DType::f32, buffer.device());
  kernels::convert(buffer, wide);
  kernels::scale(wide, 1.0 / comm.size(), wide);
  kernels::convert(wide, buffer);
}

}  // namespace mpitron::comm
