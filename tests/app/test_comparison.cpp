// validate's Comparison (app/validate/comparison.h): the element-wise and per-tensor tests of
// Tolerance, and expect_close_each, which the large COMM checks use on generated values, against
// the vector form on the same values.
#include "app/validate/comparison.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
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

// A ramp whose largest value is 1000, and the same with an error of 1e-3 on an expected 4.
struct OneSmallError {
  std::vector<double> expected, actual;
};
OneSmallError one_small_error() {
  OneSmallError v{ramp(50, 1.0), {}};
  v.expected[49] = 1000.0;
  v.actual = v.expected;
  v.actual[10] += 1e-3;
  return v;
}

// An error past one element's bound that the per-tensor test alone would let through: 1e-3 on
// an expected 4 (bound 1e-5 + 1e-4 * 4), 1e-6 of the tensor's largest value, 1000.
TEST(Comparison, OneElementPastItsBoundFails) {
  const OneSmallError v = one_small_error();
  Comparison c(kTolerance);
  c.expect_close(v.actual, v.expected);
  EXPECT_FALSE(c.passed());
  EXPECT_LE(c.max_rel_error(), kTolerance.max_rel_error);
}

// A per-tensor tolerance (elementwise false) lets the element past its bound above through, and
// still fails an error past max_rel_error of the tensor's largest value, and NaN.
TEST(Comparison, PerTensorToleranceBoundsOnlyTheTensor) {
  const Tolerance per_tensor{0.0, 0.0, 1e-4, false};
  const auto [expected, one_error] = one_small_error();
  std::vector<double> actual = one_error;
  Comparison small(per_tensor);
  small.expect_close(actual, expected);
  EXPECT_TRUE(small.passed());
  EXPECT_NEAR(small.max_rel_error(), 1e-6, 1e-12);
  actual[10] += 0.2;  // 2.01e-4 of 1000
  Comparison large(per_tensor);
  large.expect_close(actual, expected);
  EXPECT_FALSE(large.passed());
  actual[10] = std::numeric_limits<double>::quiet_NaN();
  Comparison nan(per_tensor);
  nan.expect_close(actual, expected);
  EXPECT_FALSE(nan.passed());
}

TEST(Comparison, APerTensorVerdictNamesOnlyItsBound) {
  CheckResult result{"X", true, 1e-3, 2e-2, Tolerance{0.0, 0.0, 0.1, false}, ""};
  EXPECT_EQ(format_result(result),
            "PASS  X  max_abs_error=1.000e-03 max_rel_error=2.000e-02 (per tensor: "
            "max_rel_error=0.1)");
  const nlohmann::json json = to_json(result);
  EXPECT_TRUE(json["atol"].is_null());
  EXPECT_FALSE(json["elementwise"].get<bool>());
  result.tolerance = kTolerance;
  EXPECT_EQ(to_json(result)["atol"].get<double>(), 1e-5);
  EXPECT_NE(format_result(result).find("(rtol=0.0001, atol=1e-05, max_rel_error=0.0001)"),
            std::string::npos);
  result.trivial = "dp 1";
  EXPECT_EQ(format_result(result).substr(0, 28), "PASS (dp 1: trivially equal)");
  result.passed = false;
  EXPECT_EQ(format_result(result).substr(0, 38), "FAIL (dp 1: should be trivially equal)");
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
