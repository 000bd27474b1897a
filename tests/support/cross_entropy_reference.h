// Cross-entropy as naive loops in double: the reference of the autograd and the vocab-parallel
// cross-entropy tests (ignored targets and the divisor included).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace mpitron::test {

/// A loss and its gradient with respect to the logits.
struct CrossEntropyReference {
  double loss = 0.0;
  std::vector<double> grad;  ///< [rows, vocab], like the logits
};

/// The cross-entropy of logits [rows, vocab] (row-major) against targets [rows]: the sum over the
/// rows whose target is not kernels::kIgnoreTarget of log sum_v exp(logits[r, v]) -
/// logits[r, target], over `divisor` (0: the count of those rows; the loss is 0 when there are
/// none), and its gradient (softmax - onehot) / divisor on those rows, 0 on the others. Each row
/// is shifted by its max.
inline CrossEntropyReference cross_entropy_reference(const std::vector<double>& logits,
                                                     std::size_t vocab,
                                                     const std::vector<std::int64_t>& targets,
                                                     double divisor) {
  const auto counted = static_cast<double>(std::count_if(
      targets.begin(), targets.end(), [](std::int64_t t) { return t != kernels::kIgnoreTarget; }));
  const double d = divisor > 0.0 ? divisor : counted;
  CrossEntropyReference out;
  out.grad.assign(logits.size(), 0.0);
  double total = 0.0;
  for (std::size_t r = 0; r < targets.size(); ++r) {
    if (targets[r] == kernels::kIgnoreTarget) continue;
    const double* row = logits.data() + r * vocab;
    const double max = *std::max_element(row, row + vocab);
    double sum = 0.0;
    for (std::size_t v = 0; v < vocab; ++v)
      sum += std::exp(row[v] - max);
    const auto target = static_cast<std::size_t>(targets[r]);
    total += std::log(sum) + max - row[target];
    for (std::size_t v = 0; v < vocab; ++v)
      out.grad[r * vocab + v] = (std::exp(row[v] - max) / sum - (v == target ? 1.0 : 0.0)) / d;
  }
  out.loss = d > 0.0 ? total / d : 0.0;
  return out;
}

}  // namespace mpitron::test
