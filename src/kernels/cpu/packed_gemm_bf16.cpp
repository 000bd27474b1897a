// The bfloat16 GEMM's pair path and the choice of path. VDPBF16PS multiplies, per 32-bit lane, a
// pair of bfloat16 values of one operand with a pair of the other and adds both products to a
// float32 lane of the accumulator; so both operands are packed in pairs along k, one 32-bit
// word per pair (the term 2q in the low half, 2q + 1 in the high half, as the instruction reads
// them):
// - op(B) in micro-panels of kPairColumns = 32 columns: panel s holds pairs x 32 words, the word
//   of pair q and column j at q * 32 + j: two zmm registers per pair, one lane per column of C;
// - op(A) stored [k, m] in micro-panels of kPairRows = 12 rows: pairs x 12 words, the word of
//   pair q and row r at q * 12 + r. Stored [m, k] with k even, its rows already hold the pairs as
//   words (term 2q of row r beside term 2q + 1): they are read in place, or from a copy of the
//   block's rows at a padded stride where in place they would share L1 sets, as the float32 GEMM
//   reads row-major A (packed_gemm.cpp). Either way a word is broadcast to every lane of a zmm
//   register.
// Missing columns, rows and the second term of an odd last pair are zero. The micro-kernel keeps
// a 12 x 32 tile of C in 24 zmm accumulators through one pass of k (kDepth terms, kDepth / 2
// pairs); the blocking loops are those of packed_gemm.cpp. Which path runs is chosen at run time
// (cpu_has_avx512_bf16): the kernel is compiled for AVX512-BF16 by a function-level target
// attribute, so the build needs no flag and the rest of the library runs on any x86-64.
#include "kernels/cpu/packed_gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/bf16_convert.h"
#include "kernels/cpu/denormal_lanes.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/ops.h"

namespace mpitron::kernels::cpu {
namespace {

constexpr std::size_t kPairRows = 12;
constexpr std::size_t kPairColumns = 32;  // two zmm of 16 float32 lanes
constexpr std::size_t kLanes = 16;
// Terms of k per pass: 512 pairs. Each pass reads and writes every element of C, so products
// whose k fits one pass touch C once. GPT-2 124M's and SmolLM-135M's LM heads, whose C (the
// logits, or the embedding's main gradient) is far larger than any cache, ran 3-26 % faster than
// with 256 terms (AMD Zen 5, `bench gemm --dtype bfloat16`, two interleaved rounds; the other
// products' geometric mean 0.99x and 1.04x).
constexpr std::size_t kDepth = 1024;
static_assert(kDepth % 2 == 0);
// A block of 192 rows x 512 pairs of packed A (384 KiB, for L2); a panel of 512 pairs x 2048
// columns of packed B (4 MiB, for L3): A's blocks are packed again for each panel, so wide
// panels pack them fewer times (AMD Zen 5, GPT-2 124M's products: 2-8 % faster than 512).
constexpr std::size_t kBlockRows = 16 * kPairRows;
constexpr std::size_t kPanelColumns = 2048;

// op(X)[outer, p] of a stored row-major bfloat16 matrix: X[outer, p] (stored with the k index
// fastest) or X[p, outer]. op(A) is {a, lda, trans_a}; op(B)[p, j] is {b, ldb, !trans_b} at
// (j, p).
struct Operand {
  const bf16* data;
  std::size_t ld;
  bool k_slow;  // X is stored [k, outer]

  /// The element op(X)[outer, p].
  const bf16* at(std::size_t outer, std::size_t p) const {
    return k_slow ? data + p * ld + outer : data + outer * ld + p;
  }
};

// The word of two bfloat16 bit patterns: `low` the term 2q, `high` the term 2q + 1.
std::uint32_t pair_word(std::uint16_t low, std::uint16_t high) {
  return low | static_cast<std::uint32_t>(high) << 16;
}

// The 16 x 16 words r[0..16) transposed: afterwards r[c] holds word c of each of the 16 rows,
// in row order (interleave 32-bit words, then 64-bit pairs, then 128-bit lanes twice). The
// zero-masking forms with every lane kept are the plain instructions; GCC 12 warns of the plain
// intrinsics' undefined pass-through operand (GCC bug 105593).
__attribute__((target("avx512f"))) void transpose16(__m512i r[16]) {
  const __mmask16 all16 = 0xFFFF;
  const __mmask8 all8 = 0xFF;
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_epi32(all16, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(all16, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // r[i + j], lane L: word 4 L + j of rows i .. i + 3
    r[i] = _mm512_maskz_unpacklo_epi64(all8, t[i], t[i + 2]);
    r[i + 1] = _mm512_maskz_unpackhi_epi64(all8, t[i], t[i + 2]);
    r[i + 2] = _mm512_maskz_unpacklo_epi64(all8, t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_maskz_unpackhi_epi64(all8, t[i + 1], t[i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i even_lo = _mm512_maskz_shuffle_i32x4(all16, r[j], r[4 + j], 0x88);
    const __m512i odd_lo = _mm512_maskz_shuffle_i32x4(all16, r[j], r[4 + j], 0xDD);
    const __m512i even_hi = _mm512_maskz_shuffle_i32x4(all16, r[8 + j], r[12 + j], 0x88);
    const __m512i odd_hi = _mm512_maskz_shuffle_i32x4(all16, r[8 + j], r[12 + j], 0xDD);
    t[j] = _mm512_maskz_shuffle_i32x4(all16, even_lo, even_hi, 0x88);      // word j
    t[8 + j] = _mm512_maskz_shuffle_i32x4(all16, even_lo, even_hi, 0xDD);  // word 8 + j
    t[4 + j] = _mm512_maskz_shuffle_i32x4(all16, odd_lo, odd_hi, 0x88);    // word 4 + j
    t[12 + j] = _mm512_maskz_shuffle_i32x4(all16, odd_lo, odd_hi, 0xDD);   // word 12 + j
  }
  for (int i = 0; i < 16; ++i)
    r[i] = t[i];
}

// For X stored [outer, k]: 16 pairs from term `first_k` of `count` <= 16 consecutive rows from
// `row`, as pack_pairs writes them (pair q's words of the rows at out + q * width).
__attribute__((target("avx512f"))) void pack_pairs16(const Operand& x, std::size_t row,
                                                     std::size_t first_k, std::size_t count,
                                                     std::size_t width, std::uint32_t* out) {
  __m512i r[16];
  for (std::size_t i = 0; i < 16; ++i)
    r[i] = i < count ? _mm512_loadu_si512(x.at(row + i, first_k)) : _mm512_setzero_si512();
  transpose16(r);
  const auto rows = static_cast<__mmask16>((1u << count) - 1);
  for (std::size_t q = 0; q < 16; ++q)
    _mm512_mask_storeu_epi32(out + q * width, rows, r[q]);
}

bool cpu_has_avx512f() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

// The pairs of `count` rows (of op(A)) or columns (of op(B)) from `first` on, terms
// [first_k, first_k + depth), in micro-panels of `width`: panel s at out + s * pairs * width,
// the word of pair q and row or column r at q * width + r; zero past `count` and past `depth`.
// X stored [k, outer] gives pair q's words of a panel from two stored rows side by side (one
// contiguous output row); X stored [outer, k] gives a row's pairs as consecutive words of
// memory, which go down an output column: on AVX-512 they go 16 rows x 16 pairs at a time
// through an in-register transpose (the same words).
void pack_pairs(const Operand& x, std::size_t first, std::size_t count, std::size_t first_k,
                std::size_t depth, std::size_t width, std::uint32_t* out) {
  const std::size_t pairs = (depth + 1) / 2, whole = depth / 2;  // whole: pairs of two terms
  for (std::size_t s = 0; s < count; s += width, out += pairs * width) {
    const std::size_t used = std::min(width, count - s);
    for (std::size_t q = 0; used < width && q < pairs; ++q)  // the rows or columns past `count`
      std::fill(out + q * width + used, out + (q + 1) * width, 0u);
    if (x.k_slow) {
      for (std::size_t q = 0; q < pairs; ++q) {
        const bf16* low = x.at(first + s, first_k + 2 * q);
        std::uint32_t* row = out + q * width;
        if (q < whole) {
          const bf16* high = low + x.ld;
          for (std::size_t r = 0; r < used; ++r)
            row[r] = pair_word(low[r].bits, high[r].bits);
        } else {
          for (std::size_t r = 0; r < used; ++r)
            row[r] = low[r].bits;
        }
      }
      continue;
    }
    std::size_t transposed = 0;  // pairs written by pack_pairs16
    if (cpu_has_avx512f()) {
      for (; transposed + 16 <= whole; transposed += 16) {
        for (std::size_t r = 0; r < used; r += 16) {
          pack_pairs16(x, first + s + r, first_k + 2 * transposed,
                       std::min<std::size_t>(16, used - r), width, out + transposed * width + r);
        }
      }
    }
    for (std::size_t r = 0; r < used; ++r) {
      const bf16* terms = x.at(first + s + r, first_k);
      for (std::size_t q = transposed; q < whole; ++q)
        out[q * width + r] = pair_word(terms[2 * q].bits, terms[2 * q + 1].bits);
      if (whole < pairs) out[whole * width + r] = terms[2 * whole].bits;
    }
  }
}

// How a pass meets C, as packed_gemm.cpp's Update: C = alpha * pass, or the fused alpha * pass + C.
struct Update {
  float alpha;
  bool overwrite;
};

// A tile's rows of op(A): the word of pair q and row r at packed[q * kPairRows + r] (a micro-panel
// packed in pairs), or, with packed null, the two bfloat16 at rows + r * ld + 2 q (rows of k
// fastest, read in place or copied).
struct APairs {
  const std::uint32_t* packed;
  const bf16* rows;
  std::size_t ld;

  std::uint32_t word(std::size_t q, std::size_t r) const {
    if (packed != nullptr) return packed[q * kPairRows + r];
    std::uint32_t w;
    std::memcpy(&w, rows + r * ld + 2 * q, sizeof w);
    return w;
  }
};

// Row `out` of a bfloat16 C, 32 elements: lo and hi (its float32 values, 16 each) rounded once.
// VCVTNE2PS2BF16 rounds as to_bf16 does except that it counts denormal inputs as zero (Intel SDM
// vol. 2), so a row holding a denormal (possible only where alpha < 1 scaled a small sum: the
// pass's own results are flushed) takes round_to_bf16, which keeps it.
__attribute__((target("avx512f,avx512bf16"))) void store_rounded_row(__m512 lo, __m512 hi,
                                                                     bf16* out) {
  if ((denormal_lanes(lo) | denormal_lanes(hi)) != 0) {
    alignas(64) float row[kPairColumns];
    _mm512_store_ps(row, lo);
    _mm512_store_ps(row + kLanes, hi);
    round_to_bf16(row, out, kPairColumns);
    return;
  }
  _mm512_storeu_si512(out, _mm512_castps_si512((__m512)_mm512_cvtne2ps_pbh(hi, lo)));
}

// C[kTileRows, 32] (row stride ldc) updated with one pass of `pairs` pairs of A's first
// kTileRows rows (a.rows when kRowsOfA, else a.packed) and a micro-panel of B, on VDPBF16PS. A
// bfloat16 C takes the pass's alpha * sum rounded once (update.overwrite: one pass, beta = 0).
template <bool kRowsOfA, std::size_t kTileRows, class Out>
__attribute__((target("avx512f,avx512bf16"))) void dpbf16_tile(std::size_t pairs, const APairs& a,
                                                               const std::uint32_t* bp, Out* c,
                                                               std::size_t ldc,
                                                               const Update& update) {
  const std::uint32_t* ap = a.packed;
  const bf16* rows = a.rows;
  const std::size_t ld = a.ld;
  __m512 sum[kTileRows][2];
#pragma GCC unroll 16
  for (std::size_t r = 0; r < kTileRows; ++r)
    sum[r][0] = sum[r][1] = _mm512_setzero_ps();
  for (std::size_t q = 0; q < pairs; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + kLanes);
#pragma GCC unroll 16
    for (std::size_t r = 0; r < kTileRows; ++r) {
      std::uint32_t word;
      if constexpr (kRowsOfA) {
        std::memcpy(&word, rows + r * ld, sizeof word);
      } else {
        word = ap[r];
      }
      const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(word));
      sum[r][0] = _mm512_dpbf16_ps(sum[r][0], x, b0);
      sum[r][1] = _mm512_dpbf16_ps(sum[r][1], x, b1);
    }
    if constexpr (kRowsOfA) {
      rows += 2;
    } else {
      ap += kPairRows;
    }
    bp += kPairColumns;
  }
  const __m512 alpha = _mm512_set1_ps(update.alpha);
  if constexpr (std::is_same_v<Out, bf16>) {
#pragma GCC unroll 16
    for (std::size_t r = 0; r < kTileRows; ++r) {
      store_rounded_row(_mm512_mul_ps(alpha, sum[r][0]), _mm512_mul_ps(alpha, sum[r][1]),
                        c + r * ldc);
    }
  } else {
#pragma GCC unroll 16
    for (std::size_t r = 0; r < kTileRows; ++r) {
      for (std::size_t h = 0; h < 2; ++h) {
        float* out = c + r * ldc + h * kLanes;
        _mm512_storeu_ps(out, update.overwrite
                                  ? _mm512_mul_ps(alpha, sum[r][h])
                                  : _mm512_fmadd_ps(alpha, sum[r][h], _mm512_loadu_ps(out)));
      }
    }
  }
}

template <bool kRowsOfA, class Out, std::size_t... kCounts>
void dpbf16_rows(std::index_sequence<kCounts...>, std::size_t rows, std::size_t pairs,
                 const APairs& a, const std::uint32_t* bp, Out* c, std::size_t ldc,
                 const Update& update) {
  (void)((rows == kCounts + 1 &&
          (dpbf16_tile<kRowsOfA, kCounts + 1>(pairs, a, bp, c, ldc, update), true)) ||
         ...);
}

// C[rows, 32] (float32, or bfloat16 under a one-pass update) updated on VDPBF16PS.
template <class Out>
void dpbf16_kernel(std::size_t rows, std::size_t pairs, const APairs& a, const std::uint32_t* bp,
                   Out* c, std::size_t ldc, const Update& update) {
  if (a.packed != nullptr) {
    dpbf16_rows<false>(std::make_index_sequence<kPairRows>{}, rows, pairs, a, bp, c, ldc, update);
  } else {
    dpbf16_rows<true>(std::make_index_sequence<kPairRows>{}, rows, pairs, a, bp, c, ldc, update);
  }
}

// x, or zero of its sign when x is a float32 denormal (DAZ on an input, FTZ on a result).
float flush_denormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

// The float32 value of the low (half 0) or high (half 1) bfloat16 of a pair word.
float half_of(std::uint32_t word, int half) {
  return bf16_to_float(bf16{static_cast<std::uint16_t>(word >> (16 * half))});
}

// dpbf16_tile's arithmetic, one lane at a time: per pair the high products, then the low ones,
// each a float32 fused multiply-add with denormal inputs and results flushed.
void dpbf16_tile_emulated(std::size_t rows, std::size_t pairs, const APairs& a,
                          const std::uint32_t* bp, float* c, std::size_t ldc,
                          const Update& update) {
  float sum[kPairRows][kPairColumns] = {};
  for (std::size_t q = 0; q < pairs; ++q, bp += kPairColumns) {
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t j = 0; j < kPairColumns; ++j) {
        float& acc = sum[r][j];
        for (const int half : {1, 0}) {
          acc = flush_denormal(std::fma(flush_denormal(half_of(a.word(q, r), half)),
                                        flush_denormal(half_of(bp[j], half)), flush_denormal(acc)));
        }
      }
    }
  }
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < kPairColumns; ++j) {
      float& out = c[r * ldc + j];
      out = update.overwrite ? update.alpha * sum[r][j] : std::fma(update.alpha, sum[r][j], out);
    }
  }
}

// C[rows, 32] (row stride ldc) updated with one pass by `kernel`.
void pair_kernel(Bf16Kernel kernel, std::size_t rows, std::size_t pairs, const APairs& a,
                 const std::uint32_t* bp, float* c, std::size_t ldc, const Update& update) {
  if (kernel != Bf16Kernel::avx512bf16) {
    dpbf16_tile_emulated(rows, pairs, a, bp, c, ldc, update);
  } else {
    dpbf16_kernel(rows, pairs, a, bp, c, ldc, update);
  }
}

// The same for C[rows, cols] with cols <= 32: a tile of fewer columns goes through a full-width
// one in memory, so every element meets the same arithmetic.
void pair_tile(Bf16Kernel kernel, std::size_t rows, std::size_t cols, std::size_t pairs,
               const APairs& a, const std::uint32_t* bp, float* c, std::size_t ldc,
               const Update& update) {
  if (cols == kPairColumns) {
    pair_kernel(kernel, rows, pairs, a, bp, c, ldc, update);
    return;
  }
  alignas(64) float tile[kPairRows * kPairColumns] = {};
  for (std::size_t r = 0; r < rows; ++r)
    std::copy(c + r * ldc, c + r * ldc + cols, tile + r * kPairColumns);
  pair_kernel(kernel, rows, pairs, a, bp, tile, kPairColumns, update);
  for (std::size_t r = 0; r < rows; ++r)
    std::copy(tile + r * kPairColumns, tile + r * kPairColumns + cols, c + r * ldc);
}

// The row stride of A's rows as copy_pair_rows leaves them: past kDepth by 64 bytes, so that they
// share no L1 sets.
constexpr std::size_t kPaddedDepth = kDepth + 32;
static_assert(!rows_share_l1_sets(kPaddedDepth * sizeof(bf16), kPairRows));

// Rows [first_row, first_row + rows) of A stored [m, k], terms [first_k, first_k + depth), to
// `out` kPaddedDepth apart, each followed by a zero term when depth is odd (the high term of its
// last pair).
void copy_pair_rows(const bf16* a, std::size_t lda, std::size_t first_row, std::size_t rows,
                    std::size_t first_k, std::size_t depth, bf16* out) {
  for (std::size_t i = 0; i < rows; ++i) {
    const bf16* row = a + (first_row + i) * lda + first_k;
    std::copy(row, row + depth, out + i * kPaddedDepth);
    if (depth % 2 != 0) out[i * kPaddedDepth + depth] = bf16{0};
  }
}

// The thread's pair panels: one block of A (packed, or its rows copied) and one panel of B.
struct PairScratch {
  std::vector<std::uint32_t> a, b;
  std::vector<bf16> a_rows;
  PairScratch()
      : a(kBlockRows * kDepth / 2),
        b((kPanelColumns + kPairColumns - 1) / kPairColumns * kPairColumns * kDepth / 2),
        a_rows(kBlockRows * kPaddedDepth) {}
};

// packed_gemm_bf16 with a pair kernel (the loops of packed_gemm.cpp over pair panels) into a
// float32 C, or into a bfloat16 C when k fits one pass and beta is 0: each tile of C is the one
// pass's float32 tile rounded once, as a float32 C rounded afterwards would be (from the
// registers on VDPBF16PS for a tile of 32 columns, through an L1 tile otherwise).
template <class Out>
void pair_gemm(Bf16Kernel kernel, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
               std::size_t k, float alpha, const bf16* a, std::size_t lda, const bf16* b,
               std::size_t ldb, float beta, Out* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if constexpr (std::is_same_v<Out, float>) {
    if (!scale_c_first(m, n, k, beta, c, ldc)) return;
  }
  thread_local PairScratch scratch;
  const Operand op_a{a, lda, trans_a}, op_b{b, ldb, !trans_b};
  // A stored [m, k] is read in place; its block's rows are copied first where in place they would
  // share L1 sets, or k is odd (the copy gives the last pair its zero high term).
  const bool copies_a =
      !trans_a && (k % 2 != 0 || rows_share_l1_sets(lda * sizeof(bf16), kPairRows));
  for (std::size_t jc = 0; jc < n; jc += kPanelColumns) {
    const std::size_t nc = std::min(kPanelColumns, n - jc);
    for (std::size_t pc = 0; pc < k; pc += kDepth) {
      const std::size_t kc = std::min(kDepth, k - pc), pairs = (kc + 1) / 2;
      const Update update{alpha, pc == 0 && beta == 0.0f};
      pack_pairs(op_b, jc, nc, pc, kc, kPairColumns, scratch.b.data());
      for (std::size_t ic = 0; ic < m; ic += kBlockRows) {
        const std::size_t mc = std::min(kBlockRows, m - ic);
        if (trans_a) pack_pairs(op_a, ic, mc, pc, kc, kPairRows, scratch.a.data());
        if (copies_a) copy_pair_rows(a, lda, ic, mc, pc, kc, scratch.a_rows.data());
        for (std::size_t jr = 0; jr < nc; jr += kPairColumns) {
          for (std::size_t ir = 0; ir < mc; ir += kPairRows) {
            const std::size_t rows = std::min(kPairRows, mc - ir);
            const std::size_t cols = std::min(kPairColumns, nc - jr);
            const APairs ap =
                trans_a ? APairs{scratch.a.data() + ir * pairs, nullptr, 0}
                : copies_a
                    ? APairs{nullptr, scratch.a_rows.data() + ir * kPaddedDepth, kPaddedDepth}
                    : APairs{nullptr, a + (ic + ir) * lda + pc, lda};
            const std::uint32_t* bp = scratch.b.data() + jr * pairs;
            Out* tile = c + (ic + ir) * ldc + jc + jr;
            if constexpr (std::is_same_v<Out, float>) {
              pair_tile(kernel, rows, cols, pairs, ap, bp, tile, ldc, update);
            } else if (kernel == Bf16Kernel::avx512bf16 && cols == kPairColumns) {
              dpbf16_kernel(rows, pairs, ap, bp, tile, ldc, update);
            } else {
              alignas(64) float sum[kPairRows * kPairColumns];
              pair_kernel(kernel, rows, pairs, ap, bp, sum, kPairColumns, update);
              for (std::size_t r = 0; r < rows; ++r)
                round_to_bf16(sum + r * kPairColumns, tile + r * ldc, cols);
            }
          }
        }
      }
    }
  }
}

}  // namespace

bool cpu_has_avx512_bf16() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  return has;
}

Bf16Kernel chosen_bf16_kernel() {
  return bf16_gemm_path() == Bf16GemmPath::avx512bf16 ? Bf16Kernel::avx512bf16
                                                      : Bf16Kernel::convert_at_pack;
}

namespace {

void refuse_missing_instruction(Bf16Kernel kernel) {
  if (kernel == Bf16Kernel::avx512bf16 && !cpu_has_avx512_bf16()) {
    throw std::logic_error(
        "kernels: the avx512bf16 GEMM kernel was asked for on a CPU without AVX512-BF16");
  }
}

}  // namespace

void packed_gemm_bf16(Bf16Kernel kernel, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                      std::size_t k, float alpha, const bf16* a, std::size_t lda, const bf16* b,
                      std::size_t ldb, float beta, float* c, std::size_t ldc) {
  if (kernel == Bf16Kernel::convert_at_pack) {
    packed_gemm_bf16_converted(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  refuse_missing_instruction(kernel);
  pair_gemm<float>(kernel, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void packed_gemm_bf16(Bf16Kernel kernel, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                      std::size_t k, float alpha, const bf16* a, std::size_t lda, const bf16* b,
                      std::size_t ldb, float beta, bf16* c, std::size_t ldc) {
  if (kernel != Bf16Kernel::convert_at_pack && beta == 0.0f && k > 0 && k <= kDepth) {
    refuse_missing_instruction(kernel);
    pair_gemm<bf16>(kernel, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  thread_local std::vector<float> workspace;
  for (std::size_t jc = 0; jc < n; jc += kPanelColumns) {
    const std::size_t width = std::min(kPanelColumns, n - jc);
    if (workspace.size() < m * width) workspace.resize(m * width);
    float* panel = workspace.data();
    if (beta != 0.0f) {
      for (std::size_t i = 0; i < m; ++i)
        widen_bf16(c + i * ldc + jc, panel + i * width, width);
    }
    packed_gemm_bf16(kernel, trans_a, trans_b, m, width, k, alpha, a, lda,
                     b + (trans_b ? jc * ldb : jc), ldb, beta, panel, width);
    for (std::size_t i = 0; i < m; ++i)
      round_to_bf16(panel + i * width, c + i * ldc + jc, width);
  }
}

}  // namespace mpitron::kernels::cpu
