#include "nn/optim/adamw.h"

#include <fmt/format.h>

#include <stdexcept>

#include "kernels/ops.h"

namespace mpitron::nn {

AdamW::AdamW(Parameters parameters, double lr, const AdamWOptions& options)
    : Optimizer(std::move(parameters), lr), options_(options) {
  const auto in_unit = [](double b) { return b >= 0.0 && b < 1.0; };
  if (!in_unit(options.beta1) || !in_unit(options.beta2) || !(options.eps > 0.0) ||
      !(options.weight_decay >= 0.0)) {
    throw std::invalid_argument(
        fmt::format("AdamW: betas must be in [0, 1), eps > 0 and weight decay >= 0 (got {}, {}, "
                    "{}, {})",
                    options.beta1, options.beta2, options.eps, options.weight_decay));
  }
  for (const Parameter& p : parameters_) {
    exp_avg_.push_back(Tensor::zeros(p.tensor.shape(), p.tensor.dtype(), p.tensor.device()));
    exp_avg_sq_.push_back(Tensor::zeros(p.tensor.shape(), p.tensor.dtype(), p.tensor.device()));
  }
}

void AdamW::set_steps(std::int64_t steps) {
  if (steps < 0) throw std::invalid_argument(fmt::format("AdamW: steps {} < 0", steps));
  steps_ = steps;
}

void AdamW::step() {
  ++steps_;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Tensor p = parameters_[i].tensor;
    const Tensor grad = p.grad();
    if (!grad.defined()) continue;
    const double decay = p.ndim() >= 2 ? options_.weight_decay : 0.0;
    kernels::adamw_update(p.buffer(), grad.buffer(), exp_avg_[i].buffer(), exp_avg_sq_[i].buffer(),
                          lr_, options_.beta1, options_.beta2, options_.eps, decay, steps_);
  }
}

}  // namespace mpitron::nn
