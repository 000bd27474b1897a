// Activation recomputation: trade one more forward pass of a layer for not keeping its
// activations between forward and backward (torch.utils.checkpoint; Megatron-LM's "full"
// recompute, Korthikanti et al. 2022, arXiv:2205.05198).
#pragma once

#include <functional>

#include "autograd/tensor.h"

namespace mpitron::autograd {

/// A differentiable function of one tensor, e.g. a transformer block's forward.
using Recomputable = std::function<Tensor(const Tensor&)>;

/// Returns fn(x) computed without recording a graph, keeping only `x` (and `fn`) for backward.
/// Backward runs fn again on x with the graph recorded and propagates the output gradient
/// through it: the parameters fn uses receive their gradients (and fire their post-accumulate
/// hooks) inside that inner pass, and x receives its own. A parameter used by two checkpointed
/// regions therefore fires its hook once per region in one backward pass (which
/// nn::DataParallelGradients at dp > 1 reports as an error). x: any shape; the output: whatever fn
/// returns. fn must give the same result when run again (no randomness, no state changed in
/// between); collectives inside it run again in backward, on every rank alike. With grad mode
/// off this is just fn(x); the recomputation in backward records its graph even when backward
/// itself runs with grad mode off. The graph is recorded even when x does not require grad, so the
/// parameters still get gradients.
Tensor recompute(const Recomputable& fn, const Tensor& x);

}  // namespace mpitron::autograd
