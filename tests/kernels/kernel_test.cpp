#include "kernel_test.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace mpitron::kernels::test {

std::string place_name(const ::testing::TestParamInfo<Place>& info) {
  return to_string(info.param.device) + "_" + to_string(info.param.dtype);
}

void PrintTo(const Place& place, std::ostream* os) {
  *os << to_string(place.device) << " " << to_string(place.dtype);
}

void KernelTest::SetUp() {
  if (device() == Device::cuda && !cuda_available()) GTEST_SKIP() << "no CUDA device";
}

double KernelTest::eps() const {
  return dtype() == DType::f64 ? 0x1p-52 : 0x1p-23;
}

std::vector<double> KernelTest::rounded(std::vector<double> values) const {
  if (dtype() == DType::f32) {
    for (double& v : values)
      v = static_cast<float>(v);
  }
  return values;
}

std::vector<double> KernelTest::random(std::size_t n, unsigned seed, double lo, double hi) const {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(n);
  for (double& v : values)
    v = dist(gen);
  return rounded(std::move(values));
}

Buffer KernelTest::make(const std::vector<double>& values) const {
  Buffer host(values.size(), dtype(), Device::cpu);
  if (dtype() == DType::f64) {
    std::copy(values.begin(), values.end(), host.data_as<double>());
  } else {
    std::transform(values.begin(), values.end(), host.data_as<float>(),
                   [](double v) { return static_cast<float>(v); });
  }
  return host.to(device());
}

Buffer KernelTest::make_indices(const std::vector<std::int64_t>& values, DType index_dtype) const {
  Buffer host(values.size(), index_dtype, Device::cpu);
  if (index_dtype == DType::i64) {
    std::copy(values.begin(), values.end(), host.data_as<std::int64_t>());
  } else {
    std::transform(values.begin(), values.end(), host.data_as<std::int32_t>(),
                   [](std::int64_t v) { return static_cast<std::int32_t>(v); });
  }
  return host.to(device());
}

std::vector<double> read(const Buffer& buffer) {
  const Buffer host = buffer.to(Device::cpu);
  if (host.dtype() == DType::f64) {
    const double* data = host.data_as<double>();
    return {data, data + host.numel()};
  }
  const float* data = host.data_as<float>();
  return {data, data + host.numel()};
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  int reported = 0;
  for (std::size_t i = 0; i < got.size() && reported < 5; ++i) {
    const double bound = tol * std::max(1.0, std::abs(want[i]));
    if (!(std::abs(got[i] - want[i]) <= bound)) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i]
                    << " (tolerance " << bound << ")";
      ++reported;
    }
  }
}

}  // namespace mpitron::kernels::test
