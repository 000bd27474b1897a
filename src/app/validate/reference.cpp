#include "app/validate/reference.h"

#include <utility>

namespace mpitron::app {

using autograd::Tensor;
using V = std::vector<double>;

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

void expect_op(const ValidateContext& ctx, OpCase c, std::uint64_t seed, Comparison& out) {
  for (std::vector<double>& input : c.inputs)
    for (double& x : input)
      x = static_cast<float>(x);
  const std::vector<double> expected = c.reference(c.inputs);
  std::vector<double> dy = uniform_values(expected.size(), -1.0, 1.0, seed);
  for (double& g : dy)
    g = static_cast<float>(g);
  const HostValues grads = c.reference_vjp ? c.reference_vjp(c.inputs, dy)
                                           : central_difference_vjp(c.reference, c.inputs, dy);
  for (const autograd::DType dtype : {autograd::DType::f32, autograd::DType::f64}) {
    std::vector<Tensor> tensors;
    for (std::size_t j = 0; j < c.inputs.size(); ++j) {
      Tensor t = Tensor::from_vector(c.inputs[j], c.shapes[j], dtype, ctx.device);
      if (c.differentiable[j]) t.set_requires_grad();
      tensors.push_back(t);
    }
    Comparison mine(dtype == autograd::DType::f64 ? kFloat64Tolerance : ctx.tolerance);
    const Tensor y = c.op(tensors);
    mine.expect_close(y.to_vector(), expected);
    y.backward(Tensor::from_vector(dy, y.shape(), dtype, ctx.device));
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
}

}  // namespace mpitron::app
