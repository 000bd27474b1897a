// The differentiable ops of the Llama family: rms_norm, rotary_embedding and swiglu, over the
// kernels of kernels/llama_ops.h.
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "kernels/llama_ops.h"

namespace mpitron::autograd {

using detail::empty_like;
using detail::needs_grad;

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  detail::check_compatible("rms_norm", {x, weight});
  if (weight.ndim() != 1 || x.ndim() < 1 || weight.size(0) != x.size(-1)) {
    throw std::invalid_argument(
        fmt::format("rms_norm: weight {} does not match the last dim of x {}",
                    to_string(weight.shape()), to_string(x.shape())));
  }
  const auto cols = static_cast<std::size_t>(x.size(-1));
  const auto rows = static_cast<std::int64_t>(cols == 0 ? 0 : x.numel() / cols);
  Tensor y = empty_like(x);
  Tensor rstd = empty_like(x, {rows});
  kernels::rms_norm_forward(x.buffer(), weight.buffer(), cols, eps, y.buffer(), rstd.buffer());
  const Tensor kept_x = detail::keep_activation(x);  // bfloat16 under --bf16
  const bool x_grad = needs_grad(x);
  return detail::record(
      "rms_norm", y, {x, weight}, [kept_x, x_grad, weight, rstd, cols](const Tensor& dy) {
        // The kernel widens a bfloat16 kept x element by element: no float32 copy.
        Tensor dx = empty_like(dy), dweight = empty_like(weight);
        kernels::rms_norm_backward(kept_x.buffer(), weight.buffer(), rstd.buffer(), dy.buffer(),
                                   cols, dx.buffer(), dweight.buffer());
        return std::vector<Tensor>{x_grad ? dx : Tensor(), needs_grad(weight) ? dweight : Tensor()};
      });
}

Tensor rotary_embedding(const Tensor& x, const kernels::RopeFrequencies& rope,
                        std::int64_t position_offset) {
  if (x.ndim() != 4 || x.size(1) < 1 || x.size(2) < 1 || x.size(3) < 2 || x.size(3) % 2 != 0) {
    throw std::invalid_argument(fmt::format(
        "rotary_embedding: x {} is not [batch, seq, heads, head_dim] with seq, heads >= 1 and "
        "an even head_dim >= 2",
        to_string(x.shape())));
  }
  const auto seq = static_cast<std::size_t>(x.size(1));
  const auto heads = static_cast<std::size_t>(x.size(2));
  const auto head_dim = static_cast<std::size_t>(x.size(3));
  Tensor y = empty_like(x);
  kernels::rotary_embedding(x.buffer(), seq, heads, head_dim, rope, position_offset, y.buffer());
  return detail::record("rotary_embedding", y, {x},
                        [seq, heads, head_dim, rope, position_offset](const Tensor& dy) {
                          Tensor dx = empty_like(dy);
                          kernels::rotary_embedding_backward(dy.buffer(), seq, heads, head_dim,
                                                             rope, position_offset, dx.buffer());
                          return std::vector<Tensor>{dx};
                        });
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  detail::check_compatible("swiglu", {gate, up});
  check_same_shape("swiglu", gate, up);
  Tensor y = empty_like(gate);
  kernels::swiglu_forward(gate.buffer(), up.buffer(), y.buffer());
  // bfloat16 under --bf16, as the gate and up projections of a bfloat16 run write them.
  const Tensor kept_gate = detail::keep_activation(gate), kept_up = detail::keep_activation(up);
  const bool gate_grad = needs_grad(gate), up_grad = needs_grad(up);
  return detail::record(
      "swiglu", y, {gate, up}, [kept_gate, kept_up, gate_grad, up_grad](const Tensor& dy) {
        // The kernel reads bfloat16 gate and up as they are kept, widening element by element.
        Tensor dgate = empty_like(dy), dup = empty_like(dy);
        kernels::swiglu_backward(kept_gate.buffer(), kept_up.buffer(), dy.buffer(), dgate.buffer(),
                                 dup.buffer());
        return std::vector<Tensor>{gate_grad ? dgate : Tensor(), up_grad ? dup : Tensor()};
      });
}

}  // namespace mpitron::autograd
