// CPU reference loops for the element-wise ops (one pass over memory each). `out` may alias an
// input: every loop reads element i before writing element i.
#pragma once

#include <cstddef>

#include "kernels/math.h"

namespace mpitron::kernels::cpu {

template <class T>
void fill(T* out, std::size_t n, T value) {
  for (std::size_t i = 0; i < n; ++i)
    out[i] = value;
}

/// out[i] = f(a[i], b[i]).
template <class T, class F>
void binary(const T* a, const T* b, T* out, std::size_t n, F f) {
  for (std::size_t i = 0; i < n; ++i)
    out[i] = f(a[i], b[i]);
}

/// out[i] = f(x[i]).
template <class T, class F>
void unary(const T* x, T* out, std::size_t n, F f) {
  for (std::size_t i = 0; i < n; ++i)
    out[i] = f(x[i]);
}

/// out[r, c] = x[r, c] + bias[c] for x, out [rows, cols].
template <class T>
void bias_add(const T* x, const T* bias, std::size_t rows, std::size_t cols, T* out) {
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c)
      out[r * cols + c] = x[r * cols + c] + bias[c];
  }
}

template <class T>
void gelu_forward(const T* x, T* y, std::size_t n, GeluForm form) {
  unary(x, y, n, [form](T v) { return math::gelu(v, form); });
}

template <class T>
void gelu_backward(const T* x, const T* dy, T* dx, std::size_t n, GeluForm form) {
  binary(x, dy, dx, n, [form](T v, T g) { return g * math::gelu_grad(v, form); });
}

}  // namespace mpitron::kernels::cpu
