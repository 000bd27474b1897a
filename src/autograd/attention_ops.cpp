// The fused scaled dot-product attention op over kernels::attention_forward / _backward.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace mpitron::autograd {

using detail::empty_like;

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    std::optional<double> scale) {
  constexpr const char* op = "scaled_dot_product_attention";
  detail::check_compatible(op, {q, k, v});
  check_same_shape(op, q, k);
  check_same_shape(op, q, v);
  if (q.ndim() < 2 || q.size(-1) < 1 || q.size(-2) < 1) {
    throw std::invalid_argument(
        fmt::format("{}: q {} is not [..., seq, head_dim] with seq and head_dim >= 1", op,
                    to_string(q.shape())));
  }
  if (q.dtype() == DType::bf16) {
    throw std::invalid_argument(fmt::format(
        "{}: q, k and v are bfloat16; pass float32 (train --bf16 rounds them here)", op));
  }
  const auto seq = static_cast<std::size_t>(q.size(-2));
  const auto head_dim = static_cast<std::size_t>(q.size(-1));
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
  Tensor o = empty_like(q);
  Shape lse_shape = q.shape();
  lse_shape.pop_back();
  Tensor lse = empty_like(q, lse_shape);
  // Under bfloat16 GEMM operands (train --bf16) attention reads q, k and v as bfloat16, as a
  // bfloat16 run's q, k and v projections write them (the kernel widens them as it reads them),
  // and keeps those copies for backward, and its output rounded to bfloat16 (keep_activation) for
  // backward's D = rowsum(dO * O).
  const std::array<Tensor, 3> inputs = {gemm_operand(q).detach(), gemm_operand(k).detach(),
                                        gemm_operand(v).detach()};
  kernels::attention_forward(inputs[0].buffer(), inputs[1].buffer(), inputs[2].buffer(), seq,
                             head_dim, causal, s, o.buffer(), lse.buffer());
  const std::array<Tensor, 4> kept = {inputs[0], inputs[1], inputs[2], detail::keep_activation(o)};
  return detail::record(
      op, o, {q, k, v}, [kept, lse, seq, head_dim, causal, s](const Tensor& dout) {
        Tensor dq = empty_like(dout), dk = empty_like(dout), dv = empty_like(dout);
        kernels::attention_backward(kept[0].buffer(), kept[1].buffer(), kept[2].buffer(),
                                    kept[3].buffer(), lse.buffer(), dout.buffer(), seq, head_dim,
                                    causal, s, dq.buffer(), dk.buffer(), dv.buffer());
        return std::vector<Tensor>{dq, dk, dv};
      });
}

}  // namespace mpitron::autograd
