// The device x dtype parameters of the nn parity tests, and the shared golden-file reader
// (tests/support) for the goldens of tools/make_golden_attention_dp.py.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "autograd/tensor.h"
#include "kernels/device.h"
#include "support/golden_file.h"

namespace mpitron::nn {

/// A device and dtype a parity test runs on; CUDA instances skip without a device.
using DeviceDtype = std::tuple<autograd::Device, autograd::DType>;

/// cpu and cuda, each in f64 and f32.
inline auto all_devices_and_dtypes() {
  return ::testing::Combine(::testing::Values(autograd::Device::cpu, autograd::Device::cuda),
                            ::testing::Values(autograd::DType::f64, autograd::DType::f32));
}

/// "cpu_f64" etc.
inline std::string device_dtype_name(const ::testing::TestParamInfo<DeviceDtype>& info) {
  return kernels::to_string(std::get<0>(info.param)) + "_" +
         kernels::to_string(std::get<1>(info.param));
}

/// Base of parity tests parameterized on DeviceDtype: skips CUDA instances without a device.
class DeviceDtypeTest : public ::testing::TestWithParam<DeviceDtype> {
 protected:
  void SetUp() override {
    if (device() == autograd::Device::cuda && !kernels::cuda_available()) {
      GTEST_SKIP() << "no CUDA device";
    }
  }
  autograd::Device device() const { return std::get<0>(GetParam()); }
  autograd::DType dtype() const { return std::get<1>(GetParam()); }
};

using test::GoldenFile;

}  // namespace mpitron::nn
