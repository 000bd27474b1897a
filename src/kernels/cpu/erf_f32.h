// Branch-free float32 erf and exp for the CPU GELU loops, written so the compiler vectorizes them
// (the C library's erff/expf are scalar calls). Absolute error of erf below 2e-7 (about 3 ulp at
// 1; tests/kernels checks it against std::erf in double), which is what GELU needs: it uses
// 1 + erf, whose float32 rounding is 6e-8 anyway.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/math.h"

namespace mpitron::kernels::cpu {

/// e^y for y in [-87, 0] (2^k * e^r with |r| <= ln2 / 2, Taylor degree 7: relative error
/// < 1e-8 before float rounding). Below -87 use 0 instead: the exponent bits would underflow.
inline float exp_f32(float y) {
  constexpr float kLog2e = 1.44269504f, kLn2Hi = 0.693145752f, kLn2Lo = 1.42860677e-6f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to int
  const float k = (y * kLog2e + kRound) - kRound;
  const float r = (y - k * kLn2Hi) - k * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const auto exponent = static_cast<std::int32_t>(k) + 127;
  return p * std::bit_cast<float>(static_cast<std::uint32_t>(exponent) << 23);
}

/// e^x for x <= 0 (softmax-style arguments x - max): exp_f32 in float32 for x in [-87, 0] and 0
/// below (-inf included; e^-87 is already near float32's smallest normal number), the math
/// library's in float64.
struct NonPositiveExp {
  float operator()(float x) const {
    const float e = exp_f32(std::max(x, -87.0f));
    return x < -87.0f ? 0.0f : e;
  }
  double operator()(double x) const { return std::exp(x); }
};

/// erf(x): a P(a^2) for a = |x| < 1, R((a - 2.5) / 1.5) for 1 <= a < 4, and 1 beyond (erfc(4) =
/// 1.5e-8 rounds away in float32), with the sign of x. P and R are least-squares fits on
/// Chebyshev points (tools/fit_erf_f32.py); R is a plain polynomial, so neither piece divides or
/// calls an exponential (an earlier form, 1 - e^{-a^2} Q(1/a), spent most of the GELU's time in
/// its division and exponential: bench_activations, docs/performance.md). NaN stays NaN.
inline float erf_f32(float x) {
  const float a = std::min(std::abs(x), 4.0f);
  const float a2 = a * a;
  float p = 7.9333502149e-05f;
  p = p * a2 - 8.0348048132e-04f;
  p = p * a2 + 5.1912137590e-03f;
  p = p * a2 - 2.6855397052e-02f;
  p = p * a2 + 1.1283625666e-01f;
  p = p * a2 - 3.7612629872e-01f;
  p = p * a2 + 1.1283791666e+00f;
  const float t = (a - 2.5f) * (1.0f / 1.5f);
  float r = -1.1299855464e-03f;
  r = r * t + 1.8515751564e-03f;
  r = r * t + 3.4260103673e-03f;
  r = r * t - 1.0797679466e-02f;
  r = r * t + 7.4837173721e-03f;
  r = r * t + 9.8108081839e-03f;
  r = r * t - 3.2164368643e-02f;
  r = r * t + 4.6322061717e-02f;
  r = r * t - 4.3602187101e-02f;
  r = r * t + 2.8195846556e-02f;
  r = r * t - 1.2255908776e-02f;
  r = r * t + 3.2669689152e-03f;
  r = r * t + 9.9959307936e-01f;
  // Every piece is computed, then selected: a branch-free loop body vectorizes.
  const float small = a * p;
  const float large = a >= 4.0f ? 1.0f : r;  // NaN keeps r's NaN
  const float magnitude = a < 1.0f ? small : large;
  return std::copysign(magnitude, x);
}

/// Exact GELU, 0.5 x (1 + erf(x / sqrt 2)), and its derivative Phi(x) + x phi(x) with
/// phi(x) = exp(-x^2 / 2) / sqrt(2 pi), in float32 through erf_f32 (one erf for both); phi is
/// taken as 0 below e^-87, where it is already under float32's smallest normal number.
inline math::GeluValueGrad<float> gelu_exact_value_and_grad_f32(float x) {
  const float one_plus_erf = 1.0f + erf_f32(x * static_cast<float>(math::kInvSqrt2));
  const float exponent = -0.5f * x * x;
  const float density = exponent < -87.0f ? 0.0f : exp_f32(std::max(exponent, -87.0f));
  return {0.5f * x * one_plus_erf,
          0.5f * one_plus_erf + x * static_cast<float>(math::kInvSqrt2Pi) * density};
}

}  // namespace mpitron::kernels::cpu
