// Element-wise differentiable ops: add (with bias broadcast), sub, mul, scale,
// round_through_bf16, gelu.
#include <fmt/format.h>

#include <stdexcept>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace mpitron::autograd {

using detail::empty_like;
using detail::needs_grad;

Tensor add(const Tensor& a, const Tensor& b) {
  detail::check_compatible("add", {a, b});
  if (a.shape() == b.shape()) {
    Tensor y = empty_like(a);
    kernels::add(a.buffer(), b.buffer(), y.buffer());
    return detail::record("add", y, {a, b}, [](const Tensor& dy) {
      return std::vector<Tensor>{dy, dy};
    });
  }
  if (b.ndim() != 1 || a.ndim() < 1 || a.size(-1) != b.size(0)) {
    throw std::invalid_argument(fmt::format("add: shape {} does not broadcast to {}",
                                            to_string(b.shape()), to_string(a.shape())));
  }
  const auto cols = static_cast<std::size_t>(b.size(0));
  Tensor y = empty_like(a);
  kernels::bias_add(a.buffer(), b.buffer(), cols, y.buffer());
  return detail::record("add", y, {a, b}, [b, cols](const Tensor& dy) {
    Tensor db;
    if (needs_grad(b)) {
      db = empty_like(b);
      kernels::sum_rows(dy.buffer(), cols, db.buffer());
    }
    return std::vector<Tensor>{dy, db};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  detail::check_compatible("sub", {a, b});
  check_same_shape("sub", a, b);
  Tensor y = empty_like(a);
  kernels::sub(a.buffer(), b.buffer(), y.buffer());
  return detail::record("sub", y, {a, b}, [b](const Tensor& dy) {
    Tensor db;
    if (needs_grad(b)) {
      db = empty_like(dy);
      kernels::scale(dy.buffer(), -1.0, db.buffer());
    }
    return std::vector<Tensor>{dy, db};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  detail::check_compatible("mul", {a, b});
  check_same_shape("mul", a, b);
  Tensor y = empty_like(a);
  kernels::mul(a.buffer(), b.buffer(), y.buffer());
  return detail::record("mul", y, {a, b}, [a, b](const Tensor& dy) {
    Tensor da, db;
    if (needs_grad(a)) {
      da = empty_like(dy);
      kernels::mul(dy.buffer(), b.buffer(), da.buffer());
    }
    if (needs_grad(b)) {
      db = empty_like(dy);
      kernels::mul(dy.buffer(), a.buffer(), db.buffer());
    }
    return std::vector<Tensor>{da, db};
  });
}

Tensor scale(const Tensor& x, double alpha) {
  Tensor y = empty_like(x);
  kernels::scale(x.buffer(), alpha, y.buffer());
  return detail::record("scale", y, {x}, [alpha](const Tensor& dy) {
    Tensor dx = empty_like(dy);
    kernels::scale(dy.buffer(), alpha, dx.buffer());
    return std::vector<Tensor>{dx};
  });
}

namespace {

// x (float32) rounded to bfloat16 and widened back into a new float32 tensor.
Tensor bf16_round_trip_copy(const Tensor& x) {
  Tensor y = empty_like(x);
  kernels::round_to_bf16(x.buffer(), y.buffer());
  return y;
}

}  // namespace

namespace {

void expect_float32(const char* op, const Tensor& x) {
  if (x.dtype() != DType::f32) {
    throw std::invalid_argument(
        fmt::format("{}: input is {}, not float32", op, kernels::to_string(x.dtype())));
  }
}

}  // namespace

Tensor round_through_bf16(const Tensor& x) {
  expect_float32("round_through_bf16", x);
  return detail::record("round_through_bf16", bf16_round_trip_copy(x), {x}, [](const Tensor& dy) {
    return std::vector<Tensor>{bf16_round_trip_copy(dy)};
  });
}

Tensor read_as_bf16(const Tensor& x) {
  expect_float32("read_as_bf16", x);
  return detail::record("read_as_bf16", bf16_round_trip_copy(x), {x},
                        [](const Tensor& dy) { return std::vector<Tensor>{dy}; });
}

Tensor gelu(const Tensor& x, GeluForm form) {
  Tensor y = empty_like(x);
  kernels::gelu_forward(x.buffer(), y.buffer(), form);
  return detail::record("gelu", y, {x}, [x, form](const Tensor& dy) {
    Tensor dx = empty_like(x);
    kernels::gelu_backward(x.buffer(), dy.buffer(), dx.buffer(), form);
    return std::vector<Tensor>{dx};
  });
}

}  // namespace mpitron::autograd
