// The vectorizable float32 erf/exp of the CPU GELU against the C library in double.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/erf_f32.h"

namespace mpitron::kernels::cpu {
namespace {

// 2e-7 absolute is about 3 ulp of float32 at 1 (GELU uses 1 + erf, whose float32 rounding alone
// is 6e-8); the fitted polynomials are good to 5e-8 (tools/fit_erf_f32.py), the rest is float32
// evaluation. Just below and above the pieces' joins at 1 and 4 as well.
TEST(ErfF32, WithinTwoTenthsOfAMillionthOfErfEverywhere) {
  double worst = 0.0;
  for (int i = -600000; i <= 600000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;
    worst = std::max(worst, std::abs(static_cast<double>(erf_f32(x)) - std::erf(double{x})));
  }
  for (const float join : {1.0f, 4.0f}) {
    for (const float x : {std::nextafter(join, 0.0f), join, std::nextafter(join, 5.0f)})
      worst = std::max(worst, std::abs(static_cast<double>(erf_f32(x)) - std::erf(double{x})));
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(erf_f32(0.0f), 0.0f);
  EXPECT_EQ(erf_f32(30.0f), 1.0f);
  EXPECT_EQ(erf_f32(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(erf_f32(std::numeric_limits<float>::quiet_NaN())));
}

// Relative 3e-7 (a few float32 ulp) over the whole range the GELU derivative uses.
TEST(ExpF32, RelativeErrorOverTheUsedRange) {
  double worst = 0.0;
  for (int i = 0; i <= 870000; ++i) {
    const float y = -static_cast<float>(i) * 1e-4f;
    const double exact = std::exp(double{y});
    worst = std::max(worst, std::abs(static_cast<double>(exp_f32(y)) - exact) / exact);
  }
  EXPECT_LT(worst, 3e-7);
}

// The GELU derivative's exponent is clamped, so huge |x| gives Phi(x) exactly and no NaN.
TEST(GeluF32, MatchesTheDoubleFormulaAndStaysFiniteForHugeInputs) {
  for (const float x : {-8.0f, -3.0f, -0.5f, 0.0f, 0.5f, 3.0f, 8.0f}) {
    const double phi = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
    EXPECT_NEAR(gelu_exact_value_and_grad_f32(x).value, x * phi, 2e-7 * (1.0 + std::abs(x)));
    const double grad = phi + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    EXPECT_NEAR(gelu_exact_value_and_grad_f32(x).grad, grad, 3e-7 * (1.0 + std::abs(x)));
  }
  EXPECT_EQ(gelu_exact_value_and_grad_f32(1e20f).grad, 1.0f);
  EXPECT_EQ(gelu_exact_value_and_grad_f32(-1e20f).grad, 0.0f);
}

}  // namespace
}  // namespace mpitron::kernels::cpu
