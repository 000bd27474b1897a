#include "app/validate/reference.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace mpitron::app {

using autograd::Tensor;
using V = std::vector<double>;

HostValues central_difference_vjp(const HostFunction& f, const HostValues& inputs,
                                  const std::vector<double>& dy) {
  HostValues grads;
  HostValues x = inputs;
  for (std::size_t j = 0; j < x.size(); ++j) {
    grads.emplace_back(x[j].size(), 0.0);
    for (std::size_t i = 0; i < x[j].size(); ++i) {
      const double x0 = x[j][i];
      if (!std::isfinite(x0)) continue;
      const double h = 1e-6 * std::max(1.0, std::abs(x0));
      x[j][i] = x0 + h;
      const std::vector<double> plus = f(x);
      x[j][i] = x0 - h;
      const std::vector<double> minus = f(x);
      x[j][i] = x0;
      double g = 0.0;
      for (std::size_t k = 0; k < dy.size(); ++k)
        g += dy[k] * (plus[k] - minus[k]);
      grads[j][i] = g / (2.0 * h);
    }
  }
  return grads;
}

std::vector<double> uniform_values(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::vector<double> v(n);
  std::uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (double& x : v) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + (hi - lo) * static_cast<double>(state >> 11) * 0x1.0p-53;
  }
  return v;
}

V softmax_rows(const V& x, std::size_t cols) {
  V y(x.size());
  for (std::size_t r = 0; r < x.size() / cols; ++r) {
    double top = -kInfinity, total = 0.0;
    for (std::size_t c = 0; c < cols; ++c)
      top = std::max(top, x[r * cols + c]);
    for (std::size_t c = 0; c < cols; ++c)
      total += y[r * cols + c] = std::exp(x[r * cols + c] - top);
    for (std::size_t c = 0; c < cols; ++c)
      y[r * cols + c] /= total;
  }
  return y;
}

OpCase unary_case(const char* name, autograd::Shape shape, V x,
                  std::function<V(const V&)> reference, std::function<Tensor(const Tensor&)> op) {
  return {name,
          {shape},
          {std::move(x)},
          {true},
          [reference](const HostValues& in) { return reference(in[0]); },
          [op](const std::vector<Tensor>& t) { return op(t[0]); }};
}

OpCase binary_case(const char* name, autograd::Shape sa, V a, autograd::Shape sb, V b,
                   std::function<V(const V&, const V&)> reference,
                   std::function<Tensor(const Tensor&, const Tensor&)> op, bool b_grad) {
  return {name,
          {sa, sb},
          {std::move(a), std::move(b)},
          {true, b_grad},
          [reference](const HostValues& in) { return reference(in[0], in[1]); },
          [op](const std::vector<Tensor>& t) { return op(t[0], t[1]); }};
}

void expect_op(const ValidateContext& ctx, OpCase c, std::uint64_t seed, Comparison& out,
               autograd::DType dtype) {
  std::vector<Tensor> tensors;
  for (std::size_t j = 0; j < c.inputs.size(); ++j) {
    for (double& x : c.inputs[j])
      x = static_cast<float>(x);
    Tensor t = Tensor::from_vector(c.inputs[j], c.shapes[j], dtype, ctx.device);
    if (c.differentiable[j]) t.set_requires_grad();
    tensors.push_back(t);
  }
  Comparison mine(dtype == autograd::DType::f64 ? kFloat64Tolerance : ctx.tolerance);
  const Tensor y = c.op(tensors);
  const std::vector<double> expected = c.reference(c.inputs);
  mine.expect_close(y.to_vector(), expected);
  std::vector<double> dy = uniform_values(expected.size(), -1.0, 1.0, seed);
  for (double& g : dy)
    g = static_cast<float>(g);
  y.backward(Tensor::from_vector(dy, y.shape(), dtype, ctx.device));
  const HostValues grads = central_difference_vjp(c.reference, c.inputs, dy);
  for (std::size_t j = 0; j < tensors.size(); ++j) {
    if (!c.differentiable[j]) continue;
    const Tensor g = tensors[j].grad();
    if (g.defined()) {
      mine.expect_close(g.to_vector(), grads[j]);
    } else {
      mine.expect_close(std::vector<double>{}, grads[j]);
    }
  }
  ctx.log.debug("kernels {} ({}): {} (max_abs_error {:.3e}, max_rel_error {:.3e})", c.name,
                kernels::to_string(dtype), mine.passed() ? "pass" : "FAIL", mine.max_abs_error(),
                mine.max_rel_error());
  out.merge(mine);
}

}  // namespace mpitron::app
