#include "autograd/gradcheck.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"

namespace mpitron::autograd {

namespace {

// L = sum(f(inputs) * direction).
Tensor projected(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                 const std::vector<Tensor>& inputs, Tensor& direction) {
  Tensor y = f(inputs);
  if (!direction.defined()) {
    direction = randn(y.shape(), 0x5eed, 1.0, y.dtype(), y.device());
  }
  return sum(mul(y, direction));
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  std::vector<Tensor> leaves;
  for (const Tensor& input : inputs)
    leaves.push_back(input.clone().set_requires_grad());
  Tensor direction;
  projected(f, leaves, direction).backward();

  GradcheckResult result{true, 0.0, ""};
  double worst_excess = 0.0;
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const std::vector<double> analytic =
        leaves[i].grad().defined()
            ? leaves[i].grad().to_vector()
            : std::vector<double>(static_cast<std::size_t>(leaves[i].numel()));
    std::vector<double> point = inputs[i].to_vector();
    for (std::size_t j = 0; j < point.size(); ++j) {
      auto evaluate = [&](double offset) {
        std::vector<Tensor> shifted = inputs;
        std::vector<double> values = point;
        values[j] += offset;
        shifted[i] =
            Tensor::from_vector(values, inputs[i].shape(), inputs[i].dtype(), inputs[i].device());
        return projected(f, shifted, direction).item();
      };
      const double numeric = (evaluate(eps) - evaluate(-eps)) / (2.0 * eps);
      const double error = std::abs(analytic[j] - numeric);
      // NaN compares false: a NaN gradient or loss must fail and show in max_abs_error.
      if (!(error <= result.max_abs_error)) result.max_abs_error = error;
      const double excess = error - (atol + rtol * std::abs(numeric));
      if (std::isnan(excess) || excess > worst_excess) {
        worst_excess = std::isnan(excess) ? std::numeric_limits<double>::infinity() : excess;
        result.passed = false;
        result.worst =
            fmt::format("input {} element {}: analytic {} numeric {}", i, j, analytic[j], numeric);
      }
    }
  }
  return result;
}

}  // namespace mpitron::autograd
