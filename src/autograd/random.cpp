#include "autograd/random.h"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <vector>

namespace mpitron::autograd {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A uniform double in (0, 1] for counter `index` of stream `seed`.
double unit(std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t bits = splitmix64(splitmix64(seed) ^ index);
  return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53;
}

template <class Sample>
Tensor generate(const Shape& shape, DType dtype, Device device, Sample sample) {
  std::vector<double> values(static_cast<std::size_t>(numel_of(shape)));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = sample(static_cast<std::uint64_t>(i));
  return Tensor::from_vector(values, shape, dtype, device);
}

}  // namespace

Tensor randn(const Shape& shape, std::uint64_t seed, double std, DType dtype, Device device) {
  return generate(shape, dtype, device, [seed, std](std::uint64_t i) {
    const double radius = std::sqrt(-2.0 * std::log(unit(seed, 2 * i)));
    return std * radius * std::cos(2.0 * std::numbers::pi * unit(seed, 2 * i + 1));
  });
}

Tensor uniform(const Shape& shape, std::uint64_t seed, double low, double high, DType dtype,
               Device device) {
  if (high < low) throw std::invalid_argument("uniform: high < low");
  return generate(shape, dtype, device, [seed, low, high](std::uint64_t i) {
    return low + (high - low) * (1.0 - unit(seed, i));
  });
}

Tensor arange(std::int64_t n, DType dtype, Device device) {
  return generate({n}, dtype, device, [](std::uint64_t i) { return static_cast<double>(i); });
}

}  // namespace mpitron::autograd
