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

std::size_t widened_attention_slices(std::size_t slices, std::size_t slice_elements,
                                     std::size_t tensors) {
  const std::size_t per_slice = tensors * slice_elements * sizeof(float);
  return std::max<std::size_t>(1, std::min(slices, kWidenedAttentionBytes / per_slice));
}

namespace {

// Elements [first, first + n) of x's storage, as a view.
kernels::Buffer elements(Tensor x, std::size_t first, std::size_t n) {
  return kernels::Buffer::view(x.buffer(), first, n);
}

// Runs body(first, n, views) over the `slices` slices of slice_elements each of `tensors` (of one
// dtype), views[i] holding slices [first, first + n) of tensors[i]: float32 ones in one piece,
// bfloat16 ones (train --bf16's kept copies) in chunks of widened_attention_slices slices
// widened, exactly, into float32 scratch.
template <std::size_t kCount, class Body>
void for_each_float_slices(const std::array<Tensor, kCount>& tensors, std::size_t slices,
                           std::size_t slice_elements, Body body) {
  std::array<kernels::Buffer, kCount> views;
  if (tensors[0].dtype() != DType::bf16) {
    for (std::size_t i = 0; i < kCount; ++i)
      views[i] = elements(tensors[i], 0, slices * slice_elements);
    body(std::size_t{0}, slices, views);
    return;
  }
  const std::size_t chunk = widened_attention_slices(slices, slice_elements, kCount);
  kernels::Buffer scratch(kCount * chunk * slice_elements, DType::f32, tensors[0].device());
  for (std::size_t first = 0; first < slices; first += chunk) {
    const std::size_t n = std::min(chunk, slices - first), count = n * slice_elements;
    for (std::size_t i = 0; i < kCount; ++i) {
      views[i] = kernels::Buffer::view(scratch, i * count, count);
      kernels::convert(elements(tensors[i], first * slice_elements, count), views[i]);
    }
    body(first, n, views);
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
  // bfloat16 run's q, k and v projections write them, and keeps those copies for backward, and
  // its output rounded to bfloat16 (keep_activation) for backward's D = rowsum(dO * O).
  const std::array<Tensor, 3> inputs = {gemm_operand(q).detach(), gemm_operand(k).detach(),
                                        gemm_operand(v).detach()};
  for_each_float_slices(
      inputs, slices, slice,
      [&](std::size_t first, std::size_t n, const std::array<kernels::Buffer, 3>& qkv) {
        kernels::Buffer o_slices = elements(o, first * slice, n * slice);
        kernels::Buffer lse_slices = elements(lse, first * seq, n * seq);
        kernels::attention_forward(qkv[0], qkv[1], qkv[2], seq, head_dim, causal, s, o_slices,
                                   lse_slices);
      });
  const std::array<Tensor, 4> kept = {inputs[0], inputs[1], inputs[2], detail::keep_activation(o)};
  return detail::record(
      op, o, {q, k, v}, [kept, lse, seq, slice, slices, head_dim, causal, s](const Tensor& dout) {
        Tensor dq = empty_like(dout), dk = empty_like(dout), dv = empty_like(dout);
        for_each_float_slices(
            kept, slices, slice,
            [&](std::size_t first, std::size_t n, const std::array<kernels::Buffer, 4>& qkvo) {
              const std::size_t at = first * slice, count = n * slice;
              kernels::Buffer dq_slices = elements(dq, at, count),
                              dk_slices = elements(dk, at, count),
                              dv_slices = elements(dv, at, count);
              kernels::attention_backward(qkvo[0], qkvo[1], qkvo[2], qkvo[3],
                                          elements(lse, first * seq, n * seq),
                                          elements(dout, at, count), seq, head_dim, causal, s,
                                          dq_slices, dk_slices, dv_slices);
            });
        return std::vector<Tensor>{dq, dk, dv};
      });
}

}  // namespace mpitron::autograd
