// The fused scaled dot-product attention op over kernels::attention_forward / _backward.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace mpitron::autograd {

using detail::empty_like;

std::size_t widened_attention_slices(std::size_t slices, std::size_t slice_elements) {
  const std::size_t per_slice = 3 * slice_elements * sizeof(float);
  return std::max<std::size_t>(1, std::min(slices, kWidenedAttentionBytes / per_slice));
}

namespace {

// Elements [first, first + n) of x's storage, as a view.
kernels::Buffer elements(Tensor x, std::size_t first, std::size_t n) {
  return kernels::Buffer::view(x.buffer(), first, n);
}

// Runs body(first, n, q, k, v) over the `slices` slices of slice_elements each of q, k and v:
// float32 ones in one piece, bfloat16 ones (train --bf16's kept copies) in chunks of
// widened_attention_slices slices widened, exactly, into float32 scratch.
template <class Body>
void for_each_float_slices(const Tensor& q, const Tensor& k, const Tensor& v, std::size_t slices,
                           std::size_t slice_elements, Body body) {
  if (q.dtype() != DType::bf16) {
    body(std::size_t{0}, slices, q.buffer(), k.buffer(), v.buffer());
    return;
  }
  const std::size_t chunk = widened_attention_slices(slices, slice_elements);
  kernels::Buffer scratch(3 * chunk * slice_elements, DType::f32, q.device());
  for (std::size_t first = 0; first < slices; first += chunk) {
    const std::size_t n = std::min(chunk, slices - first), count = n * slice_elements;
    kernels::Buffer widened[3] = {kernels::Buffer::view(scratch, 0, count),
                                  kernels::Buffer::view(scratch, count, count),
                                  kernels::Buffer::view(scratch, 2 * count, count)};
    const Tensor* inputs[3] = {&q, &k, &v};
    for (std::size_t i = 0; i < 3; ++i)
      kernels::convert(elements(*inputs[i], first * slice_elements, count), widened[i]);
    body(first, n, widened[0], widened[1], widened[2]);
  }
}

}  // namespace

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
  const std::size_t slice = seq * head_dim, slices = static_cast<std::size_t>(q.numel()) / slice;
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
  Tensor o = empty_like(q);
  Shape lse_shape = q.shape();
  lse_shape.pop_back();
  Tensor lse = empty_like(q, lse_shape);
  // Under bfloat16 GEMM operands (train --bf16) attention reads q, k and v as bfloat16, as a
  // bfloat16 run's q, k and v projections write them, and keeps those copies for backward.
  const Tensor saved_q = gemm_operand(q).detach(), saved_k = gemm_operand(k).detach(),
               saved_v = gemm_operand(v).detach();
  for_each_float_slices(saved_q, saved_k, saved_v, slices, slice,
                        [&](std::size_t first, std::size_t n, const kernels::Buffer& qf,
                            const kernels::Buffer& kf, const kernels::Buffer& vf) {
                          kernels::Buffer o_slices = elements(o, first * slice, n * slice);
                          kernels::Buffer lse_slices = elements(lse, first * seq, n * seq);
                          kernels::attention_forward(qf, kf, vf, seq, head_dim, causal, s, o_slices,
                                                     lse_slices);
                        });
  const Tensor saved_o = o.detach();
  return detail::record(
      op, o, {q, k, v},
      [saved_q, saved_k, saved_v, saved_o, lse, seq, slice, slices, head_dim, causal,
       s](const Tensor& dout) {
        Tensor dq = empty_like(saved_o), dk = empty_like(saved_o), dv = empty_like(saved_o);
        for_each_float_slices(saved_q, saved_k, saved_v, slices, slice,
                              [&](std::size_t first, std::size_t n, const kernels::Buffer& qf,
                                  const kernels::Buffer& kf, const kernels::Buffer& vf) {
                                const std::size_t at = first * slice, count = n * slice;
                                kernels::Buffer dq_slices = elements(dq, at, count),
                                                dk_slices = elements(dk, at, count),
                                                dv_slices = elements(dv, at, count);
                                kernels::attention_backward(
                                    qf, kf, vf, elements(saved_o, at, count),
                                    elements(lse, first * seq, n * seq), elements(dout, at, count),
                                    seq, head_dim, causal, s, dq_slices, dk_slices, dv_slices);
                              });
        return std::vector<Tensor>{dq, dk, dv};
      });
}

}  // namespace mpitron::autograd
