#include "autograd/function.h"

#include <algorithm>

namespace mpitron::autograd {

namespace {
thread_local bool grad_mode = true;
}

bool grad_enabled() {
  return grad_mode;
}

GradModeGuard::GradModeGuard(bool enabled) : previous_(grad_mode) {
  grad_mode = enabled;
}
GradModeGuard::~GradModeGuard() {
  grad_mode = previous_;
}

void Function::release() {
  edges_.clear();
  edges_.shrink_to_fit();
  released_ = true;
  release_saved();
}

Tensor attach(Tensor output, std::shared_ptr<Function> function, std::vector<Tensor> inputs) {
  const bool needs_grad =
      grad_mode && std::any_of(inputs.begin(), inputs.end(),
                               [](const Tensor& t) { return t.defined() && t.requires_grad(); });
  if (!needs_grad) return output;
  function->edges_.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    Edge edge;
    if (input.defined()) {
      edge.shape = input.shape();
      if (!input.is_leaf()) {
        edge.function = input.grad_fn();
      } else if (input.requires_grad()) {
        edge.leaf = input;
      }
    }
    function->edges_.push_back(std::move(edge));
  }
  output.impl()->requires_grad = true;
  output.impl()->grad_fn = std::move(function);
  return output;
}

}  // namespace mpitron::autograd
