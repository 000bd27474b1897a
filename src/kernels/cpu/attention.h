// CPU loops of the fused attention (kernels::attention_forward / attention_backward): tiles of
// kBlockQ queries x kBlockK keys, the per-row math of kernels/attention_math.h (which the CUDA
// kernel runs too), and inner loops over contiguous rows that the compiler vectorizes (the
// q k^T and dO v^T tiles read a transposed key / value block, so no loop is a horizontal sum).
// Every output row is written by exactly one iteration of one outer loop, a plain `for` over
// independent tasks: forward over (batch*head, query block); backward once over (batch*head, key
// block) for dK and dV, then over (batch*head, query block) for dQ. No atomics: the result does
// not depend on the order of the tasks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/attention_math.h"
#include "kernels/fault_injection.h"

namespace mpitron::kernels::cpu {

struct Attention {
  /// Queries and keys per tile: a 64 x 64 tile of scores and one transposed key block of
  /// head_dim 64 are 16 KiB each in float32, so a tile's working set stays in L1/L2.
  static constexpr std::size_t kBlockQ = 64;
  static constexpr std::size_t kBlockK = 64;

  /// o and lse of softmax(scale q k^T) v per batch*head slice (kernels::attention_forward).
  template <class T>
  static void attention_forward(const T* q, const T* k, const T* v, std::size_t batch_heads,
                                std::size_t seq, std::size_t d, bool causal, T scale, T* o,
                                T* lse) {
    const bool no_rescale = fault_active(Fault::flash_attention_no_rescale);
    const std::size_t q_blocks = (seq + kBlockQ - 1) / kBlockQ;
    for (std::size_t task = 0; task < batch_heads * q_blocks; ++task) {
      const std::size_t slice = task / q_blocks * seq * d;
      const std::size_t i0 = task % q_blocks * kBlockQ;
      const std::size_t rows = std::min(kBlockQ, seq - i0);
      Tile<T> tile(d);
      T* out = o + slice + i0 * d;
      std::fill(out, out + rows * d, T(0));
      T max[kBlockQ], sum[kBlockQ];
      std::fill(max, max + rows, math::negative_infinity<T>());
      std::fill(sum, sum + rows, T(0));
      const std::size_t key_end = causal ? i0 + rows : seq;  // later blocks are all masked
      for (std::size_t j0 = 0; j0 < key_end; j0 += kBlockK) {
        const std::size_t cols = std::min(kBlockK, key_end - j0);
        tile.scores(q + slice, k + slice, i0, rows, j0, cols, causal, scale);
        for (std::size_t r = 0; r < rows; ++r) {
          T* p = tile.s + r * kBlockK;
          T block_sum;
          T alpha = math::online_softmax_block(p, cols, max[r], block_sum);
          if (no_rescale) alpha = T(1);
          T* out_row = out + r * d;
          math::online_softmax_rescale(alpha, block_sum, sum[r], out_row, d);
          for (std::size_t c = 0; c < cols; ++c)
            add_scaled(p[c], v + slice + (j0 + c) * d, out_row, d);
        }
      }
      for (std::size_t r = 0; r < rows; ++r) {
        const T inv = T(1) / sum[r];
        for (std::size_t x = 0; x < d; ++x)
          out[r * d + x] *= inv;
        lse[slice / d + i0 + r] = math::online_softmax_lse(max[r], sum[r]);
      }
    }
  }

  /// dq, dk, dv from the saved o and lse (kernels::attention_backward).
  template <class T>
  static void attention_backward(const T* q, const T* k, const T* v, const T* o, const T* lse,
                                 const T* dout, std::size_t batch_heads, std::size_t seq,
                                 std::size_t d, bool causal, T scale, T* dq, T* dk, T* dv) {
    const std::size_t k_blocks = (seq + kBlockK - 1) / kBlockK;
    // dK and dV: each task owns one key block's rows and visits every query that sees it.
    for (std::size_t task = 0; task < batch_heads * k_blocks; ++task) {
      const std::size_t slice = task / k_blocks * seq * d;
      const std::size_t j0 = task % k_blocks * kBlockK;
      const std::size_t cols = std::min(kBlockK, seq - j0);
      Tile<T> tile(d);
      std::fill(dk + slice + j0 * d, dk + slice + (j0 + cols) * d, T(0));
      std::fill(dv + slice + j0 * d, dv + slice + (j0 + cols) * d, T(0));
      for (std::size_t i0 = causal ? j0 : 0; i0 < seq; i0 += kBlockQ) {
        const std::size_t rows = std::min(kBlockQ, seq - i0);
        tile.score_grads(q + slice, k + slice, v + slice, o + slice, lse + slice / d,
                         dout + slice, i0, rows, j0, cols, causal, scale);
        for (std::size_t r = 0; r < rows; ++r) {
          for (std::size_t c = 0; c < cols; ++c) {
            add_scaled(tile.s[r * kBlockK + c], dout + slice + (i0 + r) * d, dv + slice + (j0 + c) * d,
                 d);
            add_scaled(tile.ds[r * kBlockK + c], q + slice + (i0 + r) * d, dk + slice + (j0 + c) * d,
                 d);
          }
        }
      }
    }
    // dQ: each task owns one query block's rows and visits every key it sees.
    const std::size_t q_blocks = (seq + kBlockQ - 1) / kBlockQ;
    for (std::size_t task = 0; task < batch_heads * q_blocks; ++task) {
      const std::size_t slice = task / q_blocks * seq * d;
      const std::size_t i0 = task % q_blocks * kBlockQ;
      const std::size_t rows = std::min(kBlockQ, seq - i0);
      Tile<T> tile(d);
      std::fill(dq + slice + i0 * d, dq + slice + (i0 + rows) * d, T(0));
      const std::size_t key_end = causal ? i0 + rows : seq;
      for (std::size_t j0 = 0; j0 < key_end; j0 += kBlockK) {
        const std::size_t cols = std::min(kBlockK, key_end - j0);
        tile.score_grads(q + slice, k + slice, v + slice, o + slice, lse + slice / d,
                         dout + slice, i0, rows, j0, cols, causal, scale);
        for (std::size_t r = 0; r < rows; ++r) {
          for (std::size_t c = 0; c < cols; ++c)
            add_scaled(tile.ds[r * kBlockK + c], k + slice + (j0 + c) * d, dq + slice + (i0 + r) * d, d);
        }
      }
    }
  }

 private:
  /// y[x] += a b[x] for x < n.
  template <class T>
  static void add_scaled(T a, const T* b, T* y, std::size_t n) {
    for (std::size_t x = 0; x < n; ++x)
      y[x] += a * b[x];
  }

  /// One thread's tile scratch, kept between calls (thread_local: one per thread once the outer
  /// loops run in parallel): scores / probabilities s and score gradients ds [kBlockQ, kBlockK],
  /// and a key and a value block transposed to [d, kBlockK].
  template <class T>
  struct Tile {
    T *s, *ds, *kt, *vt;
    std::size_t d;

    explicit Tile(std::size_t head_dim) : d(head_dim) {
      thread_local std::vector<T> scratch;
      scratch.resize(2 * kBlockQ * kBlockK + 2 * d * kBlockK);
      s = scratch.data();
      ds = s + kBlockQ * kBlockK;
      kt = ds + kBlockQ * kBlockK;
      vt = kt + d * kBlockK;
    }

    /// t[x, c] = m[j0 + c, x] for c < cols: rows [j0, j0 + cols) of m [seq, d], transposed.
    void transpose(const T* m, std::size_t j0, std::size_t cols, T* t) const {
      for (std::size_t c = 0; c < cols; ++c)
        for (std::size_t x = 0; x < d; ++x)
          t[x * kBlockK + c] = m[(j0 + c) * d + x];
    }

    /// out[r, c] = a[i0 + r] . b[j0 + c] for r < rows, c < cols, with b's block transposed in
    /// bt: for each row, an axpy over the block's columns per element of a's row.
    void products(const T* a, std::size_t i0, std::size_t rows, const T* bt, std::size_t cols,
                  T* out) const {
      for (std::size_t r = 0; r < rows; ++r) {
        T* out_row = out + r * kBlockK;
        std::fill(out_row, out_row + cols, T(0));
        for (std::size_t x = 0; x < d; ++x)
          add_scaled(a[(i0 + r) * d + x], bt + x * kBlockK, out_row, cols);
      }
    }

    /// s = scale q k^T of queries [i0, i0 + rows) and keys [j0, j0 + cols) of one slice, masked
    /// entries -inf.
    void scores(const T* q, const T* k, std::size_t i0, std::size_t rows, std::size_t j0,
                std::size_t cols, bool causal, T scale) {
      transpose(k, j0, cols, kt);
      products(q, i0, rows, kt, cols, s);
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t c = 0; c < cols; ++c) {
          T& score = s[r * kBlockK + c];
          score = math::attention_masked(i0 + r, j0 + c, causal) ? math::negative_infinity<T>()
                                                                 : scale * score;
        }
      }
    }

    /// The tile's probabilities P = exp(S - lse) in s and scale dS = scale P (dP - D) in ds,
    /// with dP = dO v^T and D = rowsum(dO * O), recomputed from q, k, v, o, lse and dout.
    void score_grads(const T* q, const T* k, const T* v, const T* o, const T* lse, const T* dout,
                     std::size_t i0, std::size_t rows, std::size_t j0, std::size_t cols,
                     bool causal, T scale) {
      scores(q, k, i0, rows, j0, cols, causal, scale);
      transpose(v, j0, cols, vt);
      products(dout, i0, rows, vt, cols, ds);
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t i = i0 + r;
        const T delta = math::attention_delta(dout + i * d, o + i * d, d);
        for (std::size_t c = 0; c < cols; ++c) {
          T& p = s[r * kBlockK + c];
          p = math::attention_probability(p, lse[i]);
          T& g = ds[r * kBlockK + c];
          g = scale * math::attention_score_grad(p, g, delta);
        }
      }
    }
  };
};

}  // namespace mpitron::kernels::cpu
