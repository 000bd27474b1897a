// CPU loops of the Llama family's ops (kernels/llama_ops.h): RMSNorm forward and backward,
// rotary position embedding, SwiGLU forward and backward, over the formulas of llama_math.h.
// Rows (RMSNorm), positions (RoPE) and element chunks (SwiGLU) go to cpu_threads() threads whole,
// and column sums by blocks of columns (parallel.h): the same bits for any thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cpu/erf_f32.h"
#include "kernels/cpu/parallel.h"
#include "kernels/fault_injection.h"
#include "kernels/llama_math.h"

namespace mpitron::kernels::cpu {

struct LlamaOps {
  /// Per row: the sum of squares in double (math::lane_sum), rstd (math::rms_norm_rstd) rounded
  /// to T, then y = x rstd weight.
  template <class T>
  static void rms_norm_forward(const T* x, const T* weight, std::size_t rows, std::size_t cols,
                               double eps, T* y, T* rstd) {
    const bool eps_outside_root = fault_active(Fault::rms_norm_eps_outside_root);
    parallel_rows(rows, cols, [=](std::size_t r) {
      const T* xr = x + r * cols;
      const double squares = math::lane_sum<double>(cols, [=](std::size_t c) {
        const auto v = static_cast<double>(xr[c]);
        return v * v;
      });
      const double mean_square = squares / static_cast<double>(cols);
      const T row_rstd = static_cast<T>(eps_outside_root ? 1.0 / (std::sqrt(mean_square) + eps)
                                                         : math::rms_norm_rstd(squares, cols, eps));
      rstd[r] = row_rstd;
      T* yr = y + r * cols;
      for (std::size_t c = 0; c < cols; ++c)
        yr[c] = math::rms_norm_y(xr[c], row_rstd, weight[c]);
    });
  }

  /// dx row by row from the row mean of g xhat (in double); dweight as column sums over the
  /// rows, kColumnBlock columns at a time so the double accumulators stay local. x of T, or
  /// bfloat16 widened exactly (In = bf16, T = float).
  template <class T, class In>
  static void rms_norm_backward(const In* x, const T* weight, const T* rstd, const T* dy,
                                std::size_t rows, std::size_t cols, T* dx, T* dweight) {
    parallel_rows(rows, cols, [=](std::size_t r) {
      const In* xr = x + r * cols;
      const T* dyr = dy + r * cols;
      const T row_rstd = rstd[r];
      const double sum_g_xhat = math::lane_sum<double>(cols, [=](std::size_t c) {
        return static_cast<double>(dyr[c]) * weight[c] * (widen(xr[c]) * row_rstd);
      });
      const T mean_g_xhat = static_cast<T>(sum_g_xhat / static_cast<double>(cols));
      T* dxr = dx + r * cols;
      for (std::size_t c = 0; c < cols; ++c) {
        dxr[c] =
            math::rms_norm_dx(dyr[c] * weight[c], widen(xr[c]) * row_rstd, row_rstd, mean_g_xhat);
      }
    });
    parallel_column_blocks(cols, [=](std::size_t c0, auto width) {
      double dw[kColumnBlock] = {};
      for (std::size_t r = 0; r < rows; ++r) {
        const T row_rstd = rstd[r];
        for (std::size_t j = 0; j < width; ++j) {
          const std::size_t i = r * cols + c0 + j;
          dw[j] += static_cast<double>(dy[i]) * (widen(x[i]) * row_rstd);
        }
      }
      for (std::size_t j = 0; j < width; ++j)
        dweight[c0 + j] = static_cast<T>(dw[j]);
    });
  }

  /// Pairs per block of rotary_embedding's cos and sin table on the stack.
  static constexpr std::size_t kRotaryPairBlock = 64;

  /// Position by position (x [batch, seq, heads, head_dim], tokens = batch seq): the cos and sin
  /// of a block of pairs once per position (math::rotary_cos_sin), then every head of that
  /// position in every sequence of the batch, pair by pair along the head (math::rotary_rotate).
  template <class T>
  static void rotary_embedding(const T* x, std::size_t tokens, std::size_t seq, std::size_t heads,
                               std::size_t head_dim, const RopeFrequencies& rope,
                               std::int64_t position_offset, bool inverse, T* y) {
    const bool adjacent = fault_active(Fault::rotary_adjacent_pairs);
    const std::size_t width = heads * head_dim, half = head_dim / 2, batch = tokens / seq;
    parallel_rows(seq, batch * width, [=](std::size_t s) {
      const auto position = static_cast<double>(position_offset + static_cast<std::int64_t>(s));
      for (std::size_t i0 = 0; i0 < half; i0 += kRotaryPairBlock) {
        const std::size_t pairs = std::min(kRotaryPairBlock, half - i0);
        math::RotaryCosSin<T> table[kRotaryPairBlock];
        for (std::size_t j = 0; j < pairs; ++j)
          table[j] = math::rotary_cos_sin<T>(position, i0 + j, head_dim, rope, inverse);
        for (std::size_t row = 0; row < batch * heads; ++row) {
          const std::size_t head = ((row / heads * seq + s) * heads + row % heads) * head_dim;
          const T* xh = x + head;
          T* yh = y + head;
          for (std::size_t j = 0; j < pairs; ++j) {
            const std::size_t lo = adjacent ? 2 * (i0 + j) : i0 + j;
            const std::size_t hi = adjacent ? lo + 1 : lo + half;
            const math::RotaryPair<T> r = math::rotary_rotate(xh[lo], xh[hi], table[j]);
            yh[lo] = r.lo;
            yh[hi] = r.hi;
          }
        }
      }
    });
  }

  /// y = silu(gate) up per element (math::swiglu; float32 through the vectorizable exp_f32).
  template <class T>
  static void swiglu_forward(const T* gate, const T* up, T* y, std::size_t n) {
    parallel_chunks(n, kElementChunk, [=](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i)
        y[i] = math::swiglu(gate[i], up[i], NonPositiveExp{});
    });
  }

  /// dgate and dup per element (math::swiglu_grads), each element read before it is written;
  /// gate and up of T, or bfloat16 widened exactly (In = bf16, T = float).
  template <class T, class In>
  static void swiglu_backward(const In* gate, const In* up, const T* dy, T* dgate, T* dup,
                              std::size_t n) {
    const bool no_silu_term = fault_active(Fault::swiglu_grad_no_silu_term);
    parallel_chunks(n, kElementChunk, [=](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const T gi = widen(gate[i]), ui = widen(up[i]);
        const math::SwigluGrads<T> g = math::swiglu_grads(gi, ui, dy[i], NonPositiveExp{});
        dgate[i] = no_silu_term ? dy[i] * ui * math::sigmoid(gi, NonPositiveExp{}) : g.dgate;
        dup[i] = g.dup;
      }
    });
  }
};

}  // namespace mpitron::kernels::cpu
