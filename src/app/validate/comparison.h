// Comparing parallel results with a dense reference, and the verdict of a check.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "autograd/tensor.h"

namespace mpitron::app {

/// Two tests every compared tensor must pass. Element-wise, torch.allclose semantics:
/// |actual - expected| <= atol + rtol |expected|. Per tensor, scale-aware: the normalised error
/// max|actual - expected| / max|expected| <= max_rel_error (a tensor whose expected values are
/// all exactly zero compares max|actual| instead), so a tensor whose entries all lie below atol
/// cannot pass when it is wrong (e.g. zeroed, or off by a few percent).
struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
  double max_rel_error = 1e-4;
  /// false: the per-tensor test alone (rtol and atol unused). Where each element's error scales
  /// with the tensor's largest values rather than with the element (bfloat16 roundings of the
  /// values summed into it), an element-wise bound could only be set from one tensor's scale.
  bool elementwise = true;
};

/// Accumulates several tensor comparisons of one check on one rank.
class Comparison {
 public:
  explicit Comparison(Tolerance tolerance) : tolerance_(tolerance) {}

  /// Compares element-wise and per tensor (see Tolerance); a shape mismatch or a missing
  /// (undefined) tensor is a failure with infinite errors. NaN never passes.
  void expect_close(const autograd::Tensor& actual, const autograd::Tensor& expected);

  /// Compares host values the same way (equal sizes; otherwise a failure with infinite errors).
  void expect_close(const std::vector<double>& actual, const std::vector<double>& expected);

  /// Compares actual(i) with expected(i), both double, for i < n the same way, without holding
  /// either sequence in memory (the large buffers of the COMM checks).
  template <class Actual, class Expected>
  void expect_close_each(std::size_t n, Actual actual, Expected expected) {
    double tensor_error = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      const double a = actual(i), e = expected(i);
      const double error = std::abs(a - e);
      if (tolerance_.elementwise && !(error <= tolerance_.atol + tolerance_.rtol * std::abs(e)))
        passed_ = false;
      tensor_error = std::isnan(error) ? std::numeric_limits<double>::infinity()
                                       : std::max(tensor_error, error);
      scale = std::max(scale, std::abs(e));
    }
    record(tensor_error, scale);
  }

  /// Folds another comparison's verdict and errors into this one.
  void merge(const Comparison& other);

  bool passed() const { return passed_; }
  /// Largest |actual - expected| over every compared element (0 when nothing was compared).
  double max_abs_error() const { return max_abs_error_; }
  /// Largest normalised error of any compared tensor (0 when nothing was compared).
  double max_rel_error() const { return max_rel_error_; }
  Tolerance tolerance() const { return tolerance_; }

 private:
  void fail();
  // Folds one tensor's largest error and largest |expected| into the verdict.
  void record(double tensor_error, double scale);

  Tolerance tolerance_;
  bool passed_ = true;
  double max_abs_error_ = 0.0;
  double max_rel_error_ = 0.0;
};

/// One check's verdict over all ranks.
struct CheckResult {
  std::string name;
  bool passed = false;
  double max_abs_error = 0.0;  ///< the largest error on any rank
  double max_rel_error = 0.0;  ///< the largest normalised error on any rank
  Tolerance tolerance;
  /// Why the check cannot fail at this topology (e.g. "dp 1": one replica averages with
  /// itself); empty when it is a real test.
  std::string trivial;
};

/// "PASS  <name>  max_abs_error=<e> max_rel_error=<n> (rtol=<r>, atol=<a>, max_rel_error=<m>)",
/// or "(per tensor: max_rel_error=<m>)" for a tolerance that is not element-wise; a trivial pass
/// reads "PASS (dp 1: trivially equal)  <name>  ..." and a failing one "FAIL (dp 1: should be
/// trivially equal)  <name>  ..." (a fault outside that axis).
std::string format_result(const CheckResult& result);

/// {"name", "passed", "trivial", "max_abs_error", "max_rel_error", "rtol", "atol",
/// "max_rel_error_limit", "elementwise"}; rtol and atol are null when elementwise is false.
nlohmann::json to_json(const CheckResult& result);

}  // namespace mpitron::app
