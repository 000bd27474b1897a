// Layout CUDA kernels: one thread per output element, index arithmetic only. The CPU reference
// loops are cpu/layout_ops.h.
#include <cstdint>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/kernels.h"

namespace mpitron::kernels::cuda {

template <class T>
void Kernels::transpose(const T* x, std::size_t outer, std::size_t d1, std::size_t mid,
                        std::size_t d2, std::size_t inner, T* y) {
  // i indexes y [outer, d2, mid, d1, inner]; read the same element of x [outer, d1, mid, d2,
  // inner].
  for_each(outer * d2 * mid * d1 * inner, [=] __device__(std::size_t i) {
    const std::size_t e = i % inner;
    std::size_t rest = i / inner;
    const std::size_t i1 = rest % d1;
    rest /= d1;
    const std::size_t m = rest % mid;
    rest /= mid;
    const std::size_t i2 = rest % d2;
    const std::size_t o = rest / d2;
    y[i] = x[(((o * d1 + i1) * mid + m) * d2 + i2) * inner + e];
  });
}

template <class T>
void Kernels::copy_rows(const T* src, std::size_t src_stride, T* dst, std::size_t dst_stride,
                        std::size_t rows, std::size_t row_len) {
  for_each(rows * row_len, [=] __device__(std::size_t i) {
    const std::size_t r = i / row_len;
    const std::size_t c = i % row_len;
    dst[r * dst_stride + c] = src[r * src_stride + c];
  });
}

#define MPITRON_INSTANTIATE(T)                                                             \
  template void Kernels::transpose<T>(const T*, std::size_t, std::size_t, std::size_t,     \
                                      std::size_t, std::size_t, T*);                       \
  template void Kernels::copy_rows<T>(const T*, std::size_t, T*, std::size_t, std::size_t, \
                                      std::size_t);
MPITRON_INSTANTIATE(float)
MPITRON_INSTANTIATE(double)
MPITRON_INSTANTIATE(std::int32_t)
MPITRON_INSTANTIATE(std::int64_t)
#undef MPITRON_INSTANTIATE
// copy_rows only moves elements, so it takes bfloat16 too (kernels::copy_rows).
template void Kernels::copy_rows<bf16>(const bf16*, std::size_t, bf16*, std::size_t, std::size_t,
                                       std::size_t);

}  // namespace mpitron::kernels::cuda
