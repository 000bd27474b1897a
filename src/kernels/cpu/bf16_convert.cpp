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

// The 16 float32 lanes of x rounded to out[0, 16) with VCVTNEPS2BF16 (Intel SDM vol. 2: NaN
// becomes its upper half made quiet, other values round to nearest even, denormal inputs count as
// zero): a vector with a denormal lane (zero exponent, nonzero significand) takes round_lanes.
__attribute__((target("avx512f,avx512bf16,avx512vl"))) void store_rounded16(__m512 x, bf16* out) {
  if (denormal_lanes(x) == 0) {
    const __m256bh h = _mm512_cvtneps_pbh(x);
    std::memcpy(out, &h, sizeof h);
    return;
  }
  alignas(64) std::uint32_t bits[16];
  _mm512_store_si512(bits, _mm512_castps_si512(x));
  for (std::size_t j = 0; j < 16; j += kLanes) {
    Words w;
    std::memcpy(&w, bits + j, sizeof w);
    const Halves h = round_lanes(w);
    std::memcpy(out + j, &h, sizeof h);
  }
}

// round_to_bf16's whole vectors of 16 lanes from in[0] on, by store_rounded16. Returns how many
// elements it wrote.
__attribute__((target("avx512f,avx512bf16,avx512vl"))) std::size_t round_vectors_vcvtneps2bf16(
    const float* in, bf16* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    store_rounded16(_mm512_loadu_ps(in + i), out + i);
  return i;
}

// The 16 bfloat16 values from in[0] widened exactly to float32 lanes.
__attribute__((target("avx512f,avx512vl"))) __m512 widen16(const bf16* in) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// add_bf16's whole vectors of 16 lanes from element 0 on: widened, added, rounded by
// store_rounded16 without leaving the registers. Returns how many elements it wrote.
__attribute__((target("avx512f,avx512bf16,avx512vl"))) std::size_t add_vectors_vcvtneps2bf16(
    const bf16* a, const bf16* b, bf16* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    store_rounded16(_mm512_add_ps(widen16(a + i), widen16(b + i)), out + i);
  return i;
}

// x truncated to bfloat16 (its upper half): the rounding of the planted fault
// bf16_round_truncates.
bf16 truncated(float x) {
  return bf16{static_cast<std::uint16_t>(float_bits(x) >> 16)};
}

// The float32 bits of the bfloat16 lanes h, exactly.
Words widen_lanes(Halves h) {
  return __builtin_convertvector(h, Words) << 16;
}

}  // namespace

void round_to_bf16(const float* in, bf16* out, std::size_t n) {
  if (fault_active(Fault::bf16_round_truncates)) {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = truncated(in[i]);
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
      out[i] = bf16_to_float(truncated(in[i]));
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
    const Words u = widen_lanes(h);
    std::memcpy(out + i, &u, sizeof u);
  }
  for (; i < n; ++i)
    out[i] = bf16_to_float(in[i]);
}

void add_bf16(const bf16* a, const bf16* b, bf16* out, std::size_t n) {
  if (fault_active(Fault::bf16_round_truncates)) {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = truncated(bf16_to_float(a[i]) + bf16_to_float(b[i]));
    return;
  }
  using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
  std::size_t i = cpu_has_avx512_bf16() ? add_vectors_vcvtneps2bf16(a, b, out, n) : 0;
  for (; i + kLanes <= n; i += kLanes) {
    Halves ha, hb;
    std::memcpy(&ha, a + i, sizeof ha);
    std::memcpy(&hb, b + i, sizeof hb);
    const Floats sum =
        reinterpret_cast<Floats>(widen_lanes(ha)) + reinterpret_cast<Floats>(widen_lanes(hb));
    const Halves h = round_lanes(reinterpret_cast<Words>(sum));
    std::memcpy(out + i, &h, sizeof h);
  }
  for (; i < n; ++i)
    out[i] = to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
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
