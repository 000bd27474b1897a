#include "nn/optim/optimizer.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "kernels/ops.h"

namespace mpitron::nn {

Optimizer::Optimizer(Parameters parameters, double lr)
    : parameters_(std::move(parameters)), lr_(lr) {
  if (!(lr > 0.0) || !std::isfinite(lr)) {
    throw std::invalid_argument(
        fmt::format("optimizer: lr must be a finite positive number, got {}", lr));
  }
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0.0) || !std::isfinite(lr)) {
    throw std::invalid_argument(fmt::format("optimizer: lr must be finite and >= 0, got {}", lr));
  }
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (Parameter& p : parameters_) {
    Tensor grad = p.tensor.grad();
    if (grad.defined()) kernels::fill(grad.buffer(), 0.0);
  }
}

}  // namespace mpitron::nn
