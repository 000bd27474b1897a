// CPU reference loops of cross-entropy on a vocabulary slice (columns [first_col, first_col +
// cols) of the logits): per-row statistics, the loss (a sum over the rows whose target is not
// kIgnoreTarget, over a divisor) and the logit gradient. Sums accumulate in double
// (math::lane_sum); exponentials of float32 logits go through the vectorizable exp_f32
// (NonPositiveExp). The per-row kernels run rows on cpu_threads() threads
// (parallel.h); the sum over the rows stays one ordered loop (a few thousand terms).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/erf_f32.h"
#include "kernels/cpu/parallel.h"
#include "kernels/math.h"

namespace mpitron::kernels::cpu {

struct CrossEntropy {
  /// sum_exp[r] = sum_{c < used_cols} exp(logits[r, c] - row_max[r]); target_logit[r] = the
  /// target's logit when its column is one of the slice's used columns, else 0.
  template <class T, class I>
  static void cross_entropy_stats(const T* logits, std::size_t rows, std::size_t cols,
                                  std::size_t used_cols, const I* targets, std::int64_t first_col,
                                  const T* row_max, T* sum_exp, T* target_logit) {
    parallel_rows(rows, cols, [=](std::size_t r) {
      const T* lr = logits + r * cols;
      const T max = row_max[r];
      sum_exp[r] = static_cast<T>(math::lane_sum<double>(used_cols, [=](std::size_t c) {
        return static_cast<double>(NonPositiveExp{}(lr[c] - max));
      }));
      const std::int64_t col = math::slice_row(targets[r], first_col, used_cols);
      target_logit[r] = col < 0 ? T(0) : lr[col];
    });
  }

  /// loss[0] = (sum of the counted rows' log sum_exp[r] + row_max[r] - target_logit[r]) /
  /// divisor, 0 when divisor is 0.
  template <class T, class I>
  static void cross_entropy_loss(const T* row_max, const T* sum_exp, const T* target_logit,
                                 const I* targets, std::size_t rows, double divisor, T* loss) {
    double total = 0.0;
    for (std::size_t r = 0; r < rows; ++r)
      total += math::cross_entropy_term(row_max[r], sum_exp[r], target_logit[r], targets[r]);
    loss[0] = static_cast<T>(math::cross_entropy_scaled(total, divisor));
  }

  /// dlogits[r, c] = dloss / divisor (softmax - onehot) for c < used_cols of a counted row, 0 for
  /// the padding and for an ignored row.
  template <class T, class I>
  static void cross_entropy_backward(const T* logits, std::size_t rows, std::size_t cols,
                                     std::size_t used_cols, const I* targets,
                                     std::int64_t first_col, const T* row_max, const T* sum_exp,
                                     const T* dloss, double divisor, T* dlogits) {
    const T coef = static_cast<T>(math::cross_entropy_scaled(dloss[0], divisor));
    parallel_rows(rows, cols, [=](std::size_t r) {
      T* dr = dlogits + r * cols;
      const std::size_t counted_cols = math::counts_target(targets[r]) ? used_cols : 0;
      const std::int64_t target = math::slice_row(targets[r], first_col, used_cols);
      const T max = row_max[r], total = sum_exp[r];
      const T* lr = logits + r * cols;
      for (std::size_t c = 0; c < counted_cols; ++c) {
        dr[c] = math::cross_entropy_grad(lr[c], max, total, static_cast<std::int64_t>(c) == target,
                                         coef, NonPositiveExp{});
      }
      std::fill(dr + counted_cols, dr + cols, T(0));
    });
  }
};

}  // namespace mpitron::kernels::cpu
