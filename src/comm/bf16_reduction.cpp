#include "comm/bf16_reduction.h"

#include <algorithm>
#include <array>

#include "comm/errors.h"

namespace mpitron::comm {

namespace {

float combine_one(float a, float b, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      break;
    case ReduceOp::max:
      return std::max(a, b);
    case ReduceOp::min:
      return std::min(a, b);
  }
  return a + b;
}

// MPI's user-function signature: inout[i] = in[i] op inout[i].
template <ReduceOp kOp>
void reduce_words(void* in, void* inout, int* length, MPI_Datatype* /*type*/) {
  auto* target = static_cast<kernels::bf16*>(inout);
  combine_bf16(target, static_cast<const kernels::bf16*>(in), target,
               static_cast<std::size_t>(*length), kOp);
}

MPI_Op create(MPI_User_function* function) {
  MPI_Op op = MPI_OP_NULL;
  check_mpi(MPI_Op_create(function, 1, &op), "MPI_Op_create");
  return op;
}

}  // namespace

void combine_bf16(kernels::bf16* out, const kernels::bf16* first, const kernels::bf16* second,
                  std::size_t count, ReduceOp op) {
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = kernels::to_bf16(
        combine_one(kernels::bf16_to_float(first[i]), kernels::bf16_to_float(second[i]), op));
  }
}

MPI_Op bf16_mpi_op(ReduceOp op) {
  static const std::array<MPI_Op, 4> ops{
      create(&reduce_words<ReduceOp::sum>), create(&reduce_words<ReduceOp::avg>),
      create(&reduce_words<ReduceOp::max>), create(&reduce_words<ReduceOp::min>)};
  return ops[static_cast<std::size_t>(op)];
}

}  // namespace mpitron::comm
