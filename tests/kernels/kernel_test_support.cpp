#include "kernel_test_support.h"

#include <random>

namespace mpitron::test {

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

}  // namespace mpitron::test
