// Reductions of bfloat16 buffers: each combination of two elements widens both to float32,
// combines them there and rounds the result to bfloat16 once (round to nearest even,
// kernels/bf16.h). mpitron's own algorithms call combine_bf16 at each step; MPI's collectives
// get the same function as a user-defined operation. So a sum over P ranks rounds once per
// combination: log2(P) times per element for recursive doubling, up to P - 1 times for the ring
// and for MPI's own algorithms (docs/comm.md, "bfloat16 reductions").
#pragma once

#include <mpi.h>

#include <cstddef>

#include "comm/reduce_op.h"
#include "kernels/bf16.h"

namespace mpitron::comm {

/// out[i] = bf16(float(first[i]) op float(second[i])) for i < count; sum and avg add (avg's
/// scaling comes after the reduction), max and min compare the float32 values (std::max and
/// std::min, so the operand order matters for NaN as in `combine`). `out` may be `first` or
/// `second`.
void combine_bf16(kernels::bf16* out, const kernels::bf16* first, const kernels::bf16* second,
                  std::size_t count, ReduceOp op);

/// The MPI operation that reduces MPI_UINT16_T words holding bfloat16 values with combine_bf16
/// (commutative; one per ReduceOp, created by MPI_Op_create on first use, which must come after
/// MPI_Init). The function runs on host memory only: callers stage CUDA buffers first.
MPI_Op bf16_mpi_op(ReduceOp op);

}  // namespace mpitron::comm
