#include "app/checks.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "comm/agreement.h"

namespace mpitron::app {

void Comparison::expect_close(const autograd::Tensor& actual, const autograd::Tensor& expected) {
  if (!actual.defined() || !expected.defined() || actual.shape() != expected.shape()) {
    passed_ = false;
    max_abs_error_ = std::numeric_limits<double>::infinity();
    return;
  }
  const std::vector<double> a = actual.to_vector();
  const std::vector<double> e = expected.to_vector();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double error = std::abs(a[i] - e[i]);
    if (!(error <= tolerance_.atol + tolerance_.rtol * std::abs(e[i]))) passed_ = false;
    if (std::isnan(error)) {
      max_abs_error_ = std::numeric_limits<double>::infinity();
    } else {
      max_abs_error_ = std::max(max_abs_error_, error);
    }
  }
}

CheckResult agree(const comm::Communicator& world, const std::string& name,
                  const Comparison& local) {
  const double passed =
      comm::all_reduce_scalar(world, local.passed() ? 1.0 : 0.0, comm::ReduceOp::min);
  const double error = comm::all_reduce_scalar(world, local.max_abs_error(), comm::ReduceOp::max);
  return {name, passed == 1.0, error, local.tolerance()};
}

std::string format_result(const CheckResult& result) {
  return fmt::format("{}  {}  max_abs_error={:.3e} (rtol={:g}, atol={:g})",
                     result.passed ? "PASS" : "FAIL", result.name, result.max_abs_error,
                     result.tolerance.rtol, result.tolerance.atol);
}

nlohmann::json to_json(const CheckResult& result) {
  return {{"name", result.name},
          {"passed", result.passed},
          {"max_abs_error", result.max_abs_error},
          {"rtol", result.tolerance.rtol},
          {"atol", result.tolerance.atol}};
}

}  // namespace mpitron::app
