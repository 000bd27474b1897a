// CPU reference loops for the ops that only move elements: transpose and copy_rows.
#pragma once

#include <algorithm>
#include <cstddef>

namespace mpitron::kernels::cpu {

struct Layout {
  /// x [outer, d1, mid, d2, inner] -> y [outer, d2, mid, d1, inner], `inner` elements at a time.
  template <class T>
  static void transpose(const T* x, std::size_t outer, std::size_t d1, std::size_t mid,
                        std::size_t d2, std::size_t inner, T* y) {
    for (std::size_t o = 0; o < outer; ++o) {
      for (std::size_t i1 = 0; i1 < d1; ++i1) {
        for (std::size_t m = 0; m < mid; ++m) {
          for (std::size_t i2 = 0; i2 < d2; ++i2) {
            const std::size_t src = (((o * d1 + i1) * mid + m) * d2 + i2) * inner;
            const std::size_t dst = (((o * d2 + i2) * mid + m) * d1 + i1) * inner;
            std::copy_n(x + src, inner, y + dst);
          }
        }
      }
    }
  }

  /// Row r: `row_len` elements from src[r * src_stride] to dst[r * dst_stride].
  template <class T>
  static void copy_rows(const T* src, std::size_t src_stride, T* dst, std::size_t dst_stride,
                        std::size_t rows, std::size_t row_len) {
    for (std::size_t r = 0; r < rows; ++r) {
      std::copy_n(src + r * src_stride, row_len, dst + r * dst_stride);
    }
  }
};

}  // namespace mpitron::kernels::cpu
