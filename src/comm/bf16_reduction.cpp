#include "comm/bf16_reduction.h"

#include <algorithm>
#include <array>

#include "comm/errors.h"
#include "kernels/cpu/bf16_convert.h"

namespace mpitron::comm {

namespace {

// out[i] = bf16(f(float(first[i]), float(second[i]))) in chunks on the stack: widened (exactly),
// combined, rounded by the vector loops of kernels/cpu/bf16_convert.h. `out` may alias an input:
// each chunk is read before it is written.
template <class F>
void combine_in_chunks(kernels::bf16* out, const kernels::bf16* first, const kernels::bf16* second,
                       std::size_t count, F f) {
  constexpr std::size_t kChunk = 512;
  std::array<float, kChunk> a{}, b{};
  for (std::size_t begin = 0; begin < count; begin += kChunk) {
    const std::size_t n = std::min(kChunk, count - begin);
    kernels::cpu::widen_bf16(first + begin, a.data(), n);
    kernels::cpu::widen_bf16(second + begin, b.data(), n);
    for (std::size_t i = 0; i < n; ++i)
      a[i] = f(a[i], b[i]);
    kernels::cpu::round_to_bf16(a.data(), out + begin, n);
  }
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
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      kernels::cpu::add_bf16(first, second, out, count);  // one pass, in the kernels' vectors
      return;
    case ReduceOp::max:  // std::max and std::min: the operand order decides for NaN
      combine_in_chunks(out, first, second, count, [](float a, float b) { return std::max(a, b); });
      return;
    case ReduceOp::min:
      combine_in_chunks(out, first, second, count, [](float a, float b) { return std::min(a, b); });
      return;
  }
}

MPI_Op bf16_mpi_op(ReduceOp op) {
  static const std::array<MPI_Op, 4> ops{
      create(&reduce_words<ReduceOp::sum>), create(&reduce_words<ReduceOp::avg>),
      create(&reduce_words<ReduceOp::max>), create(&reduce_words<ReduceOp::min>)};
  return ops[static_cast<std::size_t>(op)];
}

}  // namespace mpitron::comm
