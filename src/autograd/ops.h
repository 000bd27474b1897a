// Differentiable ops on autograd Tensors. Each records a Function when grad mode is on and an
// input requires grad. Conventions follow PyTorch (torch.nn.functional), so results can be
// compared with PyTorch golden values.
//
// Errors: every op throws std::invalid_argument naming the op and both shapes when shapes do not
// fit, and when inputs differ in device or dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"
#include "kernels/ops.h"

namespace mpitron::autograd {

using kernels::GeluForm;

/// y = x W^T + b: x [..., in], weight [out, in], bias [out] or undefined; y [..., out].
/// (torch.nn.functional.linear.)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

/// Batched matrix product: a [..., m, k] (or [..., k, m] when trans_a), b [..., k, n] (or
/// [..., n, k] when trans_b) with equal leading (batch) dims, or b 2-D and shared by every batch;
/// result [..., m, n].
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

/// a + b: equal shapes, or b 1-D of size a.size(-1) broadcast over a's leading dims (a bias).
Tensor add(const Tensor& a, const Tensor& b);

/// a - b, equal shapes.
Tensor sub(const Tensor& a, const Tensor& b);

/// a * b element-wise, equal shapes.
Tensor mul(const Tensor& a, const Tensor& b);

/// alpha * x.
Tensor scale(const Tensor& x, double alpha);

/// GELU, exact (erf) by default or the tanh approximation; see kernels::GeluForm.
Tensor gelu(const Tensor& x, GeluForm form = GeluForm::exact);

/// Numerically stable softmax over the last dim (subtracts the row max).
Tensor softmax(const Tensor& x);

/// Mean squared error, mean over all elements: pred and target have equal shapes; result is a
/// scalar (shape {}). torch.nn.functional.mse_loss(reduction="mean"). `target` gets no gradient.
Tensor mse_loss(const Tensor& pred, const Tensor& target);

/// Sum of all elements, a scalar (shape {}).
Tensor sum(const Tensor& x);

/// Mean of all elements, a scalar (shape {}).
Tensor mean(const Tensor& x);

/// Same elements, new shape (numel must match; one extent may be -1 and is inferred). Shares
/// storage with x.
Tensor reshape(const Tensor& x, const Shape& shape);

/// Swaps dims d0 and d1 (negative counts from the end) into a new contiguous tensor; d0 == d1
/// gives x's elements unchanged (sharing storage, like reshape).
Tensor transpose(const Tensor& x, int d0, int d1);

/// The slice [start, start + length) of dim `dim`, as a new contiguous tensor. Throws
/// std::out_of_range when the slice leaves the dim.
Tensor narrow(const Tensor& x, int dim, std::int64_t start, std::int64_t length);

/// `chunks` equal slices along `dim`; throws std::invalid_argument when the extent is not
/// divisible by `chunks`.
std::vector<Tensor> split(const Tensor& x, int chunks, int dim);

/// Concatenation along `dim`; all other dims must agree.
Tensor concat(const std::vector<Tensor>& parts, int dim);

}  // namespace mpitron::autograd
