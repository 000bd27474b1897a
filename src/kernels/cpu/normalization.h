// CPU reference loops of LayerNorm (Ba, Kiros & Hinton, arXiv:1607.06450) forward and backward.
// Row statistics (math::lane_sum) and column sums accumulate in double. Rows, and blocks of
// columns for the column sums, go to cpu_threads() threads whole (parallel.h): the same bits for
// any count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/bf16.h"
#include "kernels/cpu/parallel.h"
#include "kernels/fault_injection.h"
#include "kernels/math.h"

namespace mpitron::kernels::cpu {

struct Normalization {
  /// Per row: mean, biased variance (two passes), rstd = 1 / sqrt(var + eps), then
  /// xhat = (x - mean) rstd and y = xhat weight + bias; xhat stored as T, or rounded once to
  /// bfloat16 (Kept = bf16, T = float: y is still computed from the float32 value).
  template <class T, class Kept>
  static void layer_norm_forward(const T* x, const T* weight, const T* bias, std::size_t rows,
                                 std::size_t cols, double eps, T* y, Kept* xhat, T* rstd) {
    parallel_rows(rows, cols, [=](std::size_t r) {
      const T* xr = x + r * cols;
      const double mu =
          math::lane_sum<double>(cols, [=](std::size_t c) { return static_cast<double>(xr[c]); }) /
          static_cast<double>(cols);
      const double squares = math::lane_sum<double>(cols, [=](std::size_t c) {
        const double centered = xr[c] - mu;
        return centered * centered;
      });
      const T row_mean = static_cast<T>(mu);
      const T row_rstd = static_cast<T>(1.0 / std::sqrt(squares / static_cast<double>(cols) + eps));
      rstd[r] = row_rstd;
      T* yr = y + r * cols;
      Kept* xhatr = xhat + r * cols;
      for (std::size_t c = 0; c < cols; ++c) {
        const T h = (xr[c] - row_mean) * row_rstd;
        xhatr[c] = keep_as<Kept>(h);
        yr[c] = h * weight[c] + bias[c];
      }
    });
  }

  /// dx row by row from xhat and the two row means of g = dy weight and g xhat; dweight and
  /// dbias as column sums over the rows, kColumnBlock columns at a time so the double
  /// accumulators stay local. xhat of T, or bfloat16 widened exactly (In = bf16, T = float).
  template <class T, class In>
  static void layer_norm_backward(const In* xhat, const T* weight, const T* rstd, const T* dy,
                                  std::size_t rows, std::size_t cols, T* dx, T* dweight, T* dbias) {
    const bool dx_no_mean = fault_active(Fault::layer_norm_dx_no_mean);
    parallel_rows(rows, cols, [=](std::size_t r) {
      const In* xhatr = xhat + r * cols;
      const T* dyr = dy + r * cols;
      const T row_rstd = rstd[r];
      double sum_g = math::lane_sum<double>(
          cols, [=](std::size_t c) { return static_cast<double>(dyr[c]) * weight[c]; });
      const double sum_g_xhat = math::lane_sum<double>(cols, [=](std::size_t c) {
        return static_cast<double>(dyr[c]) * weight[c] * widen(xhatr[c]);
      });
      if (dx_no_mean) sum_g = 0.0;
      const T mean_g = static_cast<T>(sum_g / static_cast<double>(cols));
      const T mean_g_xhat = static_cast<T>(sum_g_xhat / static_cast<double>(cols));
      T* dxr = dx + r * cols;
      for (std::size_t c = 0; c < cols; ++c)
        dxr[c] =
            math::layer_norm_dx(dyr[c] * weight[c], widen(xhatr[c]), row_rstd, mean_g, mean_g_xhat);
    });
    parallel_column_blocks(cols, [=](std::size_t c0, auto width) {
      double dw[kColumnBlock] = {}, db[kColumnBlock] = {};
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t j = 0; j < width; ++j) {
          const std::size_t i = r * cols + c0 + j;
          dw[j] += static_cast<double>(dy[i]) * widen(xhat[i]);
          db[j] += dy[i];
        }
      }
      for (std::size_t j = 0; j < width; ++j) {
        dweight[c0 + j] = static_cast<T>(dw[j]);
        dbias[c0 + j] = static_cast<T>(db[j]);
      }
    });
  }
};

}  // namespace mpitron::kernels::cpu
