// Helpers shared by the autograd tests: device-parameterized fixtures that skip CUDA instances
// without a device, a gradcheck assertion with stated tolerances, and seeded float64 inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "kernels/device.h"

namespace mpitron::autograd::test {

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
  const GradcheckResult result = gradcheck(f, inputs, kGradEps, kGradAtol, kGradRtol);
  if (result.passed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << result.worst << " (max abs error " << result.max_abs_error << ")";
}

inline Device device_of(Device device) {
  return device;
}
inline Device device_of(const std::tuple<Device, DType>& param) {
  return std::get<0>(param);
}

inline std::string param_name(Device device) {
  return kernels::to_string(device);
}
inline std::string param_name(const std::tuple<Device, DType>& param) {
  return kernels::to_string(std::get<0>(param)) + "_" + kernels::to_string(std::get<1>(param));
}

/// Base of tests parameterized on the device (alone or with a dtype): CUDA instances call
/// GTEST_SKIP when no CUDA device is present, so one test body serves both devices.
template <class Param>
class DeviceTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (device() == Device::cuda && !kernels::cuda_available()) {
      GTEST_SKIP() << "no CUDA device";
    }
  }
  Device device() const { return device_of(this->GetParam()); }

  /// Standard normal float64 samples times `std` on this test's device.
  Tensor normal(const Shape& shape, std::uint64_t seed, double std = 1.0) const {
    return randn(shape, seed, std, DType::f64, device());
  }
};

/// Test-name suffix for INSTANTIATE_TEST_SUITE_P: "cpu", "cuda_float32", ...
struct ParamName {
  template <class Param>
  std::string operator()(const ::testing::TestParamInfo<Param>& info) const {
    return param_name(info.param);
  }
};

}  // namespace mpitron::autograd::test
