#include "app/validate/kernel_checks_llama.h"

#include <cmath>
#include <cstdint>

#include "autograd/ops.h"

namespace mpitron::app {

using autograd::Tensor;
using V = std::vector<double>;

namespace {

constexpr double kRmsNormEps = 1e-5;

// x / sqrt(mean(x^2) + eps) * weight over each row of x [rows, cols], weight [cols].
V rms_norm(const V& x, const V& weight) {
  const std::size_t cols = weight.size();
  V y(x.size());
  for (std::size_t r = 0; r < x.size() / cols; ++r) {
    double squares = 0.0;
    for (std::size_t c = 0; c < cols; ++c)
      squares += x[r * cols + c] * x[r * cols + c];
    const double root = std::sqrt(squares / static_cast<double>(cols) + kRmsNormEps);
    for (std::size_t c = 0; c < cols; ++c)
      y[r * cols + c] = x[r * cols + c] / root * weight[c];
  }
  return y;
}

// The rotary embedding of x [batch, seq, heads, head_dim]: element i of each head (i < half)
// and element i + half turned by (offset + s) theta^(-2i / head_dim) at sequence index s.
struct Rotary {
  std::size_t seq, heads, head_dim;
  double theta;
  std::int64_t offset;

  V operator()(const V& x) const {
    const std::size_t half = head_dim / 2;
    V y(x.size());
    for (std::size_t t = 0; t < x.size() / (heads * head_dim); ++t) {
      const double position = static_cast<double>(offset) + static_cast<double>(t % seq);
      for (std::size_t h = 0; h < heads; ++h) {
        for (std::size_t i = 0; i < half; ++i) {
          const double angle = position * std::pow(theta, -2.0 * static_cast<double>(i) / head_dim);
          const std::size_t lo = (t * heads + h) * head_dim + i, hi = lo + half;
          y[lo] = x[lo] * std::cos(angle) - x[hi] * std::sin(angle);
          y[hi] = x[hi] * std::cos(angle) + x[lo] * std::sin(angle);
        }
      }
    }
    return y;
  }
};

}  // namespace

std::vector<OpCase> rms_norm_cases() {
  V x = uniform_values(32, -2.0, 2.0, 80);
  for (const double u : uniform_values(8, -2.0, 2.0, 81))
    x.push_back(100.0 + u);
  for (const double u : uniform_values(8, -2e-3, 2e-3, 82))
    x.push_back(u);
  return {
      {"rms_norm",
       {{2, 3, 8}, {8}},
       {x, uniform_values(8, -1.5, 1.5, 83)},
       {true, true},
       [](const HostValues& in) { return rms_norm(in[0], in[1]); },
       [](const std::vector<Tensor>& t) { return autograd::rms_norm(t[0], t[1], kRmsNormEps); }}};
}

std::vector<OpCase> rotary_cases() {
  std::vector<OpCase> cases;
  for (const Rotary rotary : {Rotary{3, 2, 8, 10000.0, 0}, Rotary{3, 2, 8, 500000.0, 4093}}) {
    cases.push_back(unary_case(
        rotary.offset == 0 ? "rotary_embedding (theta 1e4)"
                           : "rotary_embedding (theta 5e5, from position 4093)",
        {2, 3, 2, 8}, uniform_values(96, -2.0, 2.0, 84 + static_cast<std::uint64_t>(rotary.offset)),
        rotary, [rotary](const Tensor& x) {
          return autograd::rotary_embedding(x, rotary.theta, rotary.offset);
        }));
  }
  return cases;
}

std::vector<OpCase> swiglu_cases() {
  V gate = uniform_values(26, -10.0, 10.0, 85);
  for (const double g : {-90.0, -30.0, 0.0, 30.0, 90.0, 1.5})
    gate.push_back(g);
  return {binary_case(
      "swiglu", {4, 8}, gate, {4, 8}, uniform_values(32, -2.0, 2.0, 86),
      [](const V& g, const V& up) {
        return map_values(
            g, [&](double u, std::size_t i) { return u / (1.0 + std::exp(-u)) * up[i]; });
      },
      autograd::swiglu)};
}

}  // namespace mpitron::app
