// CPU reference loops of the embedding gather (forward) and scatter-add (backward) on a slice
// [first_row, first_row + rows) of a table; rows outside the slice read as zero and take no
// gradient. The backward runs in index order, so repeated indices accumulate deterministically.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/math.h"

namespace mpitron::kernels::cpu {

struct Embedding {
  /// out[i, :] = weight[indices[i] - first_row, :], or 0 outside the slice.
  template <class T, class I>
  static void embedding_forward(const T* weight, std::size_t rows, std::size_t cols,
                                const I* indices, std::size_t n, std::int64_t first_row, T* out) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t row = math::slice_row(indices[i], first_row, rows);
      T* dst = out + i * cols;
      if (row < 0) {
        std::fill(dst, dst + cols, T(0));
      } else {
        std::copy_n(weight + static_cast<std::size_t>(row) * cols, cols, dst);
      }
    }
  }

  /// dweight[indices[i] - first_row, :] += dout[i, :] inside the slice.
  template <class T, class I>
  static void embedding_backward(const T* dout, const I* indices, std::size_t n,
                                 std::int64_t first_row, std::size_t rows, std::size_t cols,
                                 T* dweight) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t row = math::slice_row(indices[i], first_row, rows);
      if (row < 0) continue;
      T* dst = dweight + static_cast<std::size_t>(row) * cols;
      for (std::size_t c = 0; c < cols; ++c)
        dst[c] += dout[i * cols + c];
    }
  }
};

}  // namespace mpitron::kernels::cpu
