// Embedding CUDA kernels on a slice [first_row, first_row + rows) of a table: the gather is one
// thread per output element; the scatter-add is one thread per dout element with atomicAdd, so
// repeated indices accumulate in no fixed order. The CPU reference loops are cpu/embedding.h.
#include <cstdint>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/math.h"

namespace mpitron::kernels::cuda {

template <class T, class I>
void Kernels::embedding_forward(const T* weight, std::size_t rows, std::size_t cols,
                                const I* indices, std::size_t n, std::int64_t first_row, T* out) {
  for_each(n * cols, [=] __device__(std::size_t i) {
    const std::int64_t row = math::slice_row(indices[i / cols], first_row, rows);
    out[i] = row < 0 ? T(0) : weight[static_cast<std::size_t>(row) * cols + i % cols];
  });
}

template <class T, class I>
void Kernels::embedding_backward(const T* dout, const I* indices, std::size_t n,
                                 std::int64_t first_row, std::size_t rows, std::size_t cols,
                                 T* dweight) {
  for_each(n * cols, [=] __device__(std::size_t i) {
    const std::int64_t row = math::slice_row(indices[i / cols], first_row, rows);
    if (row >= 0) atomicAdd(dweight + static_cast<std::size_t>(row) * cols + i % cols, dout[i]);
  });
}

#define MPITRON_INSTANTIATE(T, I)                                                                \
  template void Kernels::embedding_forward<T, I>(const T*, std::size_t, std::size_t, const I*,   \
                                                 std::size_t, std::int64_t, T*);                 \
  template void Kernels::embedding_backward<T, I>(const T*, const I*, std::size_t, std::int64_t, \
                                                  std::size_t, std::size_t, T*);
MPITRON_INSTANTIATE(float, std::int32_t)
MPITRON_INSTANTIATE(float, std::int64_t)
MPITRON_INSTANTIATE(double, std::int32_t)
MPITRON_INSTANTIATE(double, std::int64_t)
#undef MPITRON_INSTANTIATE

}  // namespace mpitron::kernels::cuda
