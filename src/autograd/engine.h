// The reverse-mode backward engine (internal to autograd; users call Tensor::backward).
#pragma once

#include "autograd/tensor.h"

namespace mpitron::autograd {

/// Propagates `grad_output` (root's shape) from `root` to every reachable leaf that requires
/// grad, visiting each Function once, after all of its output's consumers (reverse topological
/// order), and accumulating (summing) gradients that reach a tensor along several paths.
void run_backward(const Tensor& root, const Tensor& grad_output);

/// dst += src, allocating dst as a copy of src when it is undefined. Shapes must match.
void accumulate(Tensor& dst, const Tensor& src);

}  // namespace mpitron::autograd
