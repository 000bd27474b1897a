#include "nn/optim/sgd.h"

#include <stdexcept>

#include "kernels/ops.h"

namespace mpitron::nn {

Sgd::Sgd(Parameters parameters, double lr, double momentum)
    : Optimizer(std::move(parameters), lr), momentum_(momentum), velocity_(parameters_.size()) {
  if (!(momentum >= 0.0 && momentum < 1.0)) {
    throw std::invalid_argument("Sgd: momentum must be in [0, 1)");
  }
}

void Sgd::step() {
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Tensor p = parameters_[i].tensor;
    const Tensor grad = p.grad();
    if (!grad.defined()) continue;
    const kernels::Buffer* update = &grad.buffer();
    if (momentum_ > 0.0) {
      Tensor& v = velocity_[i];
      if (!v.defined()) {
        v = grad.clone();
      } else {
        kernels::scale(v.buffer(), momentum_, v.buffer());
        kernels::axpy(1.0, grad.buffer(), v.buffer());
      }
      update = &v.buffer();
    }
    kernels::axpy(-lr_, *update, p.buffer());
  }
}

}  // namespace mpitron::nn
