// Helpers shared by the autograd tests: a gradcheck assertion with stated tolerances, and the
// device-parameterized fixture with seeded float64 inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "kernels/device.h"
#include "support/device_dtype.h"

namespace mpitron::test {

using autograd::Shape;
using autograd::Tensor;
using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

// Gradcheck tolerances for float64 inputs of magnitude O(1). Central differences with step h err
// by h^2/6 |f'''| (truncation, ~1e-13 here) plus about u |L| / h from rounding the two
// evaluations of L = sum(y * r) (u = 1.1e-16, |L| <= ~100 for our sizes: <= ~1e-8). The analytic
// side is exact to ~1e-14. atol 1e-6 + rtol 1e-5 therefore leaves a margin of >= 100x, while a
// wrong rule (missing term, wrong transpose, a factor 2) errs by the size of the gradient, O(1).
inline constexpr double kGradEps = 1e-6;
inline constexpr double kGradAtol = 1e-6;
inline constexpr double kGradRtol = 1e-5;

/// gradcheck(f, inputs) with the tolerances above, as a gtest assertion that prints the worst
/// element on failure.
inline ::testing::AssertionResult gradcheck_passes(const Fn& f, const Inputs& inputs) {
  const autograd::GradcheckResult result =
      autograd::gradcheck(f, inputs, kGradEps, kGradAtol, kGradRtol);
  if (result.passed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << result.worst << " (max abs error " << result.max_abs_error << ")";
}

/// Base of the autograd tests parameterized on tests/support's DeviceDtype (CUDA instances skip
/// without a device), with seeded float64 inputs on the device under test.
class AutogradTest : public DeviceDtypeTest {
 protected:
  /// Standard normal float64 samples times `std` on this test's device.
  Tensor normal(const Shape& shape, std::uint64_t seed, double std = 1.0) const {
    return autograd::randn(shape, seed, std, autograd::DType::f64, device());
  }
};

}  // namespace mpitron::test
