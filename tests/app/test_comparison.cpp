// validate's Comparison (app/validate/comparison.h): the element-wise and per-tensor tests of
// Tolerance, and expect_close_each, which the large COMM checks use on generated values, against
// the vector form on the same values.
#include "app/validate/comparison.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace mpitron::app {
namespace {

constexpr Tolerance kTolerance{1e-4, 1e-5, 1e-4};

std::vector<double> ramp(std::size_t n, double scale) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<double>(i % 7 + 1);
  return v;
}

TEST(Comparison, WithinTolerancePassesAndReportsTheLargestErrors) {
  const std::vector<double> expected = ramp(50, 1.0);
  std::vector<double> actual = expected;
  actual[3] += 1e-5;  // 1e-5 <= 1e-5 + 1e-4 * 4
  Comparison c(kTolerance);
  c.expect_close(actual, expected);
  EXPECT_TRUE(c.passed());
  EXPECT_NEAR(c.max_abs_error(), 1e-5, 1e-12);
  EXPECT_NEAR(c.max_rel_error(), 1e-5 / 7.0, 1e-12);
}

// An error past one element's bound that the per-tensor test alone would let through: 1e-3 on
// an expected 4 (bound 1e-5 + 1e-4 * 4), 1e-6 of the tensor's largest value, 1000.
TEST(Comparison, OneElementPastItsBoundFails) {
  std::vector<double> expected = ramp(50, 1.0);
  expected[49] = 1000.0;
  std::vector<double> actual = expected;
  actual[10] += 1e-3;
  Comparison c(kTolerance);
  c.expect_close(actual, expected);
  EXPECT_FALSE(c.passed());
  EXPECT_LE(c.max_rel_error(), kTolerance.max_rel_error);
}

// Every element below atol but the whole tensor zeroed: the per-tensor test fails it.
TEST(Comparison, AZeroedTensorOfTinyValuesFails) {
  const std::vector<double> expected = ramp(50, 1e-7);
  Comparison c(kTolerance);
  c.expect_close(std::vector<double>(50, 0.0), expected);
  EXPECT_FALSE(c.passed());
  EXPECT_NEAR(c.max_rel_error(), 1.0, 1e-12);
}

TEST(Comparison, NanAndSizeMismatchFail) {
  const std::vector<double> expected = ramp(5, 1.0);
  std::vector<double> actual = expected;
  actual[2] = std::numeric_limits<double>::quiet_NaN();
  Comparison nan(kTolerance);
  nan.expect_close(actual, expected);
  EXPECT_FALSE(nan.passed());
  EXPECT_TRUE(std::isinf(nan.max_abs_error()));
  Comparison sizes(kTolerance);
  sizes.expect_close(ramp(4, 1.0), expected);
  EXPECT_FALSE(sizes.passed());
}

TEST(Comparison, EachOnGeneratorsMatchesTheVectorForm) {
  for (const double offset : {0.0, 3e-5, 1e-2}) {
    const auto expected = [](std::size_t i) { return 2.0 * static_cast<double>(i % 7 + 1); };
    const auto actual = [&](std::size_t i) { return expected(i) + (i == 999 ? offset : 0.0); };
    std::vector<double> a, e;
    for (std::size_t i = 0; i < 1000; ++i) {
      a.push_back(actual(i));
      e.push_back(expected(i));
    }
    Comparison vectors(kTolerance), each(kTolerance);
    vectors.expect_close(a, e);
    each.expect_close_each(1000, actual, expected);
    EXPECT_EQ(each.passed(), offset < 1e-3) << "offset " << offset;
    EXPECT_EQ(each.passed(), vectors.passed()) << "offset " << offset;
    EXPECT_EQ(each.max_abs_error(), vectors.max_abs_error()) << "offset " << offset;
    EXPECT_EQ(each.max_rel_error(), vectors.max_rel_error()) << "offset " << offset;
  }
}

}  // namespace
}  // namespace mpitron::app
