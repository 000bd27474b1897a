// The CPU loops between float32 and bfloat16 buffers: the rule of kernels/bf16.h in vectors.
#pragma once

#include <cstddef>

#include "kernels/bf16.h"

namespace mpitron::kernels::cpu {

/// out[i] = to_bf16(in[i]) for i < n on the calling thread: on a CPU with AVX512-BF16 whole
/// vectors of 16 go through VCVTNEPS2BF16 (those holding a denormal, which it would flush, through
/// the integer steps), elsewhere whole vectors of the width the file is compiled for (16 lanes
/// with AVX-512, 8 with AVX2) apply float_to_bf16_bits's integer steps lane-wise; the tail calls
/// it, so every element has the scalar rule's bits.
void round_to_bf16(const float* in, bf16* out, std::size_t n);

/// out[i] = bf16_to_float(in[i]) for i < n on the calling thread, exactly (16-bit shifts in
/// vectors).
void widen_bf16(const bf16* in, float* out, std::size_t n);

/// out[i] = to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i])) for i < n on the calling thread:
/// the float32 sum of two exact widenings, rounded once (to nearest even; NaN, inf, overflow and
/// denormals as bf16.h states), the bits of widen_bf16, a float32 add and round_to_bf16, in one
/// pass without a float32 buffer (VCVTNEPS2BF16 where the CPU has AVX512-BF16). `out` may be `a`
/// or `b`. The reductions of bfloat16 messages (comm/bf16_reduction.h) sum with it.
void add_bf16(const bf16* a, const bf16* b, bf16* out, std::size_t n);

/// out[i] = bf16_to_float(to_bf16(in[i])) for i < n on the calling thread (in may be out):
/// round_to_bf16's lanes widened back in the same pass, without a bfloat16 buffer between.
void round_to_bf16_values(const float* in, float* out, std::size_t n);

struct Bf16Convert {
  /// round_to_bf16 (round to nearest even; NaN, inf, overflow and denormals as bf16.h states) on
  /// cpu_threads() threads in chunks of kElementChunk (parallel.h).
  static void convert_to_bf16(const float* in, bf16* out, std::size_t n);

  /// widen_bf16 (exact) on threads as convert_to_bf16.
  static void convert_to_float(const bf16* in, float* out, std::size_t n);

  /// round_to_bf16_values on threads as convert_to_bf16 (in may be out).
  static void round_through_bf16(const float* in, float* out, std::size_t n);
};

}  // namespace mpitron::kernels::cpu
