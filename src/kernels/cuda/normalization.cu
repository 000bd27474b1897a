// LayerNorm CUDA kernels: forward and dx one block per row (block reductions in double), dweight
// and dbias one thread per column summing over the rows (deterministic, no atomics). The CPU
// reference loops are cpu/normalization.h; the dx formula is shared through math.h.
#include <cmath>

#include "kernels/bf16.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/math.h"

namespace mpitron::kernels::cuda {
namespace {

template <class T, class Kept>
__global__ void layer_norm_rows(const T* x, const T* weight, const T* bias, std::size_t cols,
                                double eps, T* y, Kept* xhat, T* rstd) {
  const std::size_t r = blockIdx.x;
  const T* xr = x + r * cols;
  double sum = 0.0;
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x)
    sum += xr[c];
  const double mu = block_reduce(sum, Plus{}, 0.0) / static_cast<double>(cols);
  double squares = 0.0;
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x)
    squares += (xr[c] - mu) * (xr[c] - mu);
  const double var = block_reduce(squares, Plus{}, 0.0) / static_cast<double>(cols);
  const T m = static_cast<T>(mu);
  const T s = static_cast<T>(1.0 / sqrt(var + eps));
  if (threadIdx.x == 0) rstd[r] = s;
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const T h = (xr[c] - m) * s;
    xhat[r * cols + c] = keep_as<Kept>(h);
    y[r * cols + c] = h * weight[c] + bias[c];
  }
}

template <class T, class In>
__global__ void layer_norm_dx_rows(const In* xhat, const T* weight, const T* rstd, const T* dy,
                                   std::size_t cols, T* dx) {
  const std::size_t r = blockIdx.x;
  const std::size_t base = r * cols;
  double sum_g = 0.0, sum_g_xhat = 0.0;
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const double g = static_cast<double>(dy[base + c]) * weight[c];
    sum_g += g;
    sum_g_xhat += g * static_cast<T>(widen(xhat[base + c]));
  }
  const T mean_g = static_cast<T>(block_reduce(sum_g, Plus{}, 0.0) / static_cast<double>(cols));
  const T mean_g_xhat =
      static_cast<T>(block_reduce(sum_g_xhat, Plus{}, 0.0) / static_cast<double>(cols));
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x) {
    dx[base + c] =
        math::layer_norm_dx(dy[base + c] * weight[c], static_cast<T>(widen(xhat[base + c])),
                            rstd[r], mean_g, mean_g_xhat);
  }
}

}  // namespace

template <class T, class Kept>
void Kernels::layer_norm_forward(const T* x, const T* weight, const T* bias, std::size_t rows,
                                 std::size_t cols, double eps, T* y, Kept* xhat, T* rstd) {
  layer_norm_rows<<<row_blocks(rows), kRowThreads>>>(x, weight, bias, cols, eps, y, xhat, rstd);
  MPITRON_CUDA_CHECK(cudaGetLastError());
}

template <class T, class In>
void Kernels::layer_norm_backward(const In* xhat, const T* weight, const T* rstd, const T* dy,
                                  std::size_t rows, std::size_t cols, T* dx, T* dweight, T* dbias) {
  layer_norm_dx_rows<<<row_blocks(rows), kRowThreads>>>(xhat, weight, rstd, dy, cols, dx);
  MPITRON_CUDA_CHECK(cudaGetLastError());
  for_each(cols, [=] __device__(std::size_t c) {
    double dw = 0.0, db = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t i = r * cols + c;
      dw += static_cast<double>(dy[i]) * static_cast<T>(widen(xhat[i]));
      db += dy[i];
    }
    dweight[c] = static_cast<T>(dw);
    dbias[c] = static_cast<T>(db);
  });
}

#define MPITRON_INSTANTIATE(T)                                                               \
  template void Kernels::layer_norm_forward<T, T>(const T*, const T*, const T*, std::size_t, \
                                                  std::size_t, double, T*, T*, T*);          \
  template void Kernels::layer_norm_backward<T, T>(const T*, const T*, const T*, const T*,   \
                                                   std::size_t, std::size_t, T*, T*, T*);
MPITRON_INSTANTIATE(float)
MPITRON_INSTANTIATE(double)
#undef MPITRON_INSTANTIATE
template void Kernels::layer_norm_forward<float, bf16>(const float*, const float*, const float*,
                                                       std::size_t, std::size_t, double, float*,
                                                       bf16*, float*);
template void Kernels::layer_norm_backward<float, bf16>(const bf16*, const float*, const float*,
                                                        const float*, std::size_t, std::size_t,
                                                        float*, float*, float*);

}  // namespace mpitron::kernels::cuda
