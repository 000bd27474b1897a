// CUDA kernels of the Llama family's ops: RMSNorm forward and dx one block per row (block
// reductions in double), dweight one thread per column summing over the rows (deterministic, no
// atomics); RoPE one thread per (token, pair) and SwiGLU one thread per element. The CPU loops
// are cpu/llama_ops.h; the formulas are shared through llama_math.h.
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/llama_math.h"

namespace mpitron::kernels::cuda {
namespace {

template <class T>
__global__ void rms_norm_rows(const T* x, const T* weight, std::size_t cols, double eps, T* y,
                              T* rstd) {
  const std::size_t r = blockIdx.x;
  const T* xr = x + r * cols;
  double squares = 0.0;
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x)
    squares += static_cast<double>(xr[c]) * xr[c];
  const T s = static_cast<T>(math::rms_norm_rstd(block_reduce(squares, Plus{}, 0.0), cols, eps));
  if (threadIdx.x == 0) rstd[r] = s;
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x)
    y[r * cols + c] = math::rms_norm_y(xr[c], s, weight[c]);
}

template <class T, class In>
__global__ void rms_norm_dx_rows(const In* x, const T* weight, const T* rstd, const T* dy,
                                 std::size_t cols, T* dx) {
  const std::size_t r = blockIdx.x;
  const std::size_t base = r * cols;
  const T s = rstd[r];
  double sum_g_xhat = 0.0;
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x)
    sum_g_xhat +=
        static_cast<double>(dy[base + c]) * weight[c] * (static_cast<T>(widen(x[base + c])) * s);
  const T mean_g_xhat =
      static_cast<T>(block_reduce(sum_g_xhat, Plus{}, 0.0) / static_cast<double>(cols));
  for (std::size_t c = threadIdx.x; c < cols; c += blockDim.x)
    dx[base + c] = math::rms_norm_dx(dy[base + c] * weight[c],
                                     static_cast<T>(widen(x[base + c])) * s, s, mean_g_xhat);
}

}  // namespace

template <class T>
void Kernels::rms_norm_forward(const T* x, const T* weight, std::size_t rows, std::size_t cols,
                               double eps, T* y, T* rstd) {
  rms_norm_rows<<<row_blocks(rows), kRowThreads>>>(x, weight, cols, eps, y, rstd);
  MPITRON_CUDA_CHECK(cudaGetLastError());
}

template <class T, class In>
void Kernels::rms_norm_backward(const In* x, const T* weight, const T* rstd, const T* dy,
                                std::size_t rows, std::size_t cols, T* dx, T* dweight) {
  rms_norm_dx_rows<<<row_blocks(rows), kRowThreads>>>(x, weight, rstd, dy, cols, dx);
  MPITRON_CUDA_CHECK(cudaGetLastError());
  for_each(cols, [=] __device__(std::size_t c) {
    double dw = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t i = r * cols + c;
      dw += static_cast<double>(dy[i]) * (static_cast<T>(widen(x[i])) * rstd[r]);
    }
    dweight[c] = static_cast<T>(dw);
  });
}

template <class T>
void Kernels::rotary_embedding(const T* x, std::size_t tokens, std::size_t seq, std::size_t heads,
                               std::size_t head_dim, const RopeFrequencies& rope,
                               std::int64_t position_offset, bool inverse, T* y) {
  const std::size_t half = head_dim / 2, width = heads * head_dim;
  for_each(tokens * half, [=] __device__(std::size_t k) {
    const std::size_t t = k / half, i = k % half;
    const auto position = static_cast<double>(position_offset + static_cast<std::int64_t>(t % seq));
    const math::RotaryCosSin<T> cs = math::rotary_cos_sin<T>(position, i, head_dim, rope, inverse);
    for (std::size_t h = 0; h < heads; ++h) {
      const std::size_t lo = t * width + h * head_dim + i;
      const math::RotaryPair<T> r = math::rotary_rotate(x[lo], x[lo + half], cs);
      y[lo] = r.lo;
      y[lo + half] = r.hi;
    }
  });
}

template <class T>
void Kernels::swiglu_forward(const T* gate, const T* up, T* y, std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) { y[i] = math::swiglu(gate[i], up[i]); });
}

template <class T, class In>
void Kernels::swiglu_backward(const In* gate, const In* up, const T* dy, T* dgate, T* dup,
                              std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) {
    const math::SwigluGrads<T> g =
        math::swiglu_grads(static_cast<T>(widen(gate[i])), static_cast<T>(widen(up[i])), dy[i]);
    dgate[i] = g.dgate;
    dup[i] = g.dup;
  });
}

#define MPITRON_INSTANTIATE(T)                                                                     \
  template void Kernels::rms_norm_forward<T>(const T*, const T*, std::size_t, std::size_t, double, \
                                             T*, T*);                                              \
  template void Kernels::rms_norm_backward<T, T>(const T*, const T*, const T*, const T*,           \
                                                 std::size_t, std::size_t, T*, T*);                \
  template void Kernels::rotary_embedding<T>(const T*, std::size_t, std::size_t, std::size_t,      \
                                             std::size_t, const RopeFrequencies&, std::int64_t,    \
                                             bool, T*);                                            \
  template void Kernels::swiglu_forward<T>(const T*, const T*, T*, std::size_t);                   \
  template void Kernels::swiglu_backward<T, T>(const T*, const T*, const T*, T*, T*, std::size_t);
MPITRON_INSTANTIATE(float)
MPITRON_INSTANTIATE(double)
#undef MPITRON_INSTANTIATE
template void Kernels::rms_norm_backward<float, bf16>(const bf16*, const float*, const float*,
                                                      const float*, std::size_t, std::size_t,
                                                      float*, float*);
template void Kernels::swiglu_backward<float, bf16>(const bf16*, const bf16*, const float*, float*,
                                                    float*, std::size_t);

}  // namespace mpitron::kernels::cuda
