// The tensor-parallel "mappings": autograd Functions that move activations and gradients across
// the TP group. Shoeybi et al., "Megatron-LM", arXiv:1909.08053, sec. 3 (the f and g operators);
// the sequence-parallel ones split activations [batch, seq, hidden] along seq between TP regions:
// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
// arXiv:2205.05198, sec. 4.2.2 (the g and g-bar operators; Megatron-LM's names). Each rank of the
// TP communicator calls them collectively, in the same order.
//
// They move activations and their gradients. Under kernels::GemmOperands::bfloat16 (train
// --bf16) every collective here carries a float32 tensor as bfloat16 on more than one rank,
// forward and backward, as Megatron-LM's bfloat16 activations and gradients travel: each rank's
// tensor is rounded to bfloat16 at the send (round to nearest even, kernels/bf16.h), a sum
// combines the ranks' values in float32 and rounds each combination once (comm::combine_bf16;
// log2(tp) roundings for comm's recursive doubling all-reduce and recursive halving
// reduce-scatter, docs/comm.md "bfloat16 reductions"), and the result is widened exactly to
// float32, the same on every rank for an all-reduce. Half the bytes of float32. A reduction of a
// CUDA tensor that MPI reads directly stays float32 (comm reduces bfloat16 on host memory only).
// float64 tensors, and float32 ones under float32 operands, travel as they are. So reduce a loss
// or another statistic with comm/, not with these.
//
// Errors: communication failures and deadline expiry are raised by comm/ (see comm/collectives.h).
#pragma once

#include "autograd/tensor.h"
#include "comm/communicator.h"

namespace mpitron::nn {

using autograd::Tensor;

/// Identity forward; backward all-reduces (sums) the input gradient over `tp`. Put in front of a
/// column-parallel layer, whose every shard reads the whole input ("f" in Megatron-LM).
/// x: any shape, replicated across `tp`.
Tensor copy_to_tp(const Tensor& x, const comm::Communicator& tp);

/// Whether the reductions here carry a float32 tensor on `device` over `tp` as bfloat16 (bfloat16
/// GEMM operands, tp > 1, a host reduction). A row-parallel layer then writes its partial sums as
/// bfloat16 (the bits the reduction would round them to) and hands them to reduce_from_tp or
/// reduce_scatter_to_sequence_parallel_region as they are.
bool reduces_as_bf16(autograd::Device device, const comm::Communicator& tp);

/// Forward all-reduces (sums) the partial outputs of a row-parallel layer over `tp`; backward is
/// the identity ("g" in Megatron-LM). x: any shape, same on every rank. A bfloat16 x (where
/// reduces_as_bf16) is reduced as it is and the result is float32, its gradient float32 too;
/// elsewhere a bfloat16 x throws std::invalid_argument, as it does for every gather here.
Tensor reduce_from_tp(const Tensor& x, const comm::Communicator& tp);

/// Forward all-gathers the last dim: x [..., n/tp] -> [..., n], rank r's shard at columns
/// [r n/tp, (r+1) n/tp); backward keeps this rank's columns of the gradient.
Tensor gather_from_tp(const Tensor& x, const comm::Communicator& tp);

/// Forward keeps this rank's shard of the last dim: x [..., n] -> [..., n/tp]; backward
/// all-gathers the gradient. Throws std::invalid_argument when n is not divisible by tp.
Tensor scatter_to_tp(const Tensor& x, const comm::Communicator& tp);

/// Forward all-gathers the sequence: x [batch, seq/tp, hidden] -> [batch, seq, hidden], rank r's
/// rows at [r seq/tp, (r+1) seq/tp); backward reduce-scatters (sums) the gradient back to this
/// rank's rows. Put in front of column-parallel layers under sequence parallelism ("g"). Throws
/// std::invalid_argument when x is not 3-D.
Tensor gather_from_sequence_parallel_region(const Tensor& x, const comm::Communicator& tp);

/// Forward reduce-scatters (sums) the partial outputs of a row-parallel layer along the
/// sequence: x [batch, seq, hidden] -> this rank's rows [batch, seq/tp, hidden]; backward
/// all-gathers the gradient ("g-bar"). A bfloat16 x as in reduce_from_tp. Throws
/// std::invalid_argument when x is not 3-D or seq is not divisible by tp.
Tensor reduce_scatter_to_sequence_parallel_region(const Tensor& x, const comm::Communicator& tp);

/// Forward keeps this rank's rows of the sequence: x [batch, seq, hidden] (the same on every TP
/// rank) -> [batch, seq/tp, hidden]; backward all-gathers the gradient. Throws
/// std::invalid_argument when x is not 3-D or seq is not divisible by tp.
Tensor scatter_to_sequence_parallel_region(const Tensor& x, const comm::Communicator& tp);

/// The input mapping of a tensor-parallel region (attention, MLP, the vocab-parallel head):
/// copy_to_tp, or with `sequence_parallel` gather_from_sequence_parallel_region (x then is
/// [batch, seq/tp, hidden] and the result [batch, seq, hidden]).
Tensor enter_tp_region(const Tensor& x, const comm::Communicator& tp, bool sequence_parallel);

/// The output mapping of a tensor-parallel region, on this rank's partial sums [batch, seq,
/// hidden]: reduce_from_tp, or with `sequence_parallel`
/// reduce_scatter_to_sequence_parallel_region (the result then is [batch, seq/tp, hidden]).
Tensor exit_tp_region(const Tensor& partial, const comm::Communicator& tp, bool sequence_parallel);

}  // namespace mpitron::nn
