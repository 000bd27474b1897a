#include "nn/data_parallel.h"

#include <fmt/format.h>

#include <stdexcept>

#include "comm/collectives.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

GradientAverager::GradientAverager(const comm::Communicator& dp) : dp_(dp) {}

void GradientAverager::average(const Parameters& parameters) {
  if (parameters.empty()) return;
  const Tensor& first = parameters.front().tensor;
  std::size_t total = 0;
  for (const Parameter& p : parameters) {
    if (p.tensor.dtype() != first.dtype() || p.tensor.device() != first.device()) {
      throw std::invalid_argument(
          fmt::format("GradientAverager: {} is {} on {}, {} is {} on {}", parameters.front().name,
                      kernels::to_string(first.dtype()), kernels::to_string(first.device()), p.name,
                      kernels::to_string(p.tensor.dtype()), kernels::to_string(p.tensor.device())));
    }
    total += static_cast<std::size_t>(p.tensor.numel());
    if (!p.tensor.grad().defined()) {
      Tensor(p.tensor).set_grad(
          Tensor::zeros(p.tensor.shape(), p.tensor.dtype(), p.tensor.device()));
    }
  }
  if (dp_.size() == 1) return;  // one replica: its gradients are the average
  if (flat_.numel() != total || flat_.dtype() != first.dtype() ||
      flat_.device() != first.device()) {
    flat_ = kernels::Buffer(total, first.dtype(), first.device());
  }

  std::size_t offset = 0;
  for (const Parameter& p : parameters) {
    const auto n = static_cast<std::size_t>(p.tensor.numel());
    kernels::copy_rows(p.tensor.grad().buffer(), 0, n, flat_, offset, n, 1, n);
    offset += n;
  }
  const bool average = !fault_active(Fault::dp_sum_not_average);
  comm::all_reduce(dp_, flat_, average ? comm::ReduceOp::avg : comm::ReduceOp::sum);
  offset = 0;
  for (const Parameter& p : parameters) {
    const auto n = static_cast<std::size_t>(p.tensor.numel());
    kernels::copy_rows(flat_, offset, n, p.tensor.grad().buffer(), 0, n, 1, n);
    offset += n;
  }
}

}  // namespace mpitron::nn
