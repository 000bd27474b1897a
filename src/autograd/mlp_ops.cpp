// fused_mlp: gelu(x W1^T + b1) W2^T as one differentiable op that keeps only x and the
// pre-activation for backward (the activation is recomputed there).
#include <fmt/format.h>

#include <stdexcept>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace mpitron::autograd {

using detail::empty_like;
using detail::needs_grad;

Tensor fused_mlp(const Tensor& x, const Tensor& fc1_weight, const Tensor& fc1_bias,
                 const Tensor& fc2_weight, GeluForm form) {
  detail::check_compatible("fused_mlp", {x, fc1_weight, fc1_bias, fc2_weight});
  if (x.ndim() < 1 || fc1_weight.ndim() != 2 || fc2_weight.ndim() != 2 || !fc1_bias.defined() ||
      fc1_bias.ndim() != 1 || x.size(-1) != fc1_weight.size(1) ||
      fc1_bias.size(0) != fc1_weight.size(0) || fc2_weight.size(1) != fc1_weight.size(0)) {
    throw std::invalid_argument(fmt::format(
        "fused_mlp: input {} does not fit fc1 weight {}, fc1 bias {} and fc2 weight {}",
        to_string(x.shape()), to_string(fc1_weight.shape()),
        fc1_bias.defined() ? to_string(fc1_bias.shape()) : "none", to_string(fc2_weight.shape())));
  }
  const auto in = static_cast<std::size_t>(fc1_weight.size(1));
  const auto mid = static_cast<std::size_t>(fc1_weight.size(0));
  const auto out = static_cast<std::size_t>(fc2_weight.size(0));
  const std::size_t rows = detail::extent_product(x.shape(), 0, x.ndim() - 1);
  Shape mid_shape = x.shape(), out_shape = x.shape();
  mid_shape.back() = fc1_weight.size(0);
  out_shape.back() = fc2_weight.size(0);

  Tensor pre = empty_like(x, mid_shape);  // Y = x W1^T + b1, kept for backward
  kernels::gemm(false, true, rows, mid, in, 1.0, x.buffer(), fc1_weight.buffer(), 0.0,
                pre.buffer());
  Tensor z = empty_like(x, out_shape);
  {
    Tensor act = empty_like(x, mid_shape);  // G = gelu(Y), freed when forward returns
    kernels::bias_gelu(pre.buffer(), fc1_bias.buffer(), mid, act.buffer(), form);
    kernels::gemm(false, true, rows, out, mid, 1.0, act.buffer(), fc2_weight.buffer(), 0.0,
                  z.buffer());
  }

  return detail::record(
      "fused_mlp", z, {x, fc1_weight, fc1_bias, fc2_weight},
      [x, fc1_weight, fc1_bias, fc2_weight, pre, form, rows, mid, out](const Tensor& dz) mutable {
        Tensor dw2;
        // One [rows, mid] scratch: first G recomputed from Y, then dG = dz W2, then dY in place.
        Tensor scratch = empty_like(pre);
        if (needs_grad(fc2_weight)) {
          kernels::gelu_forward(pre.buffer(), scratch.buffer(), form);
          dw2 = detail::weight_gradient(dz, scratch, fc2_weight);
        }
        if (!needs_grad(x) && !needs_grad(fc1_weight) && !needs_grad(fc1_bias)) {
          return std::vector<Tensor>{Tensor(), Tensor(), Tensor(), dw2};
        }
        kernels::gemm(false, false, rows, mid, out, 1.0, dz.buffer(), fc2_weight.buffer(), 0.0,
                      scratch.buffer());
        kernels::gelu_backward(pre.buffer(), scratch.buffer(), scratch.buffer(), form);
        // Y is spent: free it before fc1's gradients are allocated (a node runs backward once).
        pre = Tensor();
        std::vector<Tensor> grads = detail::linear_backward(scratch, x, fc1_weight, fc1_bias);
        grads.push_back(dw2);
        return grads;
      });
}

}  // namespace mpitron::autograd
