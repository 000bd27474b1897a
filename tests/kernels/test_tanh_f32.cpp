// The vectorizable float32 tanh of the CPU's tanh-form GELU (GPT-2's) against the C library in
// double.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/cpu/tanh_f32.h"

namespace mpitron::kernels::cpu {
namespace {

// 1e-7 absolute is under 2 ulp of float32 at 1 (GELU uses 1 + tanh, whose float32 rounding alone
// is 6e-8); exp_f32's relative 3e-7 on e^{-2a} <= 1 and the division give the rest.
TEST(TanhF32, WithinATenthOfAMillionthOfTanhEverywhere) {
  double worst = 0.0;
  for (int i = -1200000; i <= 1200000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;
    worst = std::max(worst, std::abs(static_cast<double>(tanh_f32(x)) - std::tanh(double{x})));
  }
  EXPECT_LT(worst, 1e-7);
  EXPECT_EQ(tanh_f32(0.0f), 0.0f);
  EXPECT_EQ(tanh_f32(30.0f), 1.0f);
  EXPECT_EQ(tanh_f32(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(tanh_f32(std::numeric_limits<float>::quiet_NaN())));
}

// GELU's tanh form and its derivative against the same formulas in double with std::tanh.
TEST(GeluTanhF32, MatchesTheDoubleFormula) {
  for (int i = -8000; i <= 8000; ++i) {
    const float x = static_cast<float>(i) * 1e-3f;
    const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    const double t = std::tanh(u);
    EXPECT_NEAR(gelu_tanh_value_and_grad_f32(x).value, 0.5 * x * (1.0 + t),
                2e-7 * (1.0 + std::abs(x)))
        << x;
    const double du = std::sqrt(2.0 / M_PI) * (1.0 + 3 * 0.044715 * x * x);
    EXPECT_NEAR(gelu_tanh_value_and_grad_f32(x).grad,
                0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du, 3e-7 * (1.0 + x * x))
        << x;
  }
}

}  // namespace
}  // namespace mpitron::kernels::cpu
