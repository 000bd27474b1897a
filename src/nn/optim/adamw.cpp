#include "nn/optim/adamw.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/ops.h"

namespace mpitron::nn {

AdamW::AdamW(Parameters parameters, double lr, const AdamWOptions& options,
             std::vector<ElementRange> shards)
    : Optimizer(std::move(parameters), lr),
      options_(options),
      shards_(std::move(shards)),
      sharded_(!shards_.empty()) {
  const auto in_unit = [](double b) { return b >= 0.0 && b < 1.0; };
  if (!in_unit(options.beta1) || !in_unit(options.beta2) || !(options.eps > 0.0) ||
      !(options.weight_decay >= 0.0)) {
    throw std::invalid_argument(
        fmt::format("AdamW: betas must be in [0, 1), eps > 0 and weight decay >= 0 (got {}, {}, "
                    "{}, {})",
                    options.beta1, options.beta2, options.eps, options.weight_decay));
  }
  if (sharded_ && shards_.size() != parameters_.size()) {
    throw std::invalid_argument(
        fmt::format("AdamW: {} shards for {} parameters", shards_.size(), parameters_.size()));
  }
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i].tensor;
    if (!sharded_) shards_.push_back({0, p.numel()});
    const ElementRange& r = shards_[i];
    if (r.begin < 0 || r.begin > r.end || r.end > p.numel()) {
      throw std::invalid_argument(fmt::format("AdamW: shard [{}, {}) of {} outside its {} elements",
                                              r.begin, r.end, parameters_[i].name, p.numel()));
    }
    const Shape shape = sharded_ ? Shape{r.size()} : p.shape();
    exp_avg_.push_back(Tensor::zeros(shape, p.dtype(), p.device()));
    exp_avg_sq_.push_back(Tensor::zeros(shape, p.dtype(), p.device()));
  }
}

void AdamW::set_steps(std::int64_t steps) {
  if (steps < 0) throw std::invalid_argument(fmt::format("AdamW: steps {} < 0", steps));
  steps_ = steps;
}

void AdamW::update() {
  ++steps_;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i].tensor;
    Tensor grad = p.grad();
    if (!grad.defined()) continue;
    const double decay = p.ndim() >= 2 ? options_.weight_decay : 0.0;
    const auto begin = static_cast<std::size_t>(shards_[i].begin);
    const auto count = static_cast<std::size_t>(shards_[i].size());
    if (count == 0) continue;
    kernels::Buffer values = target(i, shards_[i]);
    // On CPU in pieces whose master write_master then reads from cache (the update is element by
    // element, so the pieces give the whole call's bits); on a GPU in one launch.
    const std::size_t piece = values.device() == kernels::Device::cpu ? kPieceElements : count;
    for (std::size_t offset = 0; offset < count; offset += piece) {
      const std::size_t n = std::min(piece, count - offset);
      const auto view = [offset, n](kernels::Buffer& b) {
        return kernels::Buffer::view(b, offset, n);
      };
      kernels::Buffer piece_values = view(values), m = view(exp_avg_[i].buffer()),
                      v = view(exp_avg_sq_[i].buffer());
      kernels::adamw_update(piece_values, kernels::Buffer::view(grad.buffer(), begin + offset, n),
                            m, v, lr_, options_.beta1, options_.beta2, options_.eps, decay, steps_);
      write_master(i, offset, n);
    }
  }
}

}  // namespace mpitron::nn
