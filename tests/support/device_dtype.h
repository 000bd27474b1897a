// The device x dtype parameters every test folder runs its bodies on, and the fixture that skips
// CUDA instances when no CUDA device is visible.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "kernels/device.h"

namespace mpitron::test {

/// One place a parameterized test runs on.
struct DeviceDtype {
  kernels::Device device = kernels::Device::cpu;
  kernels::DType dtype = kernels::DType::f64;
};

/// Prints e.g. "cpu float32" in failure messages.
void PrintTo(const DeviceDtype& place, std::ostream* out);

/// Test-name suffix, e.g. "cpu_float32".
std::string device_dtype_name(const ::testing::TestParamInfo<DeviceDtype>& info);

/// cpu and cuda, each in float64 and float32, for INSTANTIATE_TEST_SUITE_P.
inline auto all_devices_and_dtypes() {
  return ::testing::Values(DeviceDtype{kernels::Device::cpu, kernels::DType::f64},
                           DeviceDtype{kernels::Device::cpu, kernels::DType::f32},
                           DeviceDtype{kernels::Device::cuda, kernels::DType::f64},
                           DeviceDtype{kernels::Device::cuda, kernels::DType::f32});
}

/// cpu and cuda in float64 only, for tests whose arithmetic must be exact or near it.
inline auto all_devices() {
  return ::testing::Values(DeviceDtype{kernels::Device::cpu, kernels::DType::f64},
                           DeviceDtype{kernels::Device::cuda, kernels::DType::f64});
}

/// True when `device` is cuda and no CUDA device is visible (the test then skips).
bool device_missing(kernels::Device device);

/// Base of tests parameterized on DeviceDtype: CUDA instances call GTEST_SKIP without a device,
/// so one test body serves every place.
class DeviceDtypeTest : public ::testing::TestWithParam<DeviceDtype> {
 protected:
  void SetUp() override;
  kernels::Device device() const { return GetParam().device; }
  kernels::DType dtype() const { return GetParam().dtype; }
};

}  // namespace mpitron::test
