// The fused scaled dot-product attention op over kernels::attention_forward / _backward.
#include <fmt/format.h>

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
  const auto seq = static_cast<std::size_t>(q.size(-2));
  const auto head_dim = static_cast<std::size_t>(q.size(-1));
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
  Tensor o = empty_like(q);
  Shape lse_shape = q.shape();
  lse_shape.pop_back();
  Tensor lse = empty_like(q, lse_shape);
  kernels::attention_forward(q.buffer(), k.buffer(), v.buffer(), seq, head_dim, causal, s,
                             o.buffer(), lse.buffer());
  const Tensor saved_q = q.detach(), saved_k = k.detach(), saved_v = v.detach();
  const Tensor saved_o = o.detach();
  return detail::record(
      op, o, {q, k, v},
      [saved_q, saved_k, saved_v, saved_o, lse, seq, head_dim, causal, s](const Tensor& dout) {
        Tensor dq = empty_like(saved_q), dk = empty_like(saved_k), dv = empty_like(saved_v);
        kernels::attention_backward(saved_q.buffer(), saved_k.buffer(), saved_v.buffer(),
                                    saved_o.buffer(), lse.buffer(), dout.buffer(), seq, head_dim,
                                    causal, s, dq.buffer(), dk.buffer(), dv.buffer());
        return std::vector<Tensor>{dq, dk, dv};
      });
}

}  // namespace mpitron::autograd
