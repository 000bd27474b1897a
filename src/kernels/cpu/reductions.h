// CPU reference loops for the ops that reduce: sums, row maxima, softmax rows and the MSE loss.
// Every sum accumulates in double, so float32 results are one rounding away from the exact sum.
// On cpu_threads() threads (parallel.h): rows, or blocks of 64 columns, go to threads whole, and
// the sums over all elements are blocked_sum's, so results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "kernels/cpu/parallel.h"
#include "kernels/fault_injection.h"

namespace mpitron::kernels::cpu {

struct Reductions {
  /// out[0] = sum_i x[i], in blocked_sum's order.
  template <class T>
  static void sum(const T* x, std::size_t n, T* out) {
    out[0] = static_cast<T>(blocked_sum(n, [=](std::size_t i) { return double(x[i]); }));
  }

  /// out[c] = sum_r x[r, c] for x [rows, cols], each column summed in row order. Columns go in
  /// blocks of kColumnBlock (one thread's each), so the double accumulators stay on the stack
  /// while x is still read row by row.
  template <class T>
  static void sum_rows(const T* x, std::size_t rows, std::size_t cols, T* out) {
    parallel_column_blocks(cols, [=](std::size_t c0, auto width) {
      double acc[kColumnBlock] = {};
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t j = 0; j < width; ++j)
          acc[j] += x[r * cols + c0 + j];
      }
      for (std::size_t j = 0; j < width; ++j)
        out[c0 + j] = static_cast<T>(acc[j]);
    });
  }

  /// y[r, :] = softmax(scale x[r, :]) over the row's first `valid` entries (all of them, or
  /// i + 1 for query position i = r % cols when causal); the rest of the row is 0.
  template <class T>
  static void softmax_forward(const T* x, std::size_t rows, std::size_t cols, T* y, bool causal,
                              T scale) {
    const std::size_t one_late = fault_active(Fault::causal_mask_one_late) ? 1 : 0;
    parallel_rows(rows, cols, [=](std::size_t r) {
      const T* xr = x + r * cols;
      T* yr = y + r * cols;
      const std::size_t valid = causal ? std::min(cols, r % cols + 1 + one_late) : cols;
      T max = scale * xr[0];
      for (std::size_t c = 1; c < valid; ++c)
        max = std::max(max, scale * xr[c]);
      double total = 0.0;
      for (std::size_t c = 0; c < valid; ++c) {
        yr[c] = std::exp(scale * xr[c] - max);
        total += yr[c];
      }
      const T inv = static_cast<T>(1.0 / total);
      for (std::size_t c = 0; c < valid; ++c)
        yr[c] *= inv;
      std::fill(yr + valid, yr + cols, T(0));
    });
  }

  /// dx[r, c] = scale y[r, c] (dy[r, c] - sum_c' dy[r, c'] y[r, c']).
  template <class T>
  static void softmax_backward(const T* y, const T* dy, std::size_t rows, std::size_t cols, T* dx,
                               T scale) {
    const bool no_row_dot = fault_active(Fault::softmax_backward_no_row_dot);
    parallel_rows(rows, cols, [=](std::size_t r) {
      const std::size_t base = r * cols;
      double dot = 0.0;
      for (std::size_t c = 0; c < cols; ++c)
        dot += static_cast<double>(dy[base + c]) * y[base + c];
      if (no_row_dot) dot = 0.0;
      for (std::size_t c = 0; c < cols; ++c) {
        dx[base + c] = scale * (y[base + c] * (dy[base + c] - static_cast<T>(dot)));
      }
    });
  }

  /// out[r] = max_{c < used_cols} x[r, c], the lowest finite T when used_cols = 0.
  template <class T>
  static void row_max(const T* x, std::size_t rows, std::size_t cols, std::size_t used_cols,
                      T* out) {
    parallel_rows(rows, cols, [=](std::size_t r) {
      const T* row = x + r * cols;
      out[r] = used_cols == 0 ? std::numeric_limits<T>::lowest()
                              : math::lane_max(row, used_cols, row[0]);
    });
  }

  /// out[0] = sum_i x[i]^2, in blocked_sum's order.
  template <class T>
  static void sum_squares(const T* x, std::size_t n, T* out) {
    out[0] = static_cast<T>(blocked_sum(n, [=](std::size_t i) {
      const double v = x[i];
      return v * v;
    }));
  }

  /// loss[0] = mean_i (pred[i] - target[i])^2 (the sum in blocked_sum's order); NaN for n = 0, as
  /// torch.nn.functional.mse_loss.
  template <class T>
  static void mse_forward(const T* pred, const T* target, std::size_t n, T* loss) {
    const double acc = blocked_sum(n, [=](std::size_t i) {
      const double d = static_cast<double>(pred[i]) - target[i];
      return d * d;
    });
    loss[0] = static_cast<T>(acc / static_cast<double>(n));
  }
};

}  // namespace mpitron::kernels::cpu
