#include "autograd/engine.h"

#include <fmt/format.h>

#include <stdexcept>
#include <unordered_map>

#include "autograd/function.h"
#include "kernels/fault_injection.h"
#include "kernels/ops.h"

namespace mpitron::autograd {

void accumulate(Tensor& dst, const Tensor& src) {
  if (!dst.defined()) {
    dst = src.clone();
    return;
  }
  check_same_shape("gradient accumulation", dst, src);
  kernels::axpy(1.0, src.buffer(), dst.buffer());
}

namespace {

// Functions reachable from `root`, ordered so that every Function comes before the Functions of
// its inputs (iterative depth-first post-order, reversed).
std::vector<Function*> topological_order(Function* root) {
  std::vector<Function*> post_order;
  std::unordered_map<Function*, bool> visited;
  std::vector<std::pair<Function*, std::size_t>> stack{{root, 0}};
  visited[root] = true;
  while (!stack.empty()) {
    auto& [function, next_input] = stack.back();
    const auto& inputs = function->inputs();
    if (next_input < inputs.size()) {
      const Tensor& input = inputs[next_input++];
      Function* child = input.defined() ? input.grad_fn().get() : nullptr;
      if (child && !visited[child]) {
        visited[child] = true;
        stack.emplace_back(child, 0);
      }
      continue;
    }
    post_order.push_back(function);
    stack.pop_back();
  }
  return {post_order.rbegin(), post_order.rend()};
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_output) {
  if (root.is_leaf()) {
    Tensor self = root;
    Tensor grad = self.grad();
    accumulate(grad, grad_output);
    self.set_grad(grad);
    return;
  }
  std::unordered_map<Function*, Tensor> pending{{root.grad_fn().get(), grad_output}};
  for (Function* function : topological_order(root.grad_fn().get())) {
    auto found = pending.find(function);
    if (found == pending.end()) continue;
    Tensor grad = std::move(found->second);
    pending.erase(found);
    std::vector<Tensor> input_grads = function->backward(grad);
    const auto& inputs = function->inputs();
    if (input_grads.size() != inputs.size()) {
      throw std::logic_error(fmt::format("{}: backward returned {} gradients for {} inputs",
                                         function->name(), input_grads.size(), inputs.size()));
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      Tensor input = inputs[i];
      if (!input_grads[i].defined() || !input.defined() || !input.requires_grad()) continue;
      if (input_grads[i].shape() != input.shape()) {
        throw std::logic_error(fmt::format("{}: gradient {} for input {} of shape {}",
                                           function->name(), to_string(input_grads[i].shape()), i,
                                           to_string(input.shape())));
      }
      if (input.is_leaf()) {
        Tensor leaf_grad = input.grad();
        accumulate(leaf_grad, input_grads[i]);
        input.set_grad(leaf_grad);
      } else {
        // Out of place: a gradient tensor may be shared by several pending slots.
        Tensor& slot = pending[input.grad_fn().get()];
        if (!slot.defined() || kernels::fault_active(kernels::Fault::non_leaf_grad_overwritten)) {
          slot = input_grads[i];
        } else {
          Tensor sum = Tensor::empty(slot.shape(), slot.dtype(), slot.device());
          kernels::add(slot.buffer(), input_grads[i].buffer(), sum.buffer());
          slot = sum;
        }
      }
    }
  }
}

}  // namespace mpitron::autograd
