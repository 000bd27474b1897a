#include "nn/optim/optimizer.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "kernels/ops.h"

namespace mpitron::nn {

namespace {

// Elements `range` of parameter `values` become `source` (numel range.size(), float32) rounded
// to bfloat16 and widened exactly.
void write_rounded(const kernels::Buffer& source, Tensor& values, const ElementRange& range) {
  const auto count = static_cast<std::size_t>(range.size());
  if (count == 0) return;
  kernels::Buffer place =
      kernels::Buffer::view(values.buffer(), static_cast<std::size_t>(range.begin), count);
  kernels::round_to_bf16(source, place);
}

}  // namespace

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

void Optimizer::step(autograd::Bf16WeightCopies* copies) {
  const bool refresh = copies != nullptr && has_masters();
  if (refresh) {
    step_copies_.assign(parameters_.size(), Tensor());
    copy_written_.assign(parameters_.size(), 0);
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      const Tensor& p = parameters_[i].tensor;
      if (master_ranges_[i] == ElementRange{0, p.numel()}) step_copies_[i] = copies->kept_copy(p);
    }
  }
  update();
  if (!refresh) return;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i].tensor;
    if (step_copies_[i].defined() && copy_written_[i] == p.numel()) copies->mark_refreshed(p);
  }
  step_copies_.clear();
}

void Optimizer::write_master(std::size_t i, std::size_t offset, std::size_t count) {
  if (!has_masters() || count == 0) return;
  const ElementRange& range = master_ranges_[i];
  const std::int64_t first = range.begin + static_cast<std::int64_t>(offset);
  const kernels::Buffer piece = kernels::Buffer::view(masters_[i].buffer(), offset, count);
  write_rounded(piece, parameters_[i].tensor, {first, first + static_cast<std::int64_t>(count)});
  if (i < step_copies_.size() && step_copies_[i].defined()) {
    kernels::Buffer copy =
        kernels::Buffer::view(step_copies_[i].buffer(), static_cast<std::size_t>(first), count);
    kernels::convert(piece, copy);
    copy_written_[i] += static_cast<std::int64_t>(count);
  }
}

void Optimizer::zero_grad() {
  for (Parameter& p : parameters_) {
    Tensor grad = p.tensor.grad();
    if (grad.defined()) kernels::fill(grad.buffer(), 0.0);
  }
}

void Optimizer::keep_float32_masters(const std::vector<ElementRange>& ranges) {
  if (has_masters()) throw std::logic_error("optimizer: the float32 masters exist already");
  if (ranges.size() != parameters_.size()) {
    throw std::invalid_argument(fmt::format("optimizer: {} master ranges for {} parameters",
                                            ranges.size(), parameters_.size()));
  }
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Parameter& p = parameters_[i];
    const ElementRange& r = ranges[i];
    if (p.tensor.dtype() != DType::f32) {
      throw std::invalid_argument(fmt::format("optimizer: float32 masters of {}, a {} parameter",
                                              p.name, kernels::to_string(p.tensor.dtype())));
    }
    if (r.begin < 0 || r.begin > r.end || r.end > p.tensor.numel()) {
      throw std::invalid_argument(
          fmt::format("optimizer: master range [{}, {}) of {} outside "
                      "its {} elements",
                      r.begin, r.end, p.name, p.tensor.numel()));
    }
  }
  master_ranges_ = ranges;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i].tensor;
    const ElementRange& r = ranges[i];
    Tensor master = Tensor::zeros({r.size()}, DType::f32, p.device());
    if (r.size() > 0) {
      kernels::copy(kernels::Buffer::view(p.buffer(), static_cast<std::size_t>(r.begin),
                                          static_cast<std::size_t>(r.size())),
                    master.buffer());
    }
    write_rounded(p.buffer(), p, {0, p.numel()});
    masters_.push_back(std::move(master));
  }
}

ElementRange Optimizer::master_range(std::size_t i) const {
  return has_masters() ? master_ranges_[i] : ElementRange{0, parameters_[i].tensor.numel()};
}

kernels::Buffer Optimizer::target(std::size_t i, const ElementRange& range) {
  const auto count = static_cast<std::size_t>(range.size());
  if (!has_masters()) {
    return kernels::Buffer::view(parameters_[i].tensor.buffer(),
                                 static_cast<std::size_t>(range.begin), count);
  }
  if (!(range == master_ranges_[i])) {
    throw std::logic_error(fmt::format("optimizer: {} updates [{}, {}), its master holds [{}, {})",
                                       parameters_[i].name, range.begin, range.end,
                                       master_ranges_[i].begin, master_ranges_[i].end));
  }
  return kernels::Buffer::view(masters_[i].buffer(), 0, count);
}

}  // namespace mpitron::nn
