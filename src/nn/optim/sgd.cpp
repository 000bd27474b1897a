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

void Sgd::update() {
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Tensor grad = parameters_[i].tensor.grad();
    if (!grad.defined()) continue;
    const ElementRange range = master_range(i);
    const auto count = static_cast<std::size_t>(range.size());
    if (count == 0) continue;
    const kernels::Buffer gradient =
        kernels::Buffer::view(grad.buffer(), static_cast<std::size_t>(range.begin), count);
    const kernels::Buffer* step = &gradient;
    if (momentum_ > 0.0) {
      Tensor& v = velocity_[i];
      if (!v.defined()) {
        v = Tensor::zeros({range.size()}, grad.dtype(), grad.device());
        kernels::copy(gradient, v.buffer());
      } else {
        kernels::scale(v.buffer(), momentum_, v.buffer());
        kernels::axpy(1.0, gradient, v.buffer());
      }
      step = &v.buffer();
    }
    kernels::Buffer values = target(i, range);
    kernels::axpy(-lr_, *step, values);
    write_master(i, 0, count);
  }
}

}  // namespace mpitron::nn
