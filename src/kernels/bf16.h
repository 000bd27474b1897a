// bfloat16: the element of DType::bf16 buffers and its conversions to and from float32, written
// once for the CPU loops and the CUDA kernels (GCC 12 has no usable __bf16 arithmetic type).
//
// bfloat16 is the upper half of an IEEE float32: 1 sign bit, 8 exponent bits (float32's range),
// 7 stored significand bits (8 with the implicit bit, so u = 2^-8 is its unit roundoff). Intel,
// "BFLOAT16 - Hardware Numerics Definition", document 338302-001US (2018); Kalamkar et al., "A
// Study of BFLOAT16 for Deep Learning Training", arXiv:1905.12322.
//
// float32 -> bfloat16 (float_to_bf16_bits), the rule every mpitron path follows bit for bit:
// - finite values round to nearest, ties to even (IEEE 754 roundTiesToEven on the 16 dropped
//   bits);
// - overflow by rounding becomes infinity, as IEEE does: every value at or above
//   0x7F7F8000 (the midpoint between the largest finite bfloat16 0x7F7F = 3.3895e38 and 2^128)
//   in magnitude rounds to +-inf, everything below it to at most 0x7F7F;
// - +-inf stay +-inf; +-0 stay +-0 (sign kept);
// - NaN stays NaN: the sign and the upper 6 bits of the payload are kept and the quiet bit is
//   set, so a NaN whose payload lies only in the dropped bits never becomes infinity;
// - denormals are kept: float32 denormals round to bfloat16 denormals (or to zero, or to the
//   smallest normal) by the same rule, with no flush to zero. (The AVX512-BF16 instruction
//   VCVTNEPS2BF16 differs here: it treats float32 denormal inputs as zero (DAZ) and flushes, so
//   mpitron's CPU loops use it only on vectors that hold no denormal and convert the others with
//   the integer rule below in vectors: the same bits as this function.)
// bfloat16 -> float32 (bf16_to_float) is exact: the 16 bits become the upper half of the float.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/math.h"

namespace mpitron::kernels {

/// One bfloat16 value as its 16 bits (see the top of this file). Trivially copyable and exactly
/// 2 bytes, so a DType::bf16 buffer is an array of them; it has no arithmetic: convert to float32
/// (bf16_to_float) to compute.
struct bf16 {
  std::uint16_t bits;
};
static_assert(sizeof(bf16) == 2);

/// The largest finite bfloat16, 0x7F7F = (2 - 2^-7) 2^127 = 3.3895314e38.
inline constexpr std::uint16_t kBf16MaxFiniteBits = 0x7F7F;

/// The bits of a float (a bit cast on host and device).
MPITRON_HOST_DEVICE inline std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

/// The float of 32 bits (the inverse of float_bits).
MPITRON_HOST_DEVICE inline float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/// The bits of x rounded to bfloat16 by the rule at the top of this file: for a non-NaN x, adding
/// 0x7FFF plus the lowest kept bit to the float's bits carries into the kept half exactly when
/// the dropped half is above the midpoint 0x8000, or at it with an odd kept half (ties to even);
/// a carry out of the significand increments the exponent, which is right for every finite
/// value and turns values at or above the last midpoint into 0x7F80 (inf). NaN is caught first.
MPITRON_HOST_DEVICE inline std::uint16_t float_to_bf16_bits(float x) {
  const std::uint32_t u = float_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  const std::uint32_t lowest_kept = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7FFFu + lowest_kept) >> 16);
}

/// x rounded to bfloat16 (float_to_bf16_bits).
MPITRON_HOST_DEVICE inline bf16 to_bf16(float x) {
  return bf16{float_to_bf16_bits(x)};
}

/// The float32 value of a bfloat16, exactly.
MPITRON_HOST_DEVICE inline float bf16_to_float(bf16 x) {
  return bits_float(static_cast<std::uint32_t>(x.bits) << 16);
}

/// An input element in the dtype a kernel computes in: a bfloat16 widened exactly
/// (bf16_to_float), any other value as it is. Lets one loop read float32 or bfloat16 inputs.
MPITRON_HOST_DEVICE inline float widen(bf16 x) {
  return bf16_to_float(x);
}
template <class T>
MPITRON_HOST_DEVICE inline T widen(T x) {
  return x;
}

/// A computed element stored in the dtype a kernel keeps it in, widen's counterpart: rounded
/// once to bfloat16 (to_bf16) when Kept is bf16, as it is otherwise. Lets one loop write a
/// float32 or a bfloat16 copy of what it computes.
template <class Kept, class T>
MPITRON_HOST_DEVICE inline Kept keep_as(T x) {
  if constexpr (std::is_same_v<Kept, bf16>) {
    return to_bf16(x);
  } else {
    return x;
  }
}

}  // namespace mpitron::kernels
