// Row and whole-tensor reductions: softmax, mse_loss, sum, mean.
#include <fmt/format.h>

#include <stdexcept>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace mpitron::autograd {

using detail::empty_like;

Tensor softmax(const Tensor& x, bool causal, double scale) {
  if (x.ndim() < 1) throw std::invalid_argument("softmax: needs at least one dim, got a scalar");
  if (causal && (x.ndim() < 2 || x.size(-2) != x.size(-1))) {
    throw std::invalid_argument(fmt::format(
        "softmax: causal needs square [..., n, n] scores, got {}", to_string(x.shape())));
  }
  const auto cols = static_cast<std::size_t>(x.size(-1));
  Tensor y = empty_like(x);
  kernels::softmax_forward(x.buffer(), cols, y.buffer(), causal, scale);
  const Tensor saved = y.detach();
  return detail::record("softmax", y, {x}, [saved, cols, scale](const Tensor& dy) {
    Tensor dx = empty_like(saved);
    kernels::softmax_backward(saved.buffer(), dy.buffer(), cols, dx.buffer(), scale);
    return std::vector<Tensor>{dx};
  });
}

Tensor mse_loss(const Tensor& pred, const Tensor& target) {
  detail::check_compatible("mse_loss", {pred, target});
  check_same_shape("mse_loss", pred, target);
  Tensor loss = empty_like(pred, {});
  kernels::mse_forward(pred.buffer(), target.buffer(), loss.buffer());
  const Tensor saved_target = target.detach();
  return detail::record("mse_loss", loss, {pred}, [pred, saved_target](const Tensor& dloss) {
    Tensor dpred = empty_like(pred);
    kernels::mse_backward(pred.buffer(), saved_target.buffer(), dloss.buffer(), dpred.buffer());
    return std::vector<Tensor>{dpred};
  });
}

namespace {

// Sum of all elements times `alpha` (1 for sum, 1/numel for mean).
Tensor scaled_total(const char* name, const Tensor& x, double alpha) {
  Tensor total = empty_like(x, {});
  kernels::sum(x.buffer(), total.buffer());
  if (alpha != 1.0) kernels::scale(total.buffer(), alpha, total.buffer());
  const Shape shape = x.shape();
  return detail::record(name, total, {x}, [shape, alpha](const Tensor& dtotal) {
    Tensor dx = empty_like(dtotal, shape);
    kernels::broadcast_scalar(dtotal.buffer(), alpha, dx.buffer());
    return std::vector<Tensor>{dx};
  });
}

}  // namespace

Tensor sum(const Tensor& x) {
  return scaled_total("sum", x, 1.0);
}

Tensor mean(const Tensor& x) {
  if (x.numel() == 0) throw std::invalid_argument("mean: empty tensor " + to_string(x.shape()));
  return scaled_total("mean", x, 1.0 / static_cast<double>(x.numel()));
}

}  // namespace mpitron::autograd
