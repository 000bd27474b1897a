#include "app/validate/comparison.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace mpitron::app {

void Comparison::fail() {
  passed_ = false;
  max_abs_error_ = std::numeric_limits<double>::infinity();
  max_rel_error_ = std::numeric_limits<double>::infinity();
}

void Comparison::expect_close(const autograd::Tensor& actual, const autograd::Tensor& expected) {
  if (!actual.defined() || !expected.defined() || actual.shape() != expected.shape()) {
    fail();
    return;
  }
  expect_close(actual.to_vector(), expected.to_vector());
}

void Comparison::expect_close(const std::vector<double>& a, const std::vector<double>& e) {
  if (a.size() != e.size()) {
    fail();
    return;
  }
  expect_close_each(
      a.size(), [&](std::size_t i) { return a[i]; }, [&](std::size_t i) { return e[i]; });
}

void Comparison::record(double tensor_error, double scale) {
  const double normalised = scale > 0.0 ? tensor_error / scale : tensor_error;
  if (!(normalised <= tolerance_.max_rel_error)) passed_ = false;
  max_abs_error_ = std::max(max_abs_error_, tensor_error);
  max_rel_error_ = std::max(max_rel_error_, normalised);
}

void Comparison::merge(const Comparison& other) {
  passed_ = passed_ && other.passed_;
  max_abs_error_ = std::max(max_abs_error_, other.max_abs_error_);
  max_rel_error_ = std::max(max_rel_error_, other.max_rel_error_);
}

std::string format_result(const CheckResult& result) {
  const char* word = result.passed ? "PASS" : "FAIL";
  const std::string verdict =
      result.trivial.empty()
          ? word
          : fmt::format("{} ({}: {})", word, result.trivial,
                        result.passed ? "trivially equal" : "should be trivially equal");
  const Tolerance& t = result.tolerance;
  const std::string bound =
      t.elementwise
          ? fmt::format("rtol={:g}, atol={:g}, max_rel_error={:g}", t.rtol, t.atol, t.max_rel_error)
          : fmt::format("per tensor: max_rel_error={:g}", t.max_rel_error);
  return fmt::format("{}  {}  max_abs_error={:.3e} max_rel_error={:.3e} ({})", verdict, result.name,
                     result.max_abs_error, result.max_rel_error, bound);
}

nlohmann::json to_json(const CheckResult& result) {
  const Tolerance& t = result.tolerance;
  return {{"name", result.name},
          {"passed", result.passed},
          {"trivial", !result.trivial.empty()},
          {"max_abs_error", result.max_abs_error},
          {"max_rel_error", result.max_rel_error},
          {"rtol", t.elementwise ? nlohmann::json(t.rtol) : nlohmann::json()},
          {"atol", t.elementwise ? nlohmann::json(t.atol) : nlohmann::json()},
          {"max_rel_error_limit", t.max_rel_error},
          {"elementwise", t.elementwise}};
}

}  // namespace mpitron::app
