// CPU loops of the fused attention (kernels::attention_forward / attention_backward): tiles of
// kBlockQ queries x kBlockK keys, their products through mpitron's packed GEMM in float32
// (cpu/packed_gemm.h; the provider's GEMM in float64). With bfloat16 q, k, v and o (train
// --bf16's kept copies) the products multiply bfloat16 operands on the bfloat16 GEMM
// (cpu/packed_gemm_bf16.h) and sum in float32, as FlashAttention-2's bfloat16 kernels do (Dao
// 2023, arXiv:2307.08691): q, k, v as they are, the tile's probabilities P and score gradients
// dS and the output gradient dO rounded to bfloat16 (to nearest even) where they enter a
// product; softmax's maxima, exponentials and sums stay float32. Between the products run the
// per-row math of kernels/attention_math.h, which the CUDA kernel runs too, in plain loops over a
// tile's rows (float32 exponentials through the vectorizable exp_f32). Every output row is written
// by exactly one task of an outer loop over independent tasks, spread over cpu_threads() threads:
// forward over (batch*head, query block); backward over batch*head, each task visiting its
// slice's tiles key block by key block and adding each tile's P and dS into dV, dK and dQ at once
// (every tile's scores computed once). A causal tile the diagonal crosses runs as row blocks that
// skip the keys masked for all their rows (row_blocks). No atomics: the result does not depend on
// the order of the tasks or the threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "kernels/attention_math.h"
#include "kernels/cpu/bf16_convert.h"
#include "kernels/cpu/erf_f32.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/packed_gemm_bf16.h"
#include "kernels/cpu/parallel.h"
#include "kernels/fault_injection.h"

namespace mpitron::kernels::cpu {

struct Attention {
  /// Queries and keys per tile: a 64 x 64 tile of scores is 16 KiB in float32, and with the
  /// query, key and value blocks of head_dim 64 a tile's working set stays in L2.
  static constexpr std::size_t kBlockQ = 64;
  static constexpr std::size_t kBlockK = 64;

  /// o and lse of softmax(scale q k^T) v per batch*head slice (kernels::attention_forward); In is
  /// T, or bfloat16 with T = float (each key block's P = exp(S - running max) rounded for P V,
  /// its row sums from the unrounded P).
  template <class T, class In>
  static void attention_forward(const In* q, const In* k, const In* v, std::size_t batch_heads,
                                std::size_t seq, std::size_t d, bool causal, T scale, T* o,
                                T* lse) {
    const bool no_rescale = fault_active(Fault::flash_attention_no_rescale);
    const std::size_t q_blocks = (seq + kBlockQ - 1) / kBlockQ;
    parallel_tasks(batch_heads * q_blocks, [=](std::size_t task) {
      const auto [slice, i0, rows] = task_block(task, q_blocks, kBlockQ, seq, d);
      Tile<T, In> tile;
      T* out = o + slice + i0 * d;  // written by the first block's P V, then accumulated
      T max[kBlockQ], sum[kBlockQ];
      std::fill(max, max + rows, math::negative_infinity<T>());  // sum: set by key block 0
      const std::size_t key_end = causal ? i0 + rows : seq;      // later blocks are all masked
      const In* q_rows = q + slice + i0 * d;                     // the task's query rows
      const In* keys = k + slice;
      const In* values = v + slice;
      for (std::size_t j0 = 0; j0 < key_end; j0 += kBlockK) {
        const RowBlocks blocks = row_blocks(causal, i0, rows, j0, std::min(kBlockK, key_end - j0));
        for (std::size_t b = 0; b < blocks.count; ++b) {
          const auto [first, height, cols] = blocks.block[b];
          tile.scores(q_rows + first * d, keys, d, i0 + first, height, j0, cols, causal, scale);
          for (std::size_t r = first; r < first + height; ++r) {
            T block_sum;
            T alpha = math::online_softmax_block(tile.s + (r - first) * cols, cols, max[r],
                                                 block_sum, NonPositiveExp{});
            if (no_rescale) alpha = T(1);
            if (j0 == 0) {
              sum[r] = block_sum;  // alpha 0 on a sum of 0, and nothing in `out` to scale yet
            } else {
              math::online_softmax_rescale(alpha, block_sum, sum[r], out + r * d, d);
            }
          }
          product(false, height, d, cols, operand<T, In>(tile.s, height * cols, 0), values + j0 * d,
                  out + first * d, j0 > 0);  // O (+)= P V
        }
      }
      for (std::size_t r = 0; r < rows; ++r) {
        const T inv = T(1) / sum[r];
        for (std::size_t x = 0; x < d; ++x)
          out[r * d + x] *= inv;
        lse[slice / d + i0 + r] = math::online_softmax_lse(max[r], sum[r]);
      }
    });
  }

  /// dq, dk, dv from the saved o and lse (kernels::attention_backward); In as attention_forward
  /// (with bfloat16, dO rounded once per slice, each tile's P and dS as they enter products; D =
  /// rowsum(dO * O) from the unrounded dO).
  template <class T, class In>
  static void attention_backward(const In* q, const In* k, const In* v, const In* o, const T* lse,
                                 const T* dout, std::size_t batch_heads, std::size_t seq,
                                 std::size_t d, bool causal, T scale, T* dq, T* dk, T* dv) {
    // One task per slice: for each key block, every query block that sees it.
    parallel_tasks(batch_heads, [=](std::size_t task) {
      const std::size_t slice = task * seq * d;
      Tile<T, In> tile;
      const In* qs = q + slice;
      const In* ks = k + slice;
      const In* vs = v + slice;
      const In* dos = operand<T, In>(dout + slice, seq * d, 2);  // dO as the products read it
      thread_local std::vector<T> delta;  // D of each of the slice's query rows
      delta.resize(seq);
      for (std::size_t i = 0; i < seq; ++i)
        delta[i] = math::attention_delta(dout + slice + i * d, o + slice + i * d, d);
      // Each block of dV and dK is written by the first query block that sees its keys, and
      // each block of dQ by key block 0 (which every query sees); later tiles add to them.
      for (std::size_t j0 = 0; j0 < seq; j0 += kBlockK) {
        const std::size_t cols = std::min(kBlockK, seq - j0);
        const std::size_t first_i0 = causal ? j0 : 0;
        for (std::size_t i0 = first_i0; i0 < seq; i0 += kBlockQ) {
          const RowBlocks blocks = row_blocks(causal, i0, std::min(kBlockQ, seq - i0), j0, cols);
          // The last row block sees every key of the tile (a diagonal tile has i0 = j0 and rows =
          // cols): it goes first, so that it writes the block of dV and dK (when no earlier tile
          // did) and the others add to it.
          for (std::size_t b = blocks.count; b-- > 0;) {
            const auto [first, height, seen] = blocks.block[b];
            const std::size_t i = i0 + first;
            tile.score_grads(qs, ks, vs, delta.data(), lse + slice / d, dos, d, i, height, j0, seen,
                             causal, scale);
            const bool kv_seen = i0 > first_i0 || b + 1 < blocks.count;
            const In* p = operand<T, In>(tile.s, height * seen, 0);
            const In* ds = operand<T, In>(tile.ds, height * seen, 1);
            product(true, seen, d, height, p, dos + i * d, dv + slice + j0 * d, kv_seen);
            product(true, seen, d, height, ds, qs + i * d, dk + slice + j0 * d, kv_seen);
            product(false, height, d, seen, ds, ks + j0 * d, dq + slice + i * d, j0 > 0);
          }
        }
      }
    });
  }

  /// o and lse of the union of two key sets, row by row (kernels::attention_merge).
  template <class T>
  static void attention_merge(T* o, T* lse, const T* block_o, const T* block_lse, std::size_t rows,
                              std::size_t d) {
    const bool no_correction = fault_active(Fault::ring_attention_no_lse_correction);
    parallel_chunks(rows, kBlockQ, [=](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) {
        if (no_correction) {
          for (std::size_t x = 0; x < d; ++x)
            o[r * d + x] += block_o[r * d + x];
          continue;
        }
        math::attention_merge_row(o + r * d, lse[r], block_o + r * d, block_lse[r], d);
      }
    });
  }

 private:
  /// Rows of a diagonal tile's row block: on AVX-512 the packed GEMM's tile width (32 columns),
  /// so a block's key columns stay whole micro-tiles.
  static constexpr std::size_t kDiagonalRows = 32;
  static_assert(kBlockQ == kBlockK && kBlockQ % kDiagonalRows == 0,
                "a diagonal tile is square and cut into whole row blocks");

  /// The row blocks of the tile of queries [i0, i0 + rows) and keys [j0, j0 + cols) that causal
  /// attention computes: the whole tile when no entry is masked; for a tile the diagonal crosses
  /// (then i0 = j0: tiles are square and aligned), blocks of kDiagonalRows rows, each with the
  /// keys up to its last row's (the keys past it are masked for every row of the block: zero
  /// probabilities, nothing to add). A 64 x 64 diagonal tile computes 3/4 of its products.
  /// `first` counts from i0; a block's `cols` keys start at j0.
  struct RowBlock {
    std::size_t first, rows, cols;
  };
  struct RowBlocks {
    RowBlock block[kBlockQ / kDiagonalRows];
    std::size_t count = 0;
  };
  static RowBlocks row_blocks(bool causal, std::size_t i0, std::size_t rows, std::size_t j0,
                              std::size_t cols) {
    RowBlocks blocks;
    if (!causal || j0 + cols <= i0 + 1) {
      blocks.block[blocks.count++] = {0, rows, cols};
      return blocks;
    }
    for (std::size_t first = 0; first < rows; first += kDiagonalRows) {  // here i0 = j0
      const std::size_t height = std::min(kDiagonalRows, rows - first);
      blocks.block[blocks.count++] = {first, height, std::min(cols, first + height)};
    }
    return blocks;
  }

  /// body(task) for every task < tasks, one task at a time per thread (parallel.h); the tile
  /// products inside stay on their thread (a tile is below the GEMM's threading size).
  template <class Body>
  static void parallel_tasks(std::size_t tasks, Body body) {
    parallel_chunks(tasks, 1, [&](std::size_t begin, std::size_t end) {
      for (std::size_t task = begin; task < end; ++task)
        body(task);
    });
  }

  /// Task `task` of an outer loop over (slice, block of `block` rows of seq), `blocks` blocks
  /// per slice: the slice's element offset in a [batch_heads, seq, d] buffer, the block's first
  /// row and its row count (the last block of a slice may be partial).
  struct TaskBlock {
    std::size_t slice, first, rows;
  };
  static TaskBlock task_block(std::size_t task, std::size_t blocks, std::size_t block,
                              std::size_t seq, std::size_t d) {
    const std::size_t first = task % blocks * block;
    return {task / blocks * seq * d, first, std::min(block, seq - first)};
  }

  /// `count` elements of a float tile, or of dO, as the products read them: x itself when In is
  /// T; rounded to bfloat16 (to nearest even) into the thread's scratch `slot` when In is
  /// bfloat16 (0: probabilities, 1: score gradients, 2: dO), kept between calls and only grown
  /// (a diagonal tile's smaller counts would otherwise make the next full tile fill it again).
  template <class T, class In>
  static const In* operand(const T* x, std::size_t count, std::size_t slot) {
    if constexpr (std::is_same_v<In, T>) {
      return x;
    } else {
      thread_local std::vector<In> scratch[3];
      if (scratch[slot].size() < count) scratch[slot].resize(count);
      round_to_bf16(x, scratch[slot].data(), count);
      return scratch[slot].data();
    }
  }

  /// c[m, n] = alpha op(a) op(b) + beta c for a tile (row-major, packed: op(a) [m, inner] stored
  /// [inner, m] when trans_a, op(b) [inner, n] stored [n, inner] when trans_b): the packed GEMM
  /// in float32, which a product this small reaches without a provider's per-call work.
  static void tile_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t inner,
                        float alpha, const float* a, const float* b, float beta, float* c) {
    const std::size_t lda = trans_a ? m : inner, ldb = trans_b ? inner : n;
    packed_sgemm(trans_a, trans_b, m, n, inner, alpha, a, lda, b, ldb, beta, c, n);
  }
  static void tile_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t inner,
                        double alpha, const double* a, const double* b, double beta, double* c) {
    Gemm::gemm_batched(trans_a, trans_b, 1, m, n, inner, alpha, a, 0, b, 0, beta, c, 0);
  }
  static void tile_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t inner,
                        float alpha, const bf16* a, const bf16* b, float beta, float* c) {
    const std::size_t lda = trans_a ? m : inner, ldb = trans_b ? inner : n;
    packed_gemm_bf16(chosen_bf16_kernel(), trans_a, trans_b, m, n, inner, alpha, a, lda, b, ldb,
                     beta, c, n);
  }

  /// c[m, n] += op(a) b, or c = op(a) b when not `accumulate` (c's old contents unread), with
  /// op(a) [m, inner] (a stored [m, inner], or [inner, m] when `trans_a`) and b [inner, n], all
  /// row-major and packed.
  template <class T, class In>
  static void product(bool trans_a, std::size_t m, std::size_t n, std::size_t inner, const In* a,
                      const In* b, T* c, bool accumulate) {
    tile_gemm(trans_a, false, m, n, inner, T(1), a, b, accumulate ? T(1) : T(0), c);
  }

  /// One thread's tile scratch, kept between calls (thread_local: one per thread once the outer
  /// loops run in parallel): scores / probabilities s and score gradients ds, each [rows, cols]
  /// packed in kBlockQ x kBlockK elements.
  template <class T, class In>
  struct Tile {
    T *s, *ds;

    Tile() {
      thread_local std::vector<T> scratch(2 * kBlockQ * kBlockK);
      s = scratch.data();
      ds = s + kBlockQ * kBlockK;
    }

    /// s = scale q k^T of queries [i0, i0 + rows) (their rows q_rows, [rows, d]) and keys
    /// [j0, j0 + cols) of one slice (k [seq, d]), masked entries -inf.
    void scores(const In* q_rows, const In* k, std::size_t d, std::size_t i0, std::size_t rows,
                std::size_t j0, std::size_t cols, bool causal, T scale) {
      tile_gemm(false, true, rows, cols, d, scale, q_rows, k + j0 * d, T(0), s);
      if (!causal || j0 + cols <= i0 + 1) return;  // the tile lies on or below the diagonal
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t c = 0; c < cols; ++c) {
          if (math::attention_masked(i0 + r, j0 + c, causal)) {
            s[r * cols + c] = math::negative_infinity<T>();
          }
        }
      }
    }

    /// The tile's probabilities P = exp(S - lse) in s and scale dS = scale P (dP - D) in ds,
    /// with dP = dO v^T, recomputed from q, k, v, lse and dout, and D = rowsum(dO * O) given per
    /// query row of the slice (`delta`, [seq]).
    void score_grads(const In* q, const In* k, const In* v, const T* delta, const T* lse,
                     const In* dout, std::size_t d, std::size_t i0, std::size_t rows,
                     std::size_t j0, std::size_t cols, bool causal, T scale) {
      scores(q + i0 * d, k, d, i0, rows, j0, cols, causal, scale);
      tile_gemm(false, true, rows, cols, d, T(1), dout + i0 * d, v + j0 * d, T(0), ds);
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t i = i0 + r;
        for (std::size_t c = 0; c < cols; ++c) {
          T& p = s[r * cols + c];
          p = math::attention_probability(p, lse[i], NonPositiveExp{});
          T& g = ds[r * cols + c];
          g = scale * math::attention_score_grad(p, g, delta[i]);
        }
      }
    }
  };
};

}  // namespace mpitron::kernels::cpu
