// The KERNELS checks of the bfloat16 kernels (kernels/bf16.h, kernels::convert,
// kernels::gemm_bf16) on the selected device: the conversion bit for bit against a rounding rule
// computed here in double, the GEMM against a float64 product within a bound derived from
// float32 accumulation.
#pragma once

#include "app/validate/context.h"

namespace mpitron::app {

/// "KERNELS: bfloat16 conversion (ties to even, NaN, inf, overflow, denormals, +-0) matches the
/// rounding rule bit for bit": kernels::convert of float32 values built from edge upper halves
/// (+-0, denormals, the smallest normal, 1, the largest finite 0x7F7F, inf) with the dropped
/// halves 0, 1, 0x7FFF, 0x8000 (a tie), 0x8001 and 0xFFFF, and of NaNs; the expected bits come
/// from the value scaled to an integer significand and rounded by std::nearbyint (ties to even),
/// inf from 2^128 in magnitude on, and for NaN the rule of bf16.h (sign and upper payload kept,
/// quiet bit set). Then kernels::convert back to float32 must give each result's bits << 16.
/// Compared exactly (tolerance 0): the errors printed are in units of the bit patterns.
LocalCheck check_bf16_conversion(const ValidateContext& ctx);

/// "KERNELS: bfloat16 GEMM (float32 and bfloat16 C, accumulate, transposes) within the
/// float32-accumulation bound of float64 reference": kernels::gemm_bf16 of [13, 257] x [257, 33]
/// bfloat16 inputs in [-1, 1] for every transpose, into float32 C (beta 0 and the accumulation
/// C += A B) and into bfloat16 C, against the float64 product of the same bfloat16 values. Each
/// element's error is divided by its bound gamma_r (|alpha| sum |a b| + |beta c|), r = k +
/// ceil(k / 256) + 2, gamma_r = r u / (1 - r u), u = 2^-24 (2^-23 on CUDA, whose tensor cores may
/// round toward zero), plus 2^-8 |exact| for a bfloat16 C (docs/validate.md); the printed errors
/// are these ratios, which must stay at or below 1 (atol 1, rtol 0).
LocalCheck check_bf16_gemm(const ValidateContext& ctx);

}  // namespace mpitron::app
