// fused_mlp: gelu(x W1^T + b1) W2^T as one differentiable op that keeps only x (as its GEMM
// operand, autograd::gemm_operand) and the pre-activation for backward (the activation is
// recomputed there); under bfloat16 operands the pre-activation is the product rounded to
// bfloat16, kept at 2 bytes an element.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "autograd/weight_operands.h"

namespace mpitron::autograd {

using detail::empty_like;
using detail::needs_grad;

namespace {

// Rows [first, first + n) of t viewed as [n, cols] (t is [rows, cols] in row-major order).
Tensor rows_of(const Tensor& t, std::size_t first, std::size_t n, std::size_t cols) {
  return t.flat_view(static_cast<std::int64_t>(first * cols),
                     {static_cast<std::int64_t>(n), static_cast<std::int64_t>(cols)});
}

// The rows of a [chunk, mid] scratch of `like`'s dtype that fit kFusedMlpScratchBytes (at least
// one, at most rows).
std::size_t chunk_rows(const Tensor& like, std::size_t rows, std::size_t mid) {
  const std::size_t element = kernels::dtype_size(like.dtype());
  return std::clamp<std::size_t>(kFusedMlpScratchBytes / (mid * element), 1, rows);
}

// Visits the rows of a [rows, mid] activation in chunks that fit one [chunk, mid] scratch of at
// most kFusedMlpScratchBytes (at least one row): body(first, n, scratch rows [n, mid]).
template <class Body>
void for_each_row_chunk(const Tensor& like, std::size_t rows, std::size_t mid, Body body) {
  const std::size_t chunk = chunk_rows(like, rows, mid);
  const Tensor scratch =
      empty_like(like, {static_cast<std::int64_t>(chunk), static_cast<std::int64_t>(mid)});
  for (std::size_t first = 0; first < rows; first += chunk) {
    const std::size_t n = std::min(chunk, rows - first);
    Tensor s = rows_of(scratch, 0, n, mid);
    body(first, n, s);
  }
}

// fc2's backward and GELU's, chunk by chunk. When fc1 needs gradients, dG = dz W2 goes into the
// float32 scratch. A float32 pre Y: one pass turns the scratch into G = gelu(Y) and Y's own rows
// into dY = dG * gelu'(Y) (Y is spent after this: a node runs backward once); a bfloat16 pre
// (fc1's product x W1^T, rounded, under bfloat16 operands): one pass of
// kernels::bias_gelu_backward_bf16 turns the scratch into dY and writes G as bfloat16, db1 (when
// fc1's bias needs one) sums the float32 dY, and dY rounded to bfloat16 (the bits fc1's GEMMs
// round it to) overwrites pre's rows. Without fc1's gradients G alone is recomputed. Then
// dW2 += dz^T G. Returns dW2 when fc2_weight needs one and has no gradient yet (otherwise the
// GEMMs accumulate into its gradient, or there is none).
Tensor mlp_backward_in_chunks(const Tensor& pre, const Tensor& dz, const Tensor& fc1_bias,
                              const Tensor& fc2_weight, GeluForm form, std::size_t rows,
                              std::size_t mid, std::size_t out, bool fc1_grads, Tensor& db1) {
  const bool fc2_grads = needs_grad(fc2_weight);
  const bool bf16_pre = pre.dtype() == DType::bf16;
  const Tensor g16 = bf16_pre ? Tensor::empty({static_cast<std::int64_t>(chunk_rows(dz, rows, mid)),
                                               static_cast<std::int64_t>(mid)},
                                              DType::bf16, dz.device())
                              : Tensor();
  const bool bias_grads = bf16_pre && fc1_grads && needs_grad(fc1_bias);
  Tensor chunk_db = bias_grads ? empty_like(dz, {static_cast<std::int64_t>(mid)}) : Tensor();
  if (bias_grads) db1 = Tensor::zeros({static_cast<std::int64_t>(mid)}, dz.dtype(), dz.device());
  // Rounded once for all chunks' GEMMs (the bits each would round them to).
  const Tensor dz_operand = gemm_operand(dz);
  const Tensor w2_operand = fc1_grads ? weight_operand(fc2_weight) : Tensor();
  Tensor dw2;
  for_each_row_chunk(dz, rows, mid, [&](std::size_t first, std::size_t n, Tensor& s) {
    Tensor y = rows_of(pre, first, n, mid);
    Tensor dz_rows = rows_of(dz_operand, first, n, out);
    Tensor g = bf16_pre ? rows_of(g16, 0, n, mid) : s;  // G, what dW2 multiplies
    if (fc1_grads) {
      kernels::gemm(false, false, n, mid, out, 1.0, dz_rows.buffer(), w2_operand.buffer(), 0.0,
                    s.buffer());
      if (bf16_pre) {
        kernels::bias_gelu_backward_bf16(y.buffer(), fc1_bias.buffer(), mid, s.buffer(), g.buffer(),
                                         form);
        if (bias_grads) {
          kernels::sum_rows(s.buffer(), mid, chunk_db.buffer());
          kernels::axpy(1.0, chunk_db.buffer(), db1.buffer());
        }
        kernels::convert(s.buffer(), y.buffer());
      } else if (fc2_grads) {
        kernels::gelu_forward_backward(y.buffer(), s.buffer(), s.buffer(), y.buffer(), form);
      } else {
        kernels::gelu_backward(y.buffer(), s.buffer(), y.buffer(), form);
      }
    } else if (fc2_grads) {
      if (bf16_pre) {
        kernels::bias_gelu_bf16(y.buffer(), fc1_bias.buffer(), mid, g.buffer(), form);
      } else {
        kernels::gelu_forward(y.buffer(), s.buffer(), form);
      }
    }
    if (!fc2_grads) return;
    if (dw2.defined()) {
      kernels::gemm(true, false, out, mid, n, 1.0, dz_rows.buffer(), g.buffer(), 1.0, dw2.buffer());
    } else {
      dw2 = detail::weight_gradient(dz_rows, g, fc2_weight);
    }
  });
  return dw2;
}

}  // namespace

Tensor fused_mlp(const Tensor& x, const Tensor& fc1_weight, const Tensor& fc1_bias,
                 const Tensor& fc2_weight, GeluForm form, bool bf16_output) {
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

  const detail::SavedGemmInput saved_x = detail::save_gemm_input(x, gemm_operand(x));
  // Kept for backward: Y = x W1^T + b1, or under bfloat16 operands (a float32 x) the product
  // x W1^T as bfloat16, rounded once, as a bfloat16 run's fc1 writes it before its bias.
  const bool bf16_pre = saved_x.operand.dtype() == DType::bf16 && x.dtype() == DType::f32;
  if (bf16_output && !bf16_pre) {
    throw std::invalid_argument(
        "fused_mlp: a bfloat16 output needs bfloat16 GEMM operands and a float32 input");
  }
  Tensor pre = Tensor::empty(mid_shape, bf16_pre ? DType::bf16 : x.dtype(), x.device());
  if (bf16_pre) {
    detail::bf16_product(saved_x.operand, fc1_weight, pre);
  } else {
    kernels::gemm(false, true, rows, mid, in, 1.0, saved_x.operand.buffer(),
                  weight_operand(fc1_weight).buffer(), 0.0, pre.buffer());
  }
  // z = gelu(Y) W2^T chunk by chunk: G never exists for more rows than the scratch holds. A
  // bfloat16 pre gives a bfloat16 G in one pass (kernels::bias_gelu_bf16: the bits of widening,
  // the bias, GELU and the rounding fc2's GEMM would do).
  Tensor z =
      bf16_output ? Tensor::empty(out_shape, DType::bf16, x.device()) : empty_like(x, out_shape);
  const Tensor w2_operand = weight_operand(fc2_weight);
  for_each_row_chunk(pre, rows, mid, [&](std::size_t first, std::size_t n, Tensor& g) {
    Tensor z_rows = rows_of(z, first, n, out);
    Tensor y = rows_of(pre, first, n, mid);
    if (bf16_pre) {
      kernels::bias_gelu_bf16(y.buffer(), fc1_bias.buffer(), mid, g.buffer(), form);
    } else {
      kernels::bias_gelu(y.buffer(), fc1_bias.buffer(), mid, g.buffer(), form);
    }
    if (bf16_output) {
      kernels::gemm_bf16(false, true, n, out, mid, 1.0, g.buffer(), w2_operand.buffer(), 0.0,
                         z_rows.buffer());
    } else {
      kernels::gemm(false, true, n, out, mid, 1.0, g.buffer(), w2_operand.buffer(), 0.0,
                    z_rows.buffer());
    }
  });

  return detail::record(
      "fused_mlp", z, {x, fc1_weight, fc1_bias, fc2_weight},
      [saved_x, fc1_weight, fc1_bias, fc2_weight, pre, form, rows, mid,
       out](const Tensor& dz) mutable {
        const bool fc1_grads = saved_x.needs_grad || needs_grad(fc1_weight) || needs_grad(fc1_bias);
        Tensor db1;  // a bfloat16 pre's bias gradient, summed from float32 dY chunk by chunk
        Tensor dw2 = mlp_backward_in_chunks(pre, dz, fc1_bias, fc2_weight, form, rows, mid, out,
                                            fc1_grads, db1);
        if (!fc1_grads) return std::vector<Tensor>{Tensor(), Tensor(), Tensor(), dw2};
        const bool bf16 = pre.dtype() == DType::bf16;
        std::vector<Tensor> grads =
            detail::linear_backward(pre, saved_x, fc1_weight, bf16 ? Tensor() : fc1_bias);
        if (bf16) grads[2] = db1;
        grads.push_back(dw2);
        return grads;
      });
}

}  // namespace mpitron::autograd
