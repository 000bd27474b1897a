// Comparing parallel results with a dense reference, and agreeing on verdicts across ranks.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "autograd/tensor.h"
#include "comm/communicator.h"

namespace mpitron::app {

/// torch.allclose semantics: |actual - expected| <= atol + rtol |expected|, element-wise.
struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
};

/// Accumulates several tensor comparisons of one check on one rank.
class Comparison {
 public:
  explicit Comparison(Tolerance tolerance) : tolerance_(tolerance) {}

  /// Compares element-wise; a shape mismatch or a missing (undefined) tensor is a failure with
  /// an infinite error. NaN never passes.
  void expect_close(const autograd::Tensor& actual, const autograd::Tensor& expected);

  bool passed() const { return passed_; }
  /// Largest |actual - expected| over every compared element (0 when nothing was compared).
  double max_abs_error() const { return max_abs_error_; }
  Tolerance tolerance() const { return tolerance_; }

 private:
  Tolerance tolerance_;
  bool passed_ = true;
  double max_abs_error_ = 0.0;
};

/// One check's verdict over all ranks.
struct CheckResult {
  std::string name;
  bool passed = false;
  double max_abs_error = 0.0;  ///< the largest error on any rank
  Tolerance tolerance;
};

/// Collective over `world`: passed only if `local` passed on every rank (a MIN all-reduce), and
/// the largest error of any rank (a MAX all-reduce).
CheckResult agree(const comm::Communicator& world, const std::string& name,
                  const Comparison& local);

/// "PASS  <name>  max_abs_error=<e> (rtol=<r>, atol=<a>)".
std::string format_result(const CheckResult& result);

/// {"name", "passed", "max_abs_error", "rtol", "atol"}.
nlohmann::json to_json(const CheckResult& result);

}  // namespace mpitron::app
