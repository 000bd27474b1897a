#include "support/loss_backward_memory.h"

#include "autograd/random.h"
#include "kernels/allocator.h"

namespace mpitron::test {

LossBackward loss_backward(std::size_t rows, std::size_t in, std::size_t cols,
                           const std::function<autograd::Tensor(const autograd::Tensor&)>& loss,
                           bool hold_logits) {
  using autograd::Tensor;
  const auto r = static_cast<std::int64_t>(rows), i = static_cast<std::int64_t>(in),
             c = static_cast<std::int64_t>(cols);
  const Tensor x = autograd::randn({r, i}, 91).set_requires_grad();
  const Tensor w = autograd::randn({c, i}, 92).set_requires_grad();
  Tensor held = autograd::linear(x, w);
  const std::vector<double> before = held.to_vector();
  const Tensor value = loss(held);
  if (!hold_logits) held = Tensor();
  const kernels::AllocatorStats start = kernels::allocator_stats(kernels::Device::cpu);
  kernels::reset_allocator_peaks(kernels::Device::cpu);
  value.backward();
  LossBackward out;
  out.peak_above_start =
      kernels::allocator_stats(kernels::Device::cpu).peak_in_use_bytes - start.in_use_bytes;
  out.grad_x = x.grad().to_vector();
  out.grad_w = w.grad().to_vector();
  if (hold_logits) out.logits_unchanged = held.to_vector() == before;
  return out;
}

}  // namespace mpitron::test
