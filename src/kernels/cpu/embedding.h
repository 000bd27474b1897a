// CPU reference loops of the embedding gather (forward) and scatter-add (backward) on a slice
// [first_row, first_row + rows) of a table; rows outside the slice read as zero and take no
// gradient. The backward runs in index order, so repeated indices accumulate deterministically.
// On cpu_threads() threads (parallel.h): the forward by output row, the backward by blocks of
// columns (each in index order), so the bits do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/parallel.h"
#include "kernels/math.h"

namespace mpitron::kernels::cpu {

struct Embedding {
  /// Columns per chunk of the backward's scatter-add (one thread's), whole rows at one thread.
  static constexpr std::size_t kColumnChunk = 256;

  /// out[i, :] = weight[indices[i] - first_row, :], or 0 outside the slice.
  template <class T, class I>
  static void embedding_forward(const T* weight, std::size_t rows, std::size_t cols,
                                const I* indices, std::size_t n, std::int64_t first_row, T* out) {
    parallel_rows(n, cols, [=](std::size_t i) {
      const std::int64_t row = math::slice_row(indices[i], first_row, rows);
      T* dst = out + i * cols;
      if (row < 0) {
        std::fill(dst, dst + cols, T(0));
      } else {
        std::copy_n(weight + static_cast<std::size_t>(row) * cols, cols, dst);
      }
    });
  }

  /// dweight[indices[i] - first_row, :] += dout[i, :] inside the slice.
  template <class T, class I>
  static void embedding_backward(const T* dout, const I* indices, std::size_t n,
                                 std::int64_t first_row, std::size_t rows, std::size_t cols,
                                 T* dweight) {
    parallel_chunks(cols, kColumnChunk, [=](std::size_t c0, std::size_t c1) {
      const std::size_t width = c1 - c0;
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t row = math::slice_row(indices[i], first_row, rows);
        if (row < 0) continue;
        T* dst = dweight + static_cast<std::size_t>(row) * cols + c0;
        const T* src = dout + i * cols + c0;
        for (std::size_t c = 0; c < width; ++c)
          dst[c] += src[c];
      }
    });
  }
};

}  // namespace mpitron::kernels::cpu
