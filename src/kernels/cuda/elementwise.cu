// Element-wise CUDA kernels: each op is one grid-stride pass (for_each) with a device lambda.
// The CPU reference loops are cpu/elementwise.h; GELU's formulas are shared through math.h.
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/math.h"

namespace mpitron::kernels::cuda {

template <class T>
void Kernels::fill(T* out, std::size_t n, T value) {
  for_each(n, [=] __device__(std::size_t i) { out[i] = value; });
}

template <class T>
void Kernels::broadcast_scalar(const T* s, T alpha, T* out, std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) { out[i] = alpha * s[0]; });
}

template <class T>
void Kernels::add(const T* a, const T* b, T* out, std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) { out[i] = a[i] + b[i]; });
}

template <class T>
void Kernels::sub(const T* a, const T* b, T* out, std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) { out[i] = a[i] - b[i]; });
}

template <class T>
void Kernels::mul(const T* a, const T* b, T* out, std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) { out[i] = a[i] * b[i]; });
}

template <class T>
void Kernels::scale(const T* x, T alpha, T* out, std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) { out[i] = alpha * x[i]; });
}

template <class T>
void Kernels::axpy(T alpha, const T* x, T* y, std::size_t n) {
  for_each(n, [=] __device__(std::size_t i) { y[i] += alpha * x[i]; });
}

template <class T>
void Kernels::bias_add(const T* x, const T* bias, std::size_t rows, std::size_t cols, T* out) {
  for_each(rows * cols, [=] __device__(std::size_t i) { out[i] = x[i] + bias[i % cols]; });
}

template <class T>
void Kernels::gelu_forward(const T* x, T* y, std::size_t n, GeluForm form) {
  for_each(n, [=] __device__(std::size_t i) { y[i] = math::gelu(x[i], form); });
}

template <class T>
void Kernels::gelu_backward(const T* x, const T* dy, T* dx, std::size_t n, GeluForm form) {
  for_each(n, [=] __device__(std::size_t i) { dx[i] = dy[i] * math::gelu_grad(x[i], form); });
}

template <class T>
void Kernels::gelu_forward_backward(const T* x, const T* dy, T* y, T* dx, std::size_t n,
                                    GeluForm form) {
  for_each(n, [=] __device__(std::size_t i) {
    const math::GeluValueGrad<T> gelu = math::gelu_value_and_grad(x[i], form);
    const T g = dy[i];
    y[i] = gelu.value;
    dx[i] = g * gelu.grad;
  });
}

template <class T>
void Kernels::bias_gelu(T* y, const T* bias, std::size_t rows, std::size_t cols, T* g,
                        GeluForm form) {
  for_each(rows * cols, [=] __device__(std::size_t i) {
    const T pre = y[i] + bias[i % cols];
    y[i] = pre;
    g[i] = math::gelu(pre, form);
  });
}

void Kernels::bias_gelu_bf16(const bf16* pre, const float* bias, std::size_t rows, std::size_t cols,
                             bf16* g, GeluForm form) {
  for_each(rows * cols, [=] __device__(std::size_t i) {
    g[i] = to_bf16(math::gelu(bf16_to_float(pre[i]) + bias[i % cols], form));
  });
}

void Kernels::bias_gelu_backward_bf16(const bf16* pre, const float* bias, std::size_t rows,
                                      std::size_t cols, float* dg, bf16* g, GeluForm form) {
  for_each(rows * cols, [=] __device__(std::size_t i) {
    const math::GeluValueGrad<float> gelu =
        math::gelu_value_and_grad(bf16_to_float(pre[i]) + bias[i % cols], form);
    g[i] = to_bf16(gelu.value);
    dg[i] = dg[i] * gelu.grad;
  });
}

template <class T>
void Kernels::mse_backward(const T* pred, const T* target, const T* dloss, std::size_t n,
                           T* dpred) {
  const double two_over_n = 2.0 / static_cast<double>(n);
  for_each(n, [=] __device__(std::size_t i) {
    dpred[i] = static_cast<T>(two_over_n * dloss[0]) * (pred[i] - target[i]);
  });
}

template <class T>
void Kernels::adamw_update(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, std::size_t n,
                           const math::AdamWHyper<T>& hyper) {
  const math::AdamWHyper<T> h = hyper;  // captured by value into the device lambda
  for_each(n, [=] __device__(std::size_t i) {
    math::adamw(param[i], grad[i], exp_avg[i], exp_avg_sq[i], h);
  });
}

#define MPITRON_INSTANTIATE(T)                                                               \
  template void Kernels::fill<T>(T*, std::size_t, T);                                        \
  template void Kernels::broadcast_scalar<T>(const T*, T, T*, std::size_t);                  \
  template void Kernels::add<T>(const T*, const T*, T*, std::size_t);                        \
  template void Kernels::sub<T>(const T*, const T*, T*, std::size_t);                        \
  template void Kernels::mul<T>(const T*, const T*, T*, std::size_t);                        \
  template void Kernels::scale<T>(const T*, T, T*, std::size_t);                             \
  template void Kernels::axpy<T>(T, const T*, T*, std::size_t);                              \
  template void Kernels::bias_add<T>(const T*, const T*, std::size_t, std::size_t, T*);      \
  template void Kernels::gelu_forward<T>(const T*, T*, std::size_t, GeluForm);               \
  template void Kernels::gelu_backward<T>(const T*, const T*, T*, std::size_t, GeluForm);    \
  template void Kernels::gelu_forward_backward<T>(const T*, const T*, T*, T*, std::size_t,   \
                                                  GeluForm);                                 \
  template void Kernels::bias_gelu<T>(T*, const T*, std::size_t, std::size_t, T*, GeluForm); \
  template void Kernels::mse_backward<T>(const T*, const T*, const T*, std::size_t, T*);     \
  template void Kernels::adamw_update<T>(T*, const T*, T*, T*, std::size_t,                  \
                                         const math::AdamWHyper<T>&);
MPITRON_INSTANTIATE(float)
MPITRON_INSTANTIATE(double)
#undef MPITRON_INSTANTIATE
// Integer buffers (token ids) are only filled, never computed on.
template void Kernels::fill<std::int32_t>(std::int32_t*, std::size_t, std::int32_t);
template void Kernels::fill<std::int64_t>(std::int64_t*, std::size_t, std::int64_t);

}  // namespace mpitron::kernels::cuda
