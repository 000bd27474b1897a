// The backward of a loss on a head's logits run twice, once with the caller still holding the
// logits and once without: the shared check that a cross-entropy writes its logit gradient over
// logits no one else holds (autograd::cross_entropy, nn::vocab_parallel_cross_entropy).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tensor.h"

namespace mpitron::test {

/// What one backward through the loss did on the host allocator.
struct LossBackward {
  std::vector<double> grad_x, grad_w;  ///< the head's input and weight gradients
  std::size_t peak_above_start = 0;    ///< bytes in use at backward's peak above its start
  bool logits_unchanged = true;        ///< the held logits equal their copy after backward
};

/// logits = linear(x, w) for x [rows, in] and w [cols, in] (float32, seeded), then
/// loss(logits).backward(); with `hold_logits` the caller's handle on the logits outlives the
/// backward (and the logits are compared with their copy), without it the loss holds the only
/// one. Both runs compute the same gradients; without the handle the backward needs one [rows,
/// cols] buffer less.
LossBackward loss_backward(std::size_t rows, std::size_t in, std::size_t cols,
                           const std::function<autograd::Tensor(const autograd::Tensor&)>& loss,
                           bool hold_logits);

}  // namespace mpitron::test
