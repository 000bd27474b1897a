// CPU reference loops for the element-wise ops, one pass over memory each, on cpu_threads()
// threads (parallel.h). `out` may alias an input: every loop reads element i before it writes
// element i.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "kernels/cpu/bf16_convert.h"
#include "kernels/cpu/erf_f32.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/tanh_f32.h"
#include "kernels/fault_injection.h"
#include "kernels/math.h"

namespace mpitron::kernels::cpu {

struct Elementwise {
  template <class T>
  static void fill(T* out, std::size_t n, T value) {
    map(out, n, [=](std::size_t) { return value; });
  }

  /// out[i] = alpha * s[0].
  template <class T>
  static void broadcast_scalar(const T* s, T alpha, T* out, std::size_t n) {
    fill(out, n, alpha * s[0]);
  }

  template <class T>
  static void add(const T* a, const T* b, T* out, std::size_t n) {
    map(out, n, [=](std::size_t i) { return a[i] + b[i]; });
  }

  template <class T>
  static void sub(const T* a, const T* b, T* out, std::size_t n) {
    map(out, n, [=](std::size_t i) { return a[i] - b[i]; });
  }

  template <class T>
  static void mul(const T* a, const T* b, T* out, std::size_t n) {
    map(out, n, [=](std::size_t i) { return a[i] * b[i]; });
  }

  template <class T>
  static void scale(const T* x, T alpha, T* out, std::size_t n) {
    map(out, n, [=](std::size_t i) { return alpha * x[i]; });
  }

  template <class T>
  static void axpy(T alpha, const T* x, T* y, std::size_t n) {
    map(y, n, [=](std::size_t i) { return y[i] + alpha * x[i]; });
  }

  /// out[r, c] = x[r, c] + bias[c] for x, out [rows, cols]. Row by row, so the inner loop is a
  /// plain vector add (an index modulo cols per element cost as much as the add).
  template <class T>
  static void bias_add(const T* x, const T* bias, std::size_t rows, std::size_t cols, T* out) {
    parallel_rows(rows, cols, [=](std::size_t r) {
      const T* row = x + r * cols;
      T* out_row = out + r * cols;
      for (std::size_t c = 0; c < cols; ++c)
        out_row[c] = row[c] + bias[c];
    });
  }

  template <class T>
  static void gelu_forward(const T* x, T* y, std::size_t n, GeluForm form) {
    with_gelu<T>(form, [=](auto gelu) { map(y, n, [=](std::size_t i) { return gelu(x[i]); }); });
  }

  /// y[r, c] += bias[c], g[r, c] = gelu(y[r, c]) for y, g [rows, cols]; row by row as bias_add.
  template <class T>
  static void bias_gelu(T* y, const T* bias, std::size_t rows, std::size_t cols, T* g,
                        GeluForm form) {
    with_gelu<T>(form, [=](auto gelu) {
      parallel_rows(rows, cols, [=](std::size_t r) {
        T* y_row = y + r * cols;
        T* g_row = g + r * cols;
        for (std::size_t c = 0; c < cols; ++c) {
          const T pre = y_row[c] + bias[c];
          y_row[c] = pre;
          g_row[c] = gelu(pre);
        }
      });
    });
  }

  /// g[r, c] = bfloat16(gelu(float(pre[r, c]) + bias[c])) for a bfloat16 pre and g [rows, cols]:
  /// each row in blocks of kBf16RowBlock widened, biased, passed through GELU and rounded while
  /// the block stays in L1 (the bits of bias_add and gelu_forward on the widened rows).
  static void bias_gelu_bf16(const bf16* pre, const float* bias, std::size_t rows, std::size_t cols,
                             bf16* g, GeluForm form) {
    with_gelu<float>(form, [=](auto gelu) {
      parallel_rows(rows, cols, [=](std::size_t r) {
        alignas(64) float y[kBf16RowBlock];
        for (std::size_t c0 = 0; c0 < cols; c0 += kBf16RowBlock) {
          const std::size_t n = std::min(kBf16RowBlock, cols - c0);
          widen_bf16(pre + r * cols + c0, y, n);
          for (std::size_t i = 0; i < n; ++i)
            y[i] = gelu(y[i] + bias[c0 + i]);
          round_to_bf16(y, g + r * cols + c0, n);
        }
      });
    });
  }

  /// bias_gelu_bf16's backward: with y = float(pre[r, c]) + bias[c], g = bfloat16(gelu(y)) and
  /// dg = dg * gelu'(y) in place (float32 [rows, cols]), block by block as bias_gelu_bf16 (the
  /// bits of gelu_forward_backward on the widened, biased rows, G then rounded).
  static void bias_gelu_backward_bf16(const bf16* pre, const float* bias, std::size_t rows,
                                      std::size_t cols, float* dg, bf16* g, GeluForm form) {
    with_gelu_value_and_grad<float>(form, [=](auto value_and_grad) {
      parallel_rows(rows, cols, [=](std::size_t r) {
        alignas(64) float y[kBf16RowBlock];
        for (std::size_t c0 = 0; c0 < cols; c0 += kBf16RowBlock) {
          const std::size_t n = std::min(kBf16RowBlock, cols - c0);
          float* dg_block = dg + r * cols + c0;
          widen_bf16(pre + r * cols + c0, y, n);
          for (std::size_t i = 0; i < n; ++i) {
            const math::GeluValueGrad<float> gelu = value_and_grad(y[i] + bias[c0 + i]);
            y[i] = gelu.value;
            dg_block[i] = dg_block[i] * gelu.grad;
          }
          round_to_bf16(y, g + r * cols + c0, n);
        }
      });
    });
  }

  template <class T>
  static void gelu_backward(const T* x, const T* dy, T* dx, std::size_t n, GeluForm form) {
    with_gelu_value_and_grad<T>(form, [=](auto value_and_grad) {
      map(dx, n, [=](std::size_t i) { return dy[i] * value_and_grad(x[i]).grad; });
    });
  }

  /// y = gelu(x), dx = dy gelu'(x); y may alias dy and dx may alias x (ops.h).
  template <class T>
  static void gelu_forward_backward(const T* x, const T* dy, T* y, T* dx, std::size_t n,
                                    GeluForm form) {
    with_gelu_value_and_grad<T>(form, [=](auto value_and_grad) {
      parallel_chunks(n, kElementChunk, [=](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
          const math::GeluValueGrad<T> gelu = value_and_grad(x[i]);
          const T g = dy[i];
          y[i] = gelu.value;
          dx[i] = g * gelu.grad;
        }
      });
    });
  }

  /// dpred[i] = dloss[0] * 2 (pred[i] - target[i]) / n.
  template <class T>
  static void mse_backward(const T* pred, const T* target, const T* dloss, std::size_t n,
                           T* dpred) {
    const T coef = static_cast<T>(2.0 * dloss[0] / static_cast<double>(n));
    map(dpred, n, [=](std::size_t i) { return coef * (pred[i] - target[i]); });
  }

  /// One AdamW step per element (math::adamw).
  template <class T>
  static void adamw_update(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, std::size_t n,
                           const math::AdamWHyper<T>& hyper) {
    parallel_chunks(n, kElementChunk, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i)
        math::adamw(param[i], grad[i], exp_avg[i], exp_avg_sq[i], hyper);
    });
  }

 private:
  /// Elements of a row the bfloat16 GELU kernels widen at a time (1 KiB of float32).
  static constexpr std::size_t kBf16RowBlock = 256;

  /// body(gelu) with `gelu` the scalar GELU of `form` (with_gelu_value_and_grad's value; the
  /// derivative's work is dropped once inlined).
  template <class T, class Body>
  static void with_gelu(GeluForm form, Body body) {
    with_gelu_value_and_grad<T>(
        form, [&](auto value_and_grad) { body([=](T v) { return value_and_grad(v).value; }); });
  }

  /// body(value_and_grad) with `value_and_grad(x)` GELU's value and derivative of `form`
  /// (math::GeluValueGrad): in float32 through the vectorizable erf_f32 or tanh_f32, in float64
  /// math::gelu_value_and_grad. The planted faults gelu_grad_no_x_phi (and, in float64 only,
  /// gelu_f64_grad_no_x_phi) drop the exact derivative's x phi(x) term.
  template <class T, class Body>
  static void with_gelu_value_and_grad(GeluForm form, Body body) {
    const bool no_x_phi =
        form == GeluForm::exact &&
        (fault_active(Fault::gelu_grad_no_x_phi) ||
         (std::is_same_v<T, double> && fault_active(Fault::gelu_f64_grad_no_x_phi)));
    const auto run = [&](auto value_and_grad) {
      if (!no_x_phi) return body(value_and_grad);
      body([=](T v) {
        math::GeluValueGrad<T> gelu = value_and_grad(v);
        gelu.grad = T(0.5) * (T(1) + std::erf(v * T(math::kInvSqrt2)));
        return gelu;
      });
    };
    if constexpr (std::is_same_v<T, float>) {
      if (form == GeluForm::exact)
        return run([](float v) { return gelu_exact_value_and_grad_f32(v); });
      return run([](float v) { return gelu_tanh_value_and_grad_f32(v); });
    }
    run([form](T v) { return math::gelu_value_and_grad(v, form); });
  }

  /// out[i] = f(i) for i in [0, n), in chunks of kElementChunk.
  template <class T, class F>
  static void map(T* out, std::size_t n, F f) {
    parallel_chunks(n, kElementChunk, [=](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i)
        out[i] = f(i);
    });
  }
};

}  // namespace mpitron::kernels::cpu
