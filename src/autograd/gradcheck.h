// Gradient checking by central finite differences.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace mpitron::autograd {

/// Outcome of `gradcheck`.
struct GradcheckResult {
  bool passed = false;
  /// Largest |analytic - numeric| over every input element.
  double max_abs_error = 0.0;
  /// Where the largest violation of |a - n| <= atol + rtol |n| was, e.g. "input 1 element 7:
  /// analytic 0.25 numeric 0.2501"; empty when passed.
  std::string worst;
};

/// Checks reverse-mode gradients of `f` at `inputs` against central finite differences.
///
/// `f` maps the inputs to a tensor y of any shape. The check projects y onto a fixed random
/// direction r (L = sum(y * r)), so it tests the whole vector-Jacobian product. For every element
/// x_j of every input, numeric dL/dx_j = (L(x_j + eps) - L(x_j - eps)) / (2 eps), whose error is
/// O(eps^2) in exact arithmetic; use float64 inputs (the defaults suit float64: eps 1e-6 gives
/// ~1e-10 rounding error in L / eps). Every input is differentiated (requires_grad is set on
/// copies; the originals are not modified).
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-6,
                          double rtol = 1e-4);

}  // namespace mpitron::autograd
