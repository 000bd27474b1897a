// The four tensor-parallel "mappings": autograd Functions that move activations and gradients
// across the TP group. Shoeybi et al., "Megatron-LM", arXiv:1909.08053, sec. 3 (the f and g
// operators). Each rank of the TP communicator calls them collectively, in the same order.
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

/// Forward all-reduces (sums) the partial outputs of a row-parallel layer over `tp`; backward is
/// the identity ("g" in Megatron-LM). x: any shape, same on every rank.
Tensor reduce_from_tp(const Tensor& x, const comm::Communicator& tp);

/// Forward all-gathers the last dim: x [..., n/tp] -> [..., n], rank r's shard at columns
/// [r n/tp, (r+1) n/tp); backward keeps this rank's columns of the gradient.
Tensor gather_from_tp(const Tensor& x, const comm::Communicator& tp);

/// Forward keeps this rank's shard of the last dim: x [..., n] -> [..., n/tp]; backward
/// all-gathers the gradient. Throws std::invalid_argument when n is not divisible by tp.
Tensor scatter_to_tp(const Tensor& x, const comm::Communicator& tp);

}  // namespace mpitron::nn
