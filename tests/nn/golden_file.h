// Reading the PyTorch goldens of tools/make_golden_attention_dp.py ({"<name>": {"shape": [...],
// "data": [...]}}) from tests/data/ as tensors, and the device x dtype parameters of the parity
// tests.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <tuple>

#include "autograd/tensor.h"
#include "kernels/device.h"

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

/// One golden file, opened from MPITRON_TEST_DATA_DIR.
class GoldenFile {
 public:
  explicit GoldenFile(const std::string& name) {
    const std::string path = std::string(MPITRON_TEST_DATA_DIR) + "/" + name;
    std::ifstream stream(path);
    if (!stream) throw std::runtime_error("cannot open golden file " + path);
    json_ = nlohmann::json::parse(stream);
  }

  /// Entry `name` as a tensor of `dtype` on `device`.
  autograd::Tensor tensor(const std::string& name, autograd::DType dtype = autograd::DType::f64,
                          autograd::Device device = autograd::Device::cpu) const {
    const nlohmann::json& entry = json_.at(name);
    return autograd::Tensor::from_vector(entry.at("data").get<std::vector<double>>(),
                                         entry.at("shape").get<autograd::Shape>(), dtype, device);
  }

  /// The single value of a scalar entry.
  double scalar(const std::string& name) const { return tensor(name).item(); }

 private:
  nlohmann::json json_;
};

}  // namespace mpitron::nn
