// mpitron's own float32 GEMM: packed panels and a register-blocked micro-kernel; with bfloat16
// operands widened to float32 as they are packed, the portable path of the bfloat16 GEMM.
#pragma once

#include <cstddef>
#include <numeric>

#include "kernels/bf16.h"

namespace mpitron::kernels::cpu {

/// The blocking of the packed GEMM for the vector width it was compiled for: a micro-tile is
/// kRows rows by kColumns columns of C (kColumns = 2 vectors), held in registers while it sums
/// kDepth terms of k; op(A) is packed in blocks of kBlockRows rows and op(B) in panels of
/// kPanelColumns columns (the loops of Goto and van de Geijn, "Anatomy of high-performance matrix
/// multiplication", ACM TOMS 2008, as BLIS arranges them).
struct PackedGemmShape {
  std::size_t vector_floats;  ///< floats per vector register: 16 (AVX-512), 8 (AVX2), 4 (SSE)
  std::size_t rows;           ///< kRows: rows of a micro-tile
  std::size_t columns;        ///< kColumns: columns of a micro-tile
  std::size_t depth;          ///< kDepth: terms of k per pass over C
};

/// The shape this build's packed GEMM uses.
PackedGemmShape packed_gemm_shape();

/// Row-major C[m, n] = alpha op(A) op(B) + beta C in float32, A stored [m, k] with leading
/// dimension lda (or [k, m] when trans_a), B stored [k, n] with ldb (or [n, k] when trans_b), C
/// with ldc; beta = 0 never reads C. Each element of C is summed the same way whatever the
/// sizes of the other dimensions and however the product is cut: C = beta C first (unless beta
/// is 0 or 1), then k in passes of `depth` terms in order, each pass one fused multiply-add chain
/// from zero, added to C as one fused alpha * pass + C (the first pass with beta = 0 stores
/// alpha * pass). So any block of rows and columns of the product, computed as a product of its
/// own, has the bits of the whole call. Uses thread-local packing buffers of
/// about 1.1 MiB.
void packed_sgemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                  float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb,
                  float beta, float* c, std::size_t ldc);

/// packed_sgemm with bfloat16 A and B: every element is widened to float32 (exactly) as it is
/// packed, and the float32 micro-kernel sums the products in float32, so C has the bits of
/// packed_sgemm on the float32 values of A and B (tests/kernels/test_bf16_gemm.cpp checks it). C
/// is float32, accumulated into when beta = 1 (C += alpha op(A) op(B)). Arguments as
/// packed_sgemm; runs on any x86-64 (the portable path of cpu/packed_gemm_bf16.h).
void packed_gemm_bf16_converted(bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                                std::size_t k, float alpha, const bf16* a, std::size_t lda,
                                const bf16* b, std::size_t ldb, float beta, float* c,
                                std::size_t ldc);

/// Whether `rows` rows of A, `row_bytes` apart, would evict each other from L1 when a micro-kernel
/// reads them in place. An L1 way is 4 KiB on current x86 cores (32 or 48 KiB in 8 or 12 ways),
/// so rows row_bytes apart fall on 4096 / gcd(row_bytes, 4096) distinct sets: one set for every
/// row of 4096 or 12288 bytes (the float32 [tokens, 4 hidden] activations of GPT-2's MLP and of
/// the README example's). Past 4 rows to a set (half the ways, the rest for B's micro-panel and
/// C) the packed GEMMs copy A's rows to a padded stride instead.
constexpr bool rows_share_l1_sets(std::size_t row_bytes, std::size_t rows) {
  constexpr std::size_t kWayBytes = 4096;
  const std::size_t sets = kWayBytes / std::gcd(row_bytes, kWayBytes);
  return (rows + sets - 1) / sets > 4;
}

/// The first step of the packed GEMMs on C[m, n] (row stride ldc): C = beta C unless beta is 0 or
/// 1 (beta 0 stores zeros only when k = 0, so C is never read then), after which `beta` is 1 for
/// the passes. Returns false when k = 0: C = beta C is then the whole product.
bool scale_c_first(std::size_t m, std::size_t n, std::size_t k, float& beta, float* c,
                   std::size_t ldc);

}  // namespace mpitron::kernels::cpu
