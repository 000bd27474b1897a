// Which float32 lanes of an AVX-512 register VCVTNEPS2BF16 and VCVTNE2PS2BF16 would count as
// zero (Intel SDM vol. 2: denormal inputs are treated as zero), so that their callers can send
// those vectors through the portable rounding instead (kernels/bf16.h keeps denormals).
#pragma once

#include <immintrin.h>

namespace mpitron::kernels::cpu {

/// The lanes of x (16 float32 values) that are denormals: zero exponent, nonzero significand.
__attribute__((target("avx512f"))) inline __mmask16 denormal_lanes(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  return _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7F800000)), u,
                                     _mm512_set1_epi32(0x007FFFFF));
}

}  // namespace mpitron::kernels::cpu
