// linear and matmul: the GEMM-backed differentiable ops.
#include <fmt/format.h>

#include <stdexcept>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "autograd/weight_operands.h"

namespace mpitron::autograd {

using detail::empty_like;
using detail::needs_grad;

Tensor gemm_operand(const Tensor& x) {
  if (!detail::keeps_bf16(x)) return x;
  Tensor copy = Tensor::empty(x.shape(), DType::bf16, x.device());
  kernels::convert(x.buffer(), copy.buffer());
  return copy;
}

detail::SavedGemmInput detail::save_gemm_input(const Tensor& x, const Tensor& operand) {
  return {operand, x.dtype(), x.requires_grad()};
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& x_operand) {
  detail::check_compatible("linear", {x, weight, bias});
  if (weight.ndim() != 2 || x.ndim() < 1 || x.size(-1) != weight.size(1) ||
      (bias.defined() && (bias.ndim() != 1 || bias.size(0) != weight.size(0)))) {
    throw std::invalid_argument(fmt::format("linear: input {} does not fit weight {} and bias {}",
                                            to_string(x.shape()), to_string(weight.shape()),
                                            bias.defined() ? to_string(bias.shape()) : "none"));
  }
  if (x_operand.defined() &&
      (x_operand.shape() != x.shape() || x_operand.device() != x.device() ||
       (x_operand.dtype() != x.dtype() && x_operand.dtype() != DType::bf16))) {
    throw std::invalid_argument(
        fmt::format("linear: x_operand {} {} on {} is not input {} {} on {} or its bfloat16 copy",
                    to_string(x_operand.shape()), kernels::to_string(x_operand.dtype()),
                    kernels::to_string(x_operand.device()), to_string(x.shape()),
                    kernels::to_string(x.dtype()), kernels::to_string(x.device())));
  }
  const auto in = static_cast<std::size_t>(weight.size(1));
  const auto out = static_cast<std::size_t>(weight.size(0));
  const auto rows = static_cast<std::size_t>(x.numel()) / in;
  Shape y_shape = x.shape();
  y_shape.back() = weight.size(0);
  Tensor y = empty_like(x, y_shape);
  const detail::SavedGemmInput saved =
      detail::save_gemm_input(x, x_operand.defined() ? x_operand : gemm_operand(x));
  kernels::gemm(false, true, rows, out, in, 1.0, saved.operand.buffer(),
                weight_operand(weight).buffer(), 0.0, y.buffer());
  if (bias.defined()) kernels::bias_add(y.buffer(), bias.buffer(), out, y.buffer());

  return detail::record("linear", y, {x, weight, bias}, [saved, weight, bias](const Tensor& dy) {
    return detail::linear_backward(dy, saved, weight, bias);
  });
}

Tensor linear_bf16_output(const Tensor& x, const Tensor& weight) {
  detail::check_compatible("linear_bf16_output", {x, weight});
  if (x.dtype() != DType::f32 || weight.ndim() != 2 || x.ndim() < 1 ||
      x.size(-1) != weight.size(1)) {
    throw std::invalid_argument(fmt::format(
        "linear_bf16_output: input {} {} does not fit weight {} (float32 x W^T)",
        to_string(x.shape()), kernels::to_string(x.dtype()), to_string(weight.shape())));
  }
  Shape y_shape = x.shape();
  y_shape.back() = weight.size(0);
  Tensor x_operand = Tensor::empty(x.shape(), DType::bf16, x.device());
  kernels::convert(x.buffer(), x_operand.buffer());
  Tensor y = Tensor::empty(y_shape, DType::bf16, x.device());
  detail::bf16_product(x_operand, weight, y);
  const detail::SavedGemmInput saved = detail::save_gemm_input(x, x_operand);
  return detail::record("linear_bf16_output", y, {x, weight}, [saved, weight](const Tensor& dy) {
    std::vector<Tensor> grads = detail::linear_backward(dy, saved, weight, Tensor());
    grads.pop_back();  // no bias
    return grads;
  });
}

void detail::bf16_product(const Tensor& x_operand, const Tensor& weight, Tensor& y) {
  const auto in = static_cast<std::size_t>(weight.size(1));
  const auto out = static_cast<std::size_t>(weight.size(0));
  Tensor w_operand = weight_operand(weight);
  if (w_operand.dtype() != DType::bf16) {
    w_operand = Tensor::empty(weight.shape(), DType::bf16, weight.device());
    kernels::convert(weight.buffer(), w_operand.buffer());
  }
  kernels::gemm_bf16(false, true, static_cast<std::size_t>(x_operand.numel()) / in, out, in, 1.0,
                     x_operand.buffer(), w_operand.buffer(), 0.0, y.buffer());
}

Tensor detail::weight_gradient(const Tensor& dy, const Tensor& x, const Tensor& weight) {
  const auto in = static_cast<std::size_t>(weight.size(1));
  const auto out = static_cast<std::size_t>(weight.size(0));
  const auto rows = static_cast<std::size_t>(dy.numel()) / out;
  // Gradient accumulation fusion (as Megatron-LM's): a leaf weight that already has a gradient
  // (e.g. a view of the data-parallel buffer) takes dy^T x straight from the GEMM with beta = 1,
  // without an [out, in] temporary.
  Tensor existing = detail::existing_leaf_grad(weight);
  if (existing.defined()) {
    kernels::gemm(true, false, out, in, rows, 1.0, dy.buffer(), x.buffer(), 1.0, existing.buffer());
    return Tensor();
  }
  Tensor dw = empty_like(weight);
  kernels::gemm(true, false, out, in, rows, 1.0, dy.buffer(), x.buffer(), 0.0, dw.buffer());
  return dw;
}

std::vector<Tensor> detail::linear_backward(const Tensor& dy, const SavedGemmInput& x,
                                            const Tensor& weight, const Tensor& bias) {
  const auto in = static_cast<std::size_t>(weight.size(1));
  const auto out = static_cast<std::size_t>(weight.size(0));
  const Tensor& x_operand = x.operand;
  const std::size_t rows = detail::extent_product(x_operand.shape(), 0, x_operand.ndim() - 1);
  // Both GEMMs multiply dy; under bfloat16 operands it is rounded once for the two (the bits
  // each GEMM would round it to), and the bias gradient sums the float32 dy.
  const Tensor dy_operand = needs_grad(weight) && x.needs_grad ? gemm_operand(dy) : dy;
  Tensor dx, dw, db;
  if (x.needs_grad) {
    dx = Tensor::empty(x_operand.shape(), x.dtype, x_operand.device());
    kernels::gemm(false, false, rows, in, out, 1.0, dy_operand.buffer(),
                  weight_operand(weight).buffer(), 0.0, dx.buffer());
  }
  if (needs_grad(weight)) dw = weight_gradient(dy_operand, x_operand, weight);
  if (needs_grad(bias)) {
    db = empty_like(bias);
    kernels::sum_rows(dy.buffer(), out, db.buffer());
  }
  return {dx, dw, db};
}

namespace {

// Sizes of one batched product op(A) op(B) = C.
struct MatmulDims {
  std::size_t batch, m, n, k;
  bool shared_b;  // b is 2-D and reused by every batch entry
};

MatmulDims matmul_dims(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const auto fail = [&] {
    return std::invalid_argument(fmt::format("matmul: shapes {}{} and {}{} do not multiply",
                                             to_string(a.shape()), trans_a ? "^T" : "",
                                             to_string(b.shape()), trans_b ? "^T" : ""));
  };
  if (a.ndim() < 2 || b.ndim() < 2) throw fail();
  const bool shared_b = b.ndim() == 2 && a.ndim() > 2;
  if (!shared_b &&
      !std::equal(a.shape().begin(), a.shape().end() - 2, b.shape().begin(), b.shape().end() - 2)) {
    throw fail();
  }
  if (!shared_b && a.ndim() != b.ndim()) throw fail();
  const auto dim = [](const Tensor& t, int d) { return static_cast<std::size_t>(t.size(d)); };
  MatmulDims dims{detail::extent_product(a.shape(), 0, a.ndim() - 2),
                  trans_a ? dim(a, -1) : dim(a, -2), trans_b ? dim(b, -2) : dim(b, -1),
                  trans_a ? dim(a, -2) : dim(a, -1), shared_b};
  const std::size_t k_of_b = trans_b ? dim(b, -1) : dim(b, -2);
  if (k_of_b != dims.k) throw fail();
  return dims;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  detail::check_compatible("matmul", {a, b});
  const MatmulDims d = matmul_dims(a, b, trans_a, trans_b);
  Shape c_shape = a.shape();
  c_shape[c_shape.size() - 2] = static_cast<std::int64_t>(d.m);
  c_shape.back() = static_cast<std::int64_t>(d.n);
  Tensor c = empty_like(a, c_shape);
  const std::size_t stride_b = d.shared_b ? 0 : d.k * d.n;
  kernels::gemm_batched(trans_a, trans_b, d.batch, d.m, d.n, d.k, 1.0, a.buffer(), d.m * d.k,
                        b.buffer(), stride_b, 0.0, c.buffer(), d.m * d.n);

  return detail::record("matmul", c, {a, b}, [a, b, d, trans_a, trans_b](const Tensor& dc) {
    Tensor da, db;
    const std::size_t mk = d.m * d.k, kn = d.k * d.n, mn = d.m * d.n;
    const std::size_t stride_b = d.shared_b ? 0 : kn;
    if (needs_grad(a)) {
      da = empty_like(a);
      if (trans_a) {  // A stored [k, m]: dA = op(B) dC^T
        kernels::gemm_batched(trans_b, true, d.batch, d.k, d.m, d.n, 1.0, b.buffer(), stride_b,
                              dc.buffer(), mn, 0.0, da.buffer(), mk);
      } else {  // dA = dC op(B)^T
        kernels::gemm_batched(false, !trans_b, d.batch, d.m, d.k, d.n, 1.0, dc.buffer(), mn,
                              b.buffer(), stride_b, 0.0, da.buffer(), mk);
      }
    }
    if (needs_grad(b)) {
      // One gradient per batch entry; a shared b sums them afterwards.
      Tensor per_batch =
          d.shared_b
              ? empty_like(b, {static_cast<std::int64_t>(d.batch), static_cast<std::int64_t>(kn)})
              : empty_like(b);
      if (trans_b) {  // B stored [n, k]: dB = dC^T op(A)
        kernels::gemm_batched(true, trans_a, d.batch, d.n, d.k, d.m, 1.0, dc.buffer(), mn,
                              a.buffer(), mk, 0.0, per_batch.buffer(), kn);
      } else {  // dB = op(A)^T dC
        kernels::gemm_batched(!trans_a, false, d.batch, d.k, d.n, d.m, 1.0, a.buffer(), mk,
                              dc.buffer(), mn, 0.0, per_batch.buffer(), kn);
      }
      if (d.shared_b) {
        db = empty_like(b);
        kernels::sum_rows(per_batch.buffer(), kn, db.buffer());
      } else {
        db = per_batch;
      }
    }
    return std::vector<Tensor>{da, db};
  });
}

}  // namespace mpitron::autograd
