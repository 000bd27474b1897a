// Embedding CUDA kernels on a slice [first_row, first_row + rows) of a table: the gather is one
// thread per output element; the scatter-add is one thread per (column, group of rows) that walks
// the indices in order, so every dweight element adds its tokens in token order, as the CPU loop
// (cpu/embedding.h) does: the same bits on every run and on either device, where atomicAdd would
// add repeated indices in no fixed order.
#include <algorithm>
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

namespace {

inline constexpr std::size_t kScatterThreads = std::size_t{1} << 16;  // enough to fill a GPU

// Thread (column c, group blockIdx.y) adds dout[t][c] to dweight[row(t)][c] for t = 0, 1, ...
// whose row is in its group (row % groups). The indices pass through shared memory a tile at a
// time, as the block's row or -1 (another group's, or outside the slice); every thread of the
// block reads each one.
template <class T, class I>
__global__ void embedding_scatter_columns(const T* __restrict__ dout, const I* __restrict__ indices,
                                          std::size_t n, std::int64_t first_row, std::size_t rows,
                                          std::size_t cols, unsigned groups,
                                          T* __restrict__ dweight) {
  __shared__ std::int64_t tile[kThreads];
  const std::size_t c = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::size_t t0 = 0; t0 < n; t0 += kThreads) {
    const std::size_t t = t0 + threadIdx.x;
    const std::int64_t row = t < n ? math::slice_row(indices[t], first_row, rows) : -1;
    tile[threadIdx.x] =
        row >= 0 && static_cast<std::uint64_t>(row) % groups == blockIdx.y ? row : -1;
    __syncthreads();
    const std::size_t count = n - t0 < kThreads ? n - t0 : kThreads;
    for (std::size_t k = 0; c < cols && k < count; ++k) {
      const std::int64_t mine = tile[k];
      if (mine >= 0)
        dweight[static_cast<std::size_t>(mine) * cols + c] += dout[(t0 + k) * cols + c];
    }
    __syncthreads();
  }
}

}  // namespace

template <class T, class I>
void Kernels::embedding_backward(const T* dout, const I* indices, std::size_t n,
                                 std::int64_t first_row, std::size_t rows, std::size_t cols,
                                 T* dweight) {
  if (n == 0 || rows == 0 || cols == 0) return;
  const std::size_t column_blocks = (cols + kThreads - 1) / kThreads;
  const std::size_t wanted = kScatterThreads / (column_blocks * kThreads);
  const auto groups =
      static_cast<unsigned>(std::clamp<std::size_t>(wanted, 1, std::min<std::size_t>(rows, 65535)));
  embedding_scatter_columns<<<dim3(static_cast<unsigned>(column_blocks), groups), kThreads>>>(
      dout, indices, n, first_row, rows, cols, groups, dweight);
  MPITRON_CUDA_CHECK(cudaGetLastError());
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
