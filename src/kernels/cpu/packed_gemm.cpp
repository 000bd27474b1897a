// mpitron's float32 GEMM: op(B) packed in panels (Panels), op(A) in blocks of
// kBlockRows rows (row-major A read in place, as BLIS's kernels for small products do, or from a
// copy of the block's rows at a padded stride where its rows share L1 sets; transposed A packed),
// both cut into kDepth terms of k, and a micro-kernel that keeps a kRows x kColumns tile of C in
// vector registers while it runs through one pass of k. The vectors are
// GCC's vector extensions of the width the file is compiled for (AVX-512, AVX2 or SSE), and every
// multiply-add is the FMA instruction itself (fma below), not left to the compiler's contraction,
// which GCC applied in some inlined copies of the micro-kernel and not in others (AVX-512 builds:
// alpha * pass + C then differed in the last bit between full and partial tiles).
#include "kernels/cpu/packed_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/bf16_convert.h"

namespace mpitron::kernels::cpu {
namespace {

#if defined(__AVX512F__)
constexpr std::size_t kVector = 16;  // 32 registers: 24 accumulators, 2 of B, 1 of A
constexpr std::size_t kRows = 12;
#elif defined(__AVX__)
constexpr std::size_t kVector = 8;  // 16 registers: 12 accumulators, 2 of B, 1 of A
constexpr std::size_t kRows = 6;
#else
constexpr std::size_t kVector = 4;
constexpr std::size_t kRows = 6;
#endif
constexpr std::size_t kColumns = 2 * kVector;
// One pass of k: a micro-panel of packed B (kDepth x kColumns floats, 16 KiB with AVX2) stays in
// L1 while the micro-panels of A stream past it from L2.
constexpr std::size_t kDepth = 256;
// A block of kBlockRows x kDepth packed A (96 KiB with AVX2, 192 KiB with AVX-512) for L2, and a
// panel of packed B of at most kPanelFloats (1 MiB) for L3: kDepth terms of up to kPanelColumns
// columns, or all of k for fewer columns where k is short enough (Panels).
constexpr std::size_t kBlockRows = 16 * kRows;
constexpr std::size_t kPanelColumns = 1024;
constexpr std::size_t kPanelFloats = kPanelColumns * kDepth;
// The fewest columns of a panel that holds all of k (k <= 1024).
constexpr std::size_t kMinWholeKColumns = 256;

using Vec = float __attribute__((vector_size(kVector * sizeof(float))));

// An unaligned vector of floats (Vec, or Vec8 below) at p.
template <class V = Vec>
V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

Vec splat(float x) {
  return x - Vec{};
}

// a * b + c, rounded once where the machine has FMA (without it, SSE only, rounded twice
// everywhere alike).
Vec fma(Vec a, Vec b, Vec c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#elif defined(__FMA__)
  return _mm256_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}

// How a pass meets C: C = alpha * pass, or C = alpha * pass + C (one fused multiply-add, so
// every element meets the same rounding wherever its tile lies). beta is applied before the
// passes (packed_sgemm).
struct Update {
  float alpha;
  bool overwrite;  // the first pass with beta = 0: C is not read

  Vec apply(Vec sum, const float* c) const {
    return overwrite ? splat(alpha) * sum : fma(splat(alpha), sum, load(c));
  }
};

// C[kTileRows, kColumns] (row stride ldc) updated with the product of kTileRows (<= kRows) rows
// of A by depth terms and one micro-panel of B (depth x kColumns, packed). The rows of A are a
// packed micro-panel (depth x kRows, of which the first kTileRows rows are read), or with
// kRowMajorA the rows of A in place, lda apart. Each element of C is the same fused
// multiply-add chain whatever kTileRows is.
template <bool kRowMajorA, std::size_t kTileRows>
void micro_kernel(std::size_t depth, const float* a, std::size_t lda, const float* bp, float* c,
                  std::size_t ldc, const Update& update) {
  if (!update.overwrite) {  // C's rows arrive from L2 or L3 while the loop below runs
#pragma GCC unroll 16
    for (std::size_t r = 0; r < kTileRows; ++r) {
      __builtin_prefetch(c + r * ldc);
      __builtin_prefetch(c + r * ldc + kColumns - 1);
    }
  }
  Vec sum[kTileRows][2];
#pragma GCC unroll 16
  for (std::size_t r = 0; r < kTileRows; ++r)
    sum[r][0] = sum[r][1] = splat(0.0f);
#pragma GCC unroll 4
  for (std::size_t p = 0; p < depth; ++p) {
    const Vec b0 = load(bp), b1 = load(bp + kVector);
#pragma GCC unroll 16
    for (std::size_t r = 0; r < kTileRows; ++r) {
      const Vec x = splat(kRowMajorA ? a[r * lda] : a[r]);
      sum[r][0] = fma(x, b0, sum[r][0]);
      sum[r][1] = fma(x, b1, sum[r][1]);
    }
    a += kRowMajorA ? 1 : kRows;
    bp += kColumns;
  }
#pragma GCC unroll 16
  for (std::size_t r = 0; r < kTileRows; ++r) {
    float* row = c + r * ldc;
    store(row, update.apply(sum[r][0], row));
    store(row + kVector, update.apply(sum[r][1], row + kVector));
  }
}

// The same for C[kTileRows, cols] with cols <= kColumns: a tile of fewer columns goes through a
// full-width one in memory, so every element meets the same arithmetic.
template <bool kRowMajorA, std::size_t kTileRows>
void rows_kernel(std::size_t depth, const float* a, std::size_t lda, const float* bp, float* c,
                 std::size_t ldc, std::size_t cols, const Update& update) {
  if (cols == kColumns) {
    micro_kernel<kRowMajorA, kTileRows>(depth, a, lda, bp, c, ldc, update);
    return;
  }
  alignas(64) float tile[kTileRows * kColumns] = {};
  for (std::size_t r = 0; r < kTileRows; ++r)
    std::copy(c + r * ldc, c + r * ldc + cols, tile + r * kColumns);
  micro_kernel<kRowMajorA, kTileRows>(depth, a, lda, bp, tile, kColumns, update);
  for (std::size_t r = 0; r < kTileRows; ++r)
    std::copy(tile + r * kColumns, tile + r * kColumns + cols, c + r * ldc);
}

// The kernel for a tile of `rows` (1..kRows) x `cols` rows and columns: one instantiation per
// row count, so a last tile of fewer rows (64 = 5 x 12 + 4 rows of an attention tile) does only
// its own rows' work and reads only its own rows of A.
template <bool kRowMajorA, std::size_t... kCounts>
void tile_kernel(std::index_sequence<kCounts...>, std::size_t depth, const float* a,
                 std::size_t lda, const float* bp, float* c, std::size_t ldc, std::size_t rows,
                 std::size_t cols, const Update& update) {
  (void)((rows == kCounts + 1 &&
          (rows_kernel<kRowMajorA, kCounts + 1>(depth, a, lda, bp, c, ldc, cols, update), true)) ||
         ...);
}

template <bool kRowMajorA>
void tile_kernel(std::size_t depth, const float* a, std::size_t lda, const float* bp, float* c,
                 std::size_t ldc, std::size_t rows, std::size_t cols, const Update& update) {
  tile_kernel<kRowMajorA>(std::make_index_sequence<kRows>{}, depth, a, lda, bp, c, ldc, rows, cols,
                          update);
}

// Whether the kRows rows of A, lda floats apart, share L1 sets (packed_gemm.h).
constexpr bool rows_share_l1_sets(std::size_t lda) {
  return cpu::rows_share_l1_sets(lda * sizeof(float), kRows);
}

// The row stride of A's rows as copy_a_rows leaves them: past kDepth by one vector, so that they
// share no L1 sets.
constexpr std::size_t kPaddedDepth = kDepth + kVector;
static_assert(!rows_share_l1_sets(kPaddedDepth));

// Eight floats, whatever the width of Vec (the 8 x 8 transposes of pack_b).
using Vec8 = float __attribute__((vector_size(8 * sizeof(float))));
using Index8 = int __attribute__((vector_size(8 * sizeof(int))));
using Words8 = std::uint32_t __attribute__((vector_size(8 * sizeof(std::uint32_t))));
using Halves8 = std::uint16_t __attribute__((vector_size(8 * sizeof(std::uint16_t))));

// Eight floats at p, or the eight bfloat16 at p widened to float32 (exactly: 16-bit shifts).
Vec8 load8(const float* p) {
  return load<Vec8>(p);
}

Vec8 load8(const bf16* p) {
  Halves8 h;
  std::memcpy(&h, p, sizeof h);
  const Words8 u = __builtin_convertvector(h, Words8) << 16;
  Vec8 v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// in[0, count) as float32 at out: the packing's one conversion of a bfloat16 operand (a copy for
// float32).
void widen(const float* in, std::size_t count, float* out) {
  std::memcpy(out, in, count * sizeof(float));
}

void widen(const bf16* in, std::size_t count, float* out) {
  widen_bf16(in, out, count);
}

// One element as float32.
float as_float(float x) {
  return x;
}

float as_float(bf16 x) {
  return bf16_to_float(x);
}

// out[p * ldo + j] = in[j * ldi + p] for j, p < 8 (as float32): pairs interleaved, then pairs of
// pairs, then halves, in registers.
template <class In>
void transpose8(const In* in, std::size_t ldi, float* out, std::size_t ldo) {
  Vec8 row[8], pair[8], quad[8];
  for (std::size_t j = 0; j < 8; ++j)
    row[j] = load8(in + j * ldi);
  for (std::size_t j = 0; j < 8; j += 2) {
    pair[j] = __builtin_shuffle(row[j], row[j + 1], Index8{0, 8, 1, 9, 4, 12, 5, 13});
    pair[j + 1] = __builtin_shuffle(row[j], row[j + 1], Index8{2, 10, 3, 11, 6, 14, 7, 15});
  }
  for (std::size_t h = 0; h < 8; h += 4) {
    for (std::size_t x = 0; x < 2; ++x) {
      quad[h + 2 * x] =
          __builtin_shuffle(pair[h + x], pair[h + x + 2], Index8{0, 1, 8, 9, 4, 5, 12, 13});
      quad[h + 2 * x + 1] =
          __builtin_shuffle(pair[h + x], pair[h + x + 2], Index8{2, 3, 10, 11, 6, 7, 14, 15});
    }
  }
  for (std::size_t p = 0; p < 4; ++p) {
    store(out + p * ldo, __builtin_shuffle(quad[p], quad[p + 4], Index8{0, 1, 2, 3, 8, 9, 10, 11}));
    store(out + (p + 4) * ldo,
          __builtin_shuffle(quad[p], quad[p + 4], Index8{4, 5, 6, 7, 12, 13, 14, 15}));
  }
}

// out[0, count) = in[0, count) as float32 for count <= kMax, as fixed-size moves when count is
// kMax.
template <std::size_t kMax, class In>
void copy_short(const In* in, std::size_t count, float* out) {
  if (count == kMax) {
    widen(in, kMax, out);
  } else {
    widen(in, count, out);
  }
}

// op(A)[first_row + i, first_k + p] = a[(first_k + p) * lda + first_row + i] (transposed A) for
// i < rows, p < depth, as micro-panels of kRows rows: panel s holds depth x kRows floats,
// row-fastest (a last panel of fewer rows leaves the others unset: its tile kernel reads only its
// own rows). A is read a row at a time, `rows` contiguous floats, rather than kRows floats per row
// one panel after another (with the rows of A copied below: fc dW and fc dx of the train example
// at 4096 tokens, from memory, 81-90 -> 87-94 and 71-79 -> 86 GFLOP/s on a Zen 4). In is float
// or bf16 (widened to float32 here, once per element of the block).
template <class In>
void pack_transposed_a(const In* a, std::size_t lda, std::size_t first_row, std::size_t rows,
                       std::size_t first_k, std::size_t depth, float* out) {
  for (std::size_t p = 0; p < depth; ++p) {
    const In* src = a + (first_k + p) * lda + first_row;
    for (std::size_t s = 0; s < rows; s += kRows)
      copy_short<kRows>(src + s, std::min(kRows, rows - s), out + s * depth + p * kRows);
  }
}

// Rows [first_row, first_row + rows) of row-major A, terms [first_k, first_k + depth), copied to
// rows kPaddedDepth floats apart in `out`: the tile kernels then read them in place without the
// L1 conflicts of rows_share_l1_sets(lda), and as float32 when In is bf16.
template <class In>
void copy_a_rows(const In* a, std::size_t lda, std::size_t first_row, std::size_t rows,
                 std::size_t first_k, std::size_t depth, float* out) {
  for (std::size_t i = 0; i < rows; ++i)
    widen(a + (first_row + i) * lda + first_k, depth, out + i * kPaddedDepth);
}

// op(B)[first_k + p, first_col + j] for p < depth, j < cols, as micro-panels of kColumns
// columns: panel s holds depth x kColumns floats, column-fastest, zero past the last column. B
// that is not transposed is read a row at a time, as pack_transposed_a reads A. bf16 is widened
// to float32 here.
template <class In>
void pack_b(bool trans, const In* b, std::size_t ldb, std::size_t first_k, std::size_t depth,
            std::size_t first_col, std::size_t cols, float* out) {
  if (cols % kColumns != 0) {
    float* last = out + cols / kColumns * depth * kColumns;
    std::fill(last, last + depth * kColumns, 0.0f);
  }
  if (!trans) {  // op(B)[q, j] = b[q * ldb + j]
    for (std::size_t p = 0; p < depth; ++p) {
      const In* src = b + (first_k + p) * ldb + first_col;
      for (std::size_t s = 0; s < cols; s += kColumns)
        copy_short<kColumns>(src + s, std::min(kColumns, cols - s), out + s * depth + p * kColumns);
    }
    return;
  }
  // op(B)[q, j] = b[j * ldb + q]: one row of B per j, 8 x 8 blocks transposed
  for (std::size_t s = 0; s < cols; s += kColumns, out += depth * kColumns) {
    const std::size_t width = std::min(kColumns, cols - s), j0 = first_col + s;
    const std::size_t full = width == kColumns ? depth / 8 * 8 : 0;
    for (std::size_t p = 0; p < full; p += 8)
      for (std::size_t j = 0; j < kColumns; j += 8)
        transpose8(b + (j0 + j) * ldb + first_k + p, ldb, out + p * kColumns + j, kColumns);
    for (std::size_t j = 0; j < width; ++j) {
      const In* src = b + (j0 + j) * ldb + first_k;
      for (std::size_t p = full; p < depth; ++p)
        out[p * kColumns + j] = as_float(src[p]);
    }
  }
}

// The thread's packing buffers: one block of A (packed, or its rows copied) and one panel of B.
struct Scratch {
  std::vector<float> a, b;
  Scratch() : a(kBlockRows * kPaddedDepth), b(kPanelFloats) {}
};

// How op(B) is cut into panels: of `columns` columns each (a multiple of kColumns; the last panel
// holds the rest), each packed for all of k at once (whole_k) or one pass at a time.
// A panel that holds all of k lets each block of rows of C take every pass while it is in L2:
// the weight gradient of a wide layer (m = 49152 rows of C at k = 384 tokens, accumulated into
// with beta = 1) otherwise read and wrote all of C from memory once per pass. Panels are as even as
// kColumns allows: the LM head's input gradient (n = 576 at k = 49152) is one panel of 576 columns,
// so its A, the logits' gradient, is read from memory once.
struct Panels {
  std::size_t columns;
  bool whole_k;

  static Panels of(std::size_t n, std::size_t k) {
    const std::size_t whole_k_columns = kPanelFloats / std::max<std::size_t>(k, 1);
    const bool whole_k = k > kDepth && whole_k_columns >= kMinWholeKColumns;
    const std::size_t widest = whole_k ? whole_k_columns / kColumns * kColumns : kPanelColumns;
    const std::size_t count = (n + widest - 1) / widest;
    const std::size_t even = (n + count - 1) / count;
    return {(even + kColumns - 1) / kColumns * kColumns, whole_k};
  }
};

// packed_sgemm (In float), or packed_gemm_bf16_converted (In bf16): bfloat16 operands are
// widened to float32 as they are packed, and row-major bfloat16 A is always copied (widened),
// never read in place. Copied or in place, A gives the same bits, so bfloat16 inputs give the
// bits of packed_sgemm on their float32 values.
template <class In>
void packed_gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                 float alpha, const In* a, std::size_t lda, const In* b, std::size_t ldb,
                 float beta, float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (!scale_c_first(m, n, k, beta, c, ldc)) return;
  thread_local Scratch scratch;
  // Row-major A is read in place, or from a copy of its rows where they share L1 sets or are
  // bfloat16; transposed A is packed.
  const bool copies_a = !trans_a && (std::is_same_v<In, bf16> || rows_share_l1_sets(lda));
  const std::size_t a_stride = copies_a ? kPaddedDepth : lda;
  // Rows [ic, ic + mc) of C, columns [jc, jc + nc), one pass of kc terms from pc with op(B)'s
  // panel packed at `panel`.
  const auto block = [&](std::size_t ic, std::size_t mc, std::size_t jc, std::size_t nc,
                         std::size_t pc, std::size_t kc, const float* panel) {
    const Update update{alpha, pc == 0 && beta == 0.0f};
    if (trans_a) pack_transposed_a(a, lda, ic, mc, pc, kc, scratch.a.data());
    if (copies_a) copy_a_rows(a, lda, ic, mc, pc, kc, scratch.a.data());
    const float* a_rows = scratch.a.data();
    if constexpr (std::is_same_v<In, float>) {
      if (!copies_a) a_rows = a + ic * lda + pc;
    }
    for (std::size_t jr = 0; jr < nc; jr += kColumns) {
      const float* bp = panel + jr * kc;
      for (std::size_t ir = 0; ir < mc; ir += kRows) {
        float* tile = c + (ic + ir) * ldc + jc + jr;
        const std::size_t rows = std::min(kRows, mc - ir), cols = std::min(kColumns, nc - jr);
        if (trans_a) {
          tile_kernel<false>(kc, scratch.a.data() + ir * kc, 0, bp, tile, ldc, rows, cols, update);
        } else {
          tile_kernel<true>(kc, a_rows + ir * a_stride, a_stride, bp, tile, ldc, rows, cols,
                            update);
        }
      }
    }
  };
  const Panels panels = Panels::of(n, k);
  const std::size_t padded = panels.columns;  // floats per term of k in a packed panel
  for (std::size_t jc = 0; jc < n; jc += panels.columns) {
    const std::size_t nc = std::min(panels.columns, n - jc);
    if (panels.whole_k) {  // pass pc at scratch.b + pc * padded; each block of C takes them all
      for (std::size_t pc = 0; pc < k; pc += kDepth)
        pack_b(trans_b, b, ldb, pc, std::min(kDepth, k - pc), jc, nc,
               scratch.b.data() + pc * padded);
      for (std::size_t ic = 0; ic < m; ic += kBlockRows) {
        for (std::size_t pc = 0; pc < k; pc += kDepth) {
          block(ic, std::min(kBlockRows, m - ic), jc, nc, pc, std::min(kDepth, k - pc),
                scratch.b.data() + pc * padded);
        }
      }
      continue;
    }
    for (std::size_t pc = 0; pc < k; pc += kDepth) {
      const std::size_t kc = std::min(kDepth, k - pc);
      pack_b(trans_b, b, ldb, pc, kc, jc, nc, scratch.b.data());
      for (std::size_t ic = 0; ic < m; ic += kBlockRows)
        block(ic, std::min(kBlockRows, m - ic), jc, nc, pc, kc, scratch.b.data());
    }
  }
}

}  // namespace

PackedGemmShape packed_gemm_shape() {
  return {kVector, kRows, kColumns, kDepth};
}

bool scale_c_first(std::size_t m, std::size_t n, std::size_t k, float& beta, float* c,
                   std::size_t ldc) {
  if (k != 0 && (beta == 0.0f || beta == 1.0f)) return true;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
  beta = 1.0f;
  return k != 0;
}

void packed_sgemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                  float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb,
                  float beta, float* c, std::size_t ldc) {
  packed_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void packed_gemm_bf16_converted(bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                                std::size_t k, float alpha, const bf16* a, std::size_t lda,
                                const bf16* b, std::size_t ldb, float beta, float* c,
                                std::size_t ldc) {
  packed_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace mpitron::kernels::cpu
