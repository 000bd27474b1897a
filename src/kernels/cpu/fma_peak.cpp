// The multiply-add peaks of one core, measured: independent vector multiply-adds in registers,
// with enough chains in flight to hide the instruction's latency. The FP32 FMA as wide as the CPU
// kernels were compiled for (see cpu_vector_extensions); the bfloat16 dot product VDPBF16PS where
// the CPU has AVX512-BF16 (compiled by a function-level target attribute, as the bfloat16 GEMM's
// kernel is).
#include <immintrin.h>

#include <chrono>

#include "kernels/build_info.h"
#include "kernels/cpu/packed_gemm_bf16.h"

namespace mpitron::kernels {
namespace {

#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif
// Two FMA units of latency 4 need 8 chains; 12 leave room for wider or deeper pipelines.
constexpr int kChains = 12;
constexpr int kRoundsPerCall = 1 << 16;

using Vector = float __attribute__((vector_size(kLanes * sizeof(float))));

// kRoundsPerCall rounds of kChains independent a = a * m + c; returns a sum so nothing is dropped.
[[gnu::noinline]] float fma_rounds(float seed) {
  Vector acc[kChains];
  for (int i = 0; i < kChains; ++i)
    acc[i] = Vector{} + seed * static_cast<float>(i + 1);
  const Vector m = Vector{} + 0.999999f, c = Vector{} + 1e-6f;
  for (int r = 0; r < kRoundsPerCall; ++r) {
    for (int i = 0; i < kChains; ++i)
      acc[i] = acc[i] * m + c;
  }
  float sum = 0.0f;
  for (int i = 0; i < kChains; ++i) {
    for (int lane = 0; lane < kLanes; ++lane)
      sum += acc[i][lane];
  }
  return sum;
}

// VDPBF16PS chains: 16, since 12 reach about 92 % of the peak on AMD Zen 5 (issue 47: 469
// against 512 GFLOP/s), where the instruction's latency is longer than the FMA's.
constexpr int kDotChains = 16;

// kRoundsPerCall rounds of kDotChains independent acc += a.b over pairs of bfloat16 (16 lanes,
// two products each); returns a sum so nothing is dropped.
__attribute__((target("avx512f,avx512bf16"), noinline)) float dpbf16_rounds(float seed) {
  __m512 acc[kDotChains];
#pragma GCC unroll 16
  for (int i = 0; i < kDotChains; ++i)
    acc[i] = _mm512_set1_ps(seed * static_cast<float>(i + 1));
  // Pairs of bfloat16 1.0 (0x3F80) and 2^-20 (0x3580): each round adds 2^-19 to every lane.
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3F803F80);
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x35803580);
  for (int r = 0; r < kRoundsPerCall; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < kDotChains; ++i)
      acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  alignas(64) float lanes[16];
  float sum = 0.0f;
  for (int i = 0; i < kDotChains; ++i) {
    _mm512_store_ps(lanes, acc[i]);
    for (const float lane : lanes)
      sum += lane;
  }
  return sum;
}

// The best rate in GFLOP/s of repeated calls of rounds(seed), each flops_per_call, for `seconds`
// after one warm-up call (clock ramp, page-in).
template <class Rounds>
double best_gflops(double seconds, double flops_per_call, Rounds rounds) {
  using Clock = std::chrono::steady_clock;
  volatile float sink = rounds(1.0f);
  double best = 0.0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    sink = sink + rounds(static_cast<float>(best) * 1e-9f + 1.0f);
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (elapsed > 0.0 && flops_per_call / elapsed / 1e9 > best)
      best = flops_per_call / elapsed / 1e9;
  }
  return best;
}

}  // namespace

double cpu_fma_peak_gflops(double seconds) {
  return best_gflops(seconds, 2.0 * kLanes * kChains * kRoundsPerCall, fma_rounds);
}

double cpu_bf16_dot_peak_gflops(double seconds) {
  if (!cpu::cpu_has_avx512_bf16()) return 0.0;
  return best_gflops(seconds, 4.0 * 16 * kDotChains * kRoundsPerCall, dpbf16_rounds);
}

}  // namespace mpitron::kernels
