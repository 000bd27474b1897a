// The FP32 FMA peak of one core, measured: independent vector multiply-adds in registers, as
// wide as the CPU kernels were compiled for (see cpu_vector_extensions), with enough chains in
// flight to hide the FMA latency.
#include <chrono>

#include "kernels/build_info.h"

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

}  // namespace

double cpu_fma_peak_gflops(double seconds) {
  using Clock = std::chrono::steady_clock;
  const double flops_per_call = 2.0 * kLanes * kChains * kRoundsPerCall;
  volatile float sink = fma_rounds(1.0f);  // warm up (clock ramp, page-in)
  double best = 0.0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    sink = sink + fma_rounds(static_cast<float>(best) * 1e-9f + 1.0f);
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (elapsed > 0.0 && flops_per_call / elapsed / 1e9 > best)
      best = flops_per_call / elapsed / 1e9;
  }
  return best;
}

}  // namespace mpitron::kernels
