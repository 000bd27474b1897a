// mpitron's bfloat16 GEMM on the CPU: the portable path (operands widened to float32 as they are
// packed, packed_gemm.h) and the VDPBF16PS path (operands packed in pairs along k, never
// widened), with a scalar emulation of the VDPBF16PS micro-kernel over the same packed panels so
// that the pair layout is tested on CPUs without the instruction.
#pragma once

#include <cstddef>

#include "kernels/bf16.h"

namespace mpitron::kernels::cpu {

/// The micro-kernel of a bfloat16 product.
enum class Bf16Kernel {
  /// packed_gemm_bf16_converted: float32 fused multiply-adds on widened operands; any x86-64.
  convert_at_pack,
  /// VDPBF16PS (_mm512_dpbf16_ps) on a 12 x 32 tile of C, 24 zmm accumulators; needs
  /// cpu_has_avx512_bf16(), compiled with a function-level target attribute (no build flag).
  avx512bf16,
  /// The avx512bf16 micro-kernel's arithmetic in scalar C++ over the same packed panels: for
  /// tests on any CPU.
  avx512bf16_emulated,
};

/// Whether this CPU (and its OS) runs AVX512F and AVX512-BF16 (__builtin_cpu_supports, which
/// reads cpuid leaf 7 subleaf 1 EAX bit 5 and the OS's saved register state). Asked once.
bool cpu_has_avx512_bf16();

/// The kernel of the path kernels::bf16_gemm_path() names: avx512bf16 or convert_at_pack.
Bf16Kernel chosen_bf16_kernel();

/// Row-major C[m, n] = alpha op(A) op(B) + beta C (float32 C, row stride ldc) with bfloat16 A
/// stored [m, k] with leading dimension lda (or [k, m] when trans_a) and B stored [k, n] with
/// ldb (or [n, k] when trans_b), on one thread with `kernel`. beta = 0 never reads C; beta = 1
/// accumulates into it. As in packed_sgemm: C = beta C first unless beta is 0 or 1, then k in
/// passes (of packed_sgemm's 256 terms on convert_at_pack, of 1024 on the pair kernels), each
/// summed from zero and added as one fused alpha * pass + C (the first pass with beta = 0 stores
/// alpha * pass), so any block of the product has the whole call's bits.
///
/// The pair kernels (avx512bf16 and its emulation) sum a pass as VDPBF16PS does (Intel 64 and
/// IA-32 Architectures Software Developer's Manual, vol. 2, "VDPBF16PS"): per element of C,
/// for each pair of terms (2q, 2q + 1) in order, acc = fma(a_{2q+1}, b_{2q+1}, acc), then acc =
/// fma(a_{2q}, b_{2q}, acc), each a float32 fused multiply-add rounded to nearest even whose
/// denormal inputs (bfloat16 denormals, a denormal accumulator) count as zero and whose denormal
/// result is flushed to zero of its sign (DAZ, FTZ), whatever MXCSR says; an odd k pads the last
/// pair with a zero term. convert_at_pack sums the terms in order with float32 fused
/// multiply-adds and keeps denormals. Both obey the bound of kernels::gemm_bf16 for results and
/// products above the float32 normal range's floor (2^-126), and differ in bits.
///
/// Throws std::logic_error for `avx512bf16` when !cpu_has_avx512_bf16().
void packed_gemm_bf16(Bf16Kernel kernel, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                      std::size_t k, float alpha, const bf16* a, std::size_t lda, const bf16* b,
                      std::size_t ldb, float beta, float* c, std::size_t ldc);

/// The same with a bfloat16 C, each element its float32 result rounded once (to_bf16). On the
/// pair kernels with beta = 0 and k within one pass (1 to 1024; the LM head's logits and GPT-2's
/// MLP product), each 12 x 32 tile's float32 result is rounded into C from registers (VDPBF16PS's
/// VCVTNE2PS2BF16, a row holding a denormal by the portable rounding) or from L1; otherwise each
/// column panel of C (2048 columns) is computed in a thread-local float32 workspace of m x 2048
/// floats (C widened into it first unless beta = 0) and rounded from there.
void packed_gemm_bf16(Bf16Kernel kernel, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                      std::size_t k, float alpha, const bf16* a, std::size_t lda, const bf16* b,
                      std::size_t ldb, float beta, bf16* c, std::size_t ldc);

}  // namespace mpitron::kernels::cpu
