// float32 <-> bfloat16 in GCC's vector extensions of the width this file is compiled for: the
// integer steps of float_to_bf16_bits (bf16.h) on every lane, so each lane has the scalar rule's
// bits (tests/kernels/test_bf16.cpp checks all 2^32 float32 inputs). Where the CPU has
// AVX512-BF16, VCVTNEPS2BF16 rounds 16 lanes at once by the same rule except that it flushes
// denormal inputs; a vector holding one takes the integer steps instead.
#include "kernels/cpu/bf16_convert.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/denormal_lanes.h"
#include "kernels/cpu/packed_gemm_bf16.h"
#include "kernels/cpu/parallel.h"
#include "kernels/fault_injection.h"

namespace mpitron::kernels::cpu {
namespace {

#if defined(__AVX512F__)
constexpr std::size_t kLanes = 16;
#elif defined(__AVX__)
constexpr std::size_t kLanes = 8;
#else
constexpr std::size_t kLanes = 4;
#endif

using Words = std::uint32_t __attribute__((vector_size(kLanes * sizeof(std::uint32_t))));
using Halves = std::uint16_t __attribute__((vector_size(kLanes * sizeof(std::uint16_t))));

// float_to_bf16_bits on every lane of u (the floats' bits).
Halves round_lanes(Words u) {
  const auto is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const Words quiet_nan = (u >> 16) | 0x0040u;
  const Words rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return __builtin_convertvector(is_nan ? quiet_nan : rounded, Halves);
}

// round_to_bf16's whole vectors of 16 lanes from in[0] on with VCVTNEPS2BF16 (Intel SDM vol. 2:
// NaN becomes its upper half made quiet, other values round to nearest even, denormal inputs
// count as zero): a vector with a denormal lane (zero exponent, nonzero significand) takes
// round_lanes. Returns how many elements it wrote.
__attribute__((target("avx512f,avx512bf16,avx512vl"))) std::size_t round_vectors_vcvtneps2bf16(
    const float* in, bf16* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(in + i);
    if (denormal_lanes(x) == 0) {
      const __m256bh h = _mm512_cvtneps_pbh(x);
      std::memcpy(out + i, &h, sizeof h);
      continue;
    }
    for (std::size_t j = 0; j < 16; j += kLanes) {
      Words w;
      std::memcpy(&w, in + i + j, sizeof w);
      const Halves h = round_lanes(w);
      std::memcpy(out + i + j, &h, sizeof h);
    }
  }
  return i;
}

}  // namespace

void round_to_bf16(const float* in, bf16* out, std::size_t n) {
  if (fault_active(Fault::bf16_round_truncates)) {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = bf16{static_cast<std::uint16_t>(float_bits(in[i]) >> 16)};
    return;
  }
  std::size_t i = cpu_has_avx512_bf16() ? round_vectors_vcvtneps2bf16(in, out, n) : 0;
  for (; i + kLanes <= n; i += kLanes) {
    Words u;
    std::memcpy(&u, in + i, sizeof u);
    const Halves h = round_lanes(u);
    std::memcpy(out + i, &h, sizeof h);
  }
  for (; i < n; ++i)
    out[i] = to_bf16(in[i]);
}

void round_to_bf16_values(const float* in, float* out, std::size_t n) {
  if (fault_active(Fault::bf16_round_truncates)) {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = bits_float(float_bits(in[i]) & 0xFFFF0000u);
    return;
  }
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Words u;
    std::memcpy(&u, in + i, sizeof u);
    const Words rounded = __builtin_convertvector(round_lanes(u), Words) << 16;
    std::memcpy(out + i, &rounded, sizeof rounded);
  }
  for (; i < n; ++i)
    out[i] = bf16_to_float(to_bf16(in[i]));
}

void widen_bf16(const bf16* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Halves h;
    std::memcpy(&h, in + i, sizeof h);
    const Words u = __builtin_convertvector(h, Words) << 16;
    std::memcpy(out + i, &u, sizeof u);
  }
  for (; i < n; ++i)
    out[i] = bf16_to_float(in[i]);
}

void Bf16Convert::convert_to_bf16(const float* in, bf16* out, std::size_t n) {
  parallel_chunks(n, kElementChunk, [&](std::size_t begin, std::size_t end) {
    round_to_bf16(in + begin, out + begin, end - begin);
  });
}

void Bf16Convert::round_through_bf16(const float* in, float* out, std::size_t n) {
  parallel_chunks(n, kElementChunk, [&](std::size_t begin, std::size_t end) {
    round_to_bf16_values(in + begin, out + begin, end - begin);
  });
}

void Bf16Convert::convert_to_float(const bf16* in, float* out, std::size_t n) {
  parallel_chunks(n, kElementChunk, [&](std::size_t begin, std::size_t end) {
    widen_bf16(in + begin, out + begin, end - begin);
  });
}

}  // namespace mpitron::kernels::cpu
