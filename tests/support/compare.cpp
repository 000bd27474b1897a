#include "support/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace mpitron::test {

using kernels::Buffer;
using kernels::Device;
using kernels::DType;

Buffer make_buffer(const std::vector<double>& values, DType dtype, Device device) {
  Buffer host(values.size(), dtype, Device::cpu);
  kernels::dispatch_any(dtype, [&]<class T>(T) {
    std::transform(values.begin(), values.end(), host.data_as<T>(),
                   [](double v) { return static_cast<T>(v); });
  });
  return host.to(device);
}

std::vector<double> host_values(const Buffer& buffer) {
  const Buffer host = buffer.to(Device::cpu);
  std::vector<double> values(host.numel());
  kernels::dispatch_any(host.dtype(), [&]<class T>(T) {
    const T* data = host.data_as<T>();
    std::transform(data, data + host.numel(), values.begin(),
                   [](T v) { return static_cast<double>(v); });
  });
  return values;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  int reported = 0;
  for (std::size_t i = 0; i < got.size() && reported < 5; ++i) {
    const double bound = tolerance * std::max(1.0, std::abs(want[i]));
    if (!(std::abs(got[i] - want[i]) <= bound)) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i]
                    << " (tolerance " << bound << ")";
      ++reported;
    }
  }
}

void expect_close(const autograd::Tensor& got, const autograd::Tensor& want, double tolerance) {
  ASSERT_TRUE(got.defined());
  ASSERT_TRUE(want.defined());
  ASSERT_EQ(got.shape(), want.shape());
  expect_close(got.to_vector(), want.to_vector(), tolerance);
}

}  // namespace mpitron::test
