#include "autograd/random.h"

#include <array>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/device.h"

namespace mpitron::autograd {

namespace {

constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ULL;  // SplitMix64's increment

std::uint64_t splitmix64(std::uint64_t x) {
  x += kGamma;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// The top 52 bits of `bits` as a double in (0, 1): (k + 1/2) 2^-52, exact (k + 1/2 needs 53 bits).
double open_unit(std::uint64_t bits) {
  return (static_cast<double>(bits >> 12) + 0.5) * 0x1.0p-52;
}

// The top 53 bits of `bits` as a double in (-1, 1): an odd multiple of 2^-53, exact, so the
// values are symmetric about 0 and never 0 or +-1.
double open_signed_unit(std::uint64_t bits) {
  const auto odd = static_cast<std::int64_t>((bits >> 11) << 1 | 1);  // 1, 3, ..., 2^54 - 1
  return static_cast<double>(odd - (std::int64_t{1} << 53)) * 0x1.0p-53;
}

// The 64-bit draws of one element: a SplitMix64 sequence started from the hash of (key, index),
// so element i's draws depend on (seed, i) only, however many draws other elements took.
class Draws {
 public:
  Draws(std::uint64_t key, std::uint64_t index) : state_(splitmix64(key ^ index)) {}
  std::uint64_t next() {
    const std::uint64_t bits = splitmix64(state_);
    state_ += kGamma;
    return bits;
  }

 private:
  std::uint64_t state_;
};

// Standard normal samples by the ziggurat method (Marsaglia & Tsang, J. Stat. Softw. 5(8), 2000)
// with Doornik's exact wedge test and tail ("An improved ziggurat method", 2005): f(x) =
// exp(-x^2/2) is covered by 256 layers of equal area v, layer i the rectangle [0, x[i]] between
// heights f(x[i]) and f(x[i+1]), layer 0 the base strip whose part beyond r is the tail. Nearly
// 99 % of samples take one draw, a multiply and a compare; the rest a wedge test (two
// exponentials) or the tail (Marsaglia's 1964 method, two logarithms per try).
class Ziggurat {
 public:
  static constexpr std::size_t kLayers = 256;
  static constexpr double kR = 3.6541528853610088;  // x[1], where the tail begins

  Ziggurat() {
    const double v =  // r f(r) + the tail's area: every layer's area
        kR * f(kR) + std::sqrt(std::numbers::pi / 2.0) * std::erfc(kR / std::numbers::sqrt2);
    x_[0] = v / f(kR);
    x_[1] = kR;
    for (std::size_t i = 1; i + 1 < kLayers; ++i)
      x_[i + 1] = std::sqrt(-2.0 * std::log(v / x_[i] + f(x_[i])));
    x_[kLayers] = 0.0;
    for (std::size_t i = 0; i < kLayers; ++i)
      inner_[i] = x_[i + 1] / x_[i];
  }

  double sample(Draws& draws) const {
    for (;;) {
      const std::uint64_t bits = draws.next();
      const double u = open_signed_unit(bits);               // from the top 53 bits
      const auto i = static_cast<std::size_t>(bits & 0xFF);  // the layer, from the low 8
      if (std::abs(u) < inner_[i]) return u * x_[i];         // under the layer above: inside f
      if (i == 0) return tail(draws, u < 0.0);
      const double t = u * x_[i];
      const double f0 = std::exp(-0.5 * (x_[i] * x_[i] - t * t));  // f(x[i]) / f(t)
      const double f1 = std::exp(-0.5 * (x_[i + 1] * x_[i + 1] - t * t));
      if (f1 + open_unit(draws.next()) * (f0 - f1) < 1.0) return t;
    }
  }

 private:
  static double f(double t) { return std::exp(-0.5 * t * t); }

  // A sample of |x| > r with the sign asked for.
  static double tail(Draws& draws, bool negative) {
    double a = 0.0, b = 0.0;
    do {
      a = std::log(open_unit(draws.next())) / kR;
      b = std::log(open_unit(draws.next()));
    } while (-2.0 * b < a * a);
    return negative ? a - kR : kR - a;
  }

  std::array<double, kLayers + 1> x_{};  // x[0] = v / f(r) > x[1] = r > ... > x[256] = 0
  std::array<double, kLayers> inner_{};  // x[i+1] / x[i]
};

// A tensor of `shape` whose element i is sample(i), written straight into a host buffer of the
// dtype (integer dtypes, arange's, through from_vector, which rejects values that are not
// integers).
template <class Sample>
Tensor generate(const Shape& shape, DType dtype, Device device, Sample sample) {
  const auto n = static_cast<std::size_t>(numel_of(shape));
  if (!kernels::is_floating(dtype)) {
    std::vector<double> values(n);
    for (std::size_t i = 0; i < n; ++i)
      values[i] = sample(static_cast<std::uint64_t>(i));
    return Tensor::from_vector(values, shape, dtype, device);
  }
  kernels::Buffer host(n, dtype, Device::cpu);
  kernels::dispatch(dtype, [&]<class T>(T) {
    T* out = host.data_as<T>();
    for (std::size_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(sample(static_cast<std::uint64_t>(i)));
  });
  return Tensor::from_buffer(device == Device::cpu ? std::move(host) : host.to(device), shape);
}

void require_floating(const char* what, DType dtype) {
  if (!kernels::is_floating(dtype)) {
    throw std::invalid_argument(std::string(what) + ": dtype " + kernels::to_string(dtype) +
                                " is not a floating-point dtype (f32 or f64)");
  }
}

}  // namespace

Tensor randn(const Shape& shape, std::uint64_t seed, double std, DType dtype, Device device) {
  require_floating("randn", dtype);
  static const Ziggurat ziggurat;
  const std::uint64_t key = splitmix64(seed);
  return generate(shape, dtype, device, [key, std](std::uint64_t i) {
    Draws draws(key, i);
    return std * ziggurat.sample(draws);
  });
}

Tensor uniform(const Shape& shape, std::uint64_t seed, double low, double high, DType dtype,
               Device device) {
  if (high < low) throw std::invalid_argument("uniform: high < low");
  require_floating("uniform", dtype);
  const std::uint64_t key = splitmix64(seed);
  return generate(shape, dtype, device, [key, low, high](std::uint64_t i) {
    // (k + 1) 2^-53 in (0, 1], so 1 - it lies in [0, 1): high itself is never drawn
    const double unit = (static_cast<double>(splitmix64(key ^ i) >> 11) + 1.0) * 0x1.0p-53;
    return low + (high - low) * (1.0 - unit);
  });
}

Tensor arange(std::int64_t n, DType dtype, Device device) {
  return generate({n}, dtype, device, [](std::uint64_t i) { return static_cast<double>(i); });
}

}  // namespace mpitron::autograd
