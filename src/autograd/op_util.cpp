#include "autograd/op_util.h"

#include <fmt/format.h>

#include <stdexcept>

#include "autograd/ops.h"
#include "kernels/ops.h"

namespace mpitron::autograd::detail {

void check_compatible(const char* op, const std::vector<Tensor>& tensors) {
  const Tensor* first = nullptr;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!first) {
      first = &t;
      continue;
    }
    if (t.device() != first->device() || t.dtype() != first->dtype()) {
      throw std::invalid_argument(
          fmt::format("{}: inputs on {}/{} and {}/{} (shapes {} and {})", op,
                      kernels::to_string(first->device()), kernels::to_string(first->dtype()),
                      kernels::to_string(t.device()), kernels::to_string(t.dtype()),
                      to_string(first->shape()), to_string(t.shape())));
    }
  }
}

Tensor keep_activation(const Tensor& x) {
  return grad_enabled() ? gemm_operand(x).detach() : Tensor();
}

bool keeps_bf16(const Tensor& x) {
  return kernels::gemm_operands() == kernels::GemmOperands::bfloat16 && x.dtype() == DType::f32;
}

Tensor empty_like(const Tensor& x, const Shape& shape) {
  return Tensor::empty(shape, x.dtype(), x.device());
}

int normalize_dim(const char* op, int dim, int ndim) {
  const int d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim) {
    throw std::out_of_range(fmt::format("{}: dim {} out of range for {} dims", op, dim, ndim));
  }
  return d;
}

Tensor existing_leaf_grad(const Tensor& weight) {
  return weight.is_leaf() ? weight.grad() : Tensor();
}

std::size_t extent_product(const Shape& shape, int begin, int end) {
  std::size_t n = 1;
  for (int i = begin; i < end; ++i)
    n *= static_cast<std::size_t>(shape[static_cast<std::size_t>(i)]);
  return n;
}

}  // namespace mpitron::autograd::detail
