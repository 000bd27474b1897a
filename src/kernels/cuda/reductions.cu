// Reducing CUDA kernels: whole-buffer sums in one block (deterministic: no atomics), column sums
// one thread per column, softmax and row maxima one block per row. Every sum accumulates in double,
// as the CPU reference loops in cpu/reductions.h do.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/kernels.h"

namespace mpitron::kernels::cuda {
namespace {

/// y[r, :] = softmax(scale x[r, :]) over the row's first `valid` entries (all, or i + 1 for
/// query position i = r % cols when causal), zero beyond; one block per row.
template <class T>
__global__ void softmax_rows(const T* x, std::size_t cols, T* y, bool causal, T scale) {
  using std::exp;
  const T* xr = x + blockIdx.x * cols;
  T* yr = y + blockIdx.x * cols;
  const std::size_t valid = causal ? blockIdx.x % cols + 1 : cols;
  T max = scale * xr[0];
  for (std::size_t c = threadIdx.x; c < valid; c += blockDim.x)
    max = Larger{}(max, scale * xr[c]);
  max = block_reduce(max, Larger{}, scale * xr[0]);
  double total = 0.0;
  for (std::size_t c = threadIdx.x; c < valid; c += blockDim.x) {
    yr[c] = exp(scale * xr[c] - max);
    total += yr[c];
  }
  const T inv = static_cast<T>(1.0 / block_reduce(total, Plus{}, 0.0));
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = c < valid ? yr[c] * inv : T(0);
}

template <class T>
__global__ void softmax_backward_rows(const T* y, const T* dy, std::size_t cols, T* dx, T scale) {
  const std::size_t base = blockIdx.x * cols;
  double dot = 0.0;
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x) {
    dot += static_cast<double>(dy[base + c]) * y[base + c];
  }
  const T total = static_cast<T>(block_reduce(dot, Plus{}, 0.0));
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x) {
    dx[base + c] = scale * (y[base + c] * (dy[base + c] - total));
  }
}

template <class T>
__global__ void max_of_rows(const T* x, std::size_t cols, std::size_t used_cols, T lowest, T* out) {
  const T* xr = x + blockIdx.x * cols;
  T max = lowest;
  for (std::size_t c = threadIdx.x; c < used_cols; c += blockDim.x)
    max = Larger{}(max, xr[c]);
  max = block_reduce(max, Larger{}, lowest);
  if (threadIdx.x == 0) out[blockIdx.x] = max;
}

}  // namespace

template <class T>
void Kernels::sum(const T* x, std::size_t n, T* out) {
  launch_reduce(
      n, [=] __device__(std::size_t i) { return static_cast<double>(x[i]); }, 1.0, out);
}

template <class T>
void Kernels::mse_forward(const T* pred, const T* target, std::size_t n, T* loss) {
  auto square = [=] __device__(std::size_t i) {
    const double d = static_cast<double>(pred[i]) - target[i];
    return d * d;
  };
  launch_reduce(n, square, static_cast<double>(n), loss);
}

template <class T>
void Kernels::sum_rows(const T* x, std::size_t rows, std::size_t cols, T* out) {
  for_each(cols, [=] __device__(std::size_t c) {
    double acc = 0.0;
    for (std::size_t r = 0; r < rows; ++r)
      acc += x[r * cols + c];
    out[c] = static_cast<T>(acc);
  });
}

template <class T>
void Kernels::sum_squares(const T* x, std::size_t n, T* out) {
  launch_reduce(
      n,
      [=] __device__(std::size_t i) {
        const double v = x[i];
        return v * v;
      },
      1.0, out);
}

template <class T>
void Kernels::softmax_forward(const T* x, std::size_t rows, std::size_t cols, T* y, bool causal,
                              T scale) {
  softmax_rows<<<row_blocks(rows), kRowThreads>>>(x, cols, y, causal, scale);
  MPITRON_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void Kernels::softmax_backward(const T* y, const T* dy, std::size_t rows, std::size_t cols, T* dx,
                               T scale) {
  softmax_backward_rows<<<row_blocks(rows), kRowThreads>>>(y, dy, cols, dx, scale);
  MPITRON_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void Kernels::row_max(const T* x, std::size_t rows, std::size_t cols, std::size_t used_cols,
                      T* out) {
  max_of_rows<<<row_blocks(rows), kRowThreads>>>(x, cols, used_cols,
                                                 std::numeric_limits<T>::lowest(), out);
  MPITRON_CUDA_CHECK(cudaGetLastError());
}

#define MPITRON_INSTANTIATE(T)                                                                \
  template void Kernels::sum<T>(const T*, std::size_t, T*);                                   \
  template void Kernels::sum_squares<T>(const T*, std::size_t, T*);                           \
  template void Kernels::mse_forward<T>(const T*, const T*, std::size_t, T*);                 \
  template void Kernels::sum_rows<T>(const T*, std::size_t, std::size_t, T*);                 \
  template void Kernels::row_max<T>(const T*, std::size_t, std::size_t, std::size_t, T*);     \
  template void Kernels::softmax_forward<T>(const T*, std::size_t, std::size_t, T*, bool, T); \
  template void Kernels::softmax_backward<T>(const T*, const T*, std::size_t, std::size_t, T*, T);
MPITRON_INSTANTIATE(float)
MPITRON_INSTANTIATE(double)
#undef MPITRON_INSTANTIATE

}  // namespace mpitron::kernels::cuda
