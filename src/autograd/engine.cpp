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

using FunctionPtr = std::shared_ptr<Function>;

// Functions reachable from `root`, ordered so that every Function comes before the Functions of
// its inputs (iterative depth-first post-order, reversed). Holding them keeps each node alive
// while the nodes after it release their edges.
std::vector<FunctionPtr> topological_order(const FunctionPtr& root) {
  std::vector<FunctionPtr> post_order;
  std::unordered_map<Function*, bool> visited;
  std::vector<std::pair<FunctionPtr, std::size_t>> stack{{root, 0}};
  visited[root.get()] = true;
  while (!stack.empty()) {
    auto& [function, next_edge] = stack.back();
    const auto& edges = function->edges();
    if (next_edge < edges.size()) {
      const FunctionPtr& child = edges[next_edge++].function;
      if (child && !visited[child.get()]) {
        visited[child.get()] = true;
        stack.emplace_back(child, 0);
      }
      continue;
    }
    post_order.push_back(function);
    stack.pop_back();
  }
  return {post_order.rbegin(), post_order.rend()};
}

// Adds `grad` to what is pending for `function` (out of place: a gradient tensor may be shared
// by several pending slots).
void add_pending(std::unordered_map<Function*, Tensor>& pending, Function* function,
                 const Tensor& grad) {
  Tensor& slot = pending[function];
  if (!slot.defined() || kernels::fault_active(kernels::Fault::non_leaf_grad_overwritten)) {
    slot = grad;
    return;
  }
  Tensor sum = Tensor::empty(slot.shape(), slot.dtype(), slot.device());
  kernels::add(slot.buffer(), grad.buffer(), sum.buffer());
  slot = sum;
}

// Per hooked leaf, how many edges of the graph still lead to it (post-accumulate hooks fire when
// that reaches zero).
using LeafUses = std::unordered_map<TensorImpl*, int>;

LeafUses hooked_leaf_uses(const std::vector<FunctionPtr>& order) {
  LeafUses uses;
  for (const FunctionPtr& function : order) {
    for (const Edge& edge : function->edges()) {
      if (edge.leaf.defined() && edge.leaf.impl()->post_accumulate_hook)
        ++uses[edge.leaf.impl().get()];
    }
  }
  return uses;
}

// Counts off `function`'s edges to hooked leaves (call before the node is released), firing the
// hook of each leaf whose last edge this was.
void count_off_leaf_uses(const Function& function, LeafUses& uses) {
  if (uses.empty()) return;
  for (const Edge& edge : function.edges()) {
    if (!edge.leaf.defined()) continue;
    auto found = uses.find(edge.leaf.impl().get());
    if (found != uses.end() && --found->second == 0) edge.leaf.impl()->post_accumulate_hook();
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_output) {
  if (root.is_leaf()) {
    Tensor self = root;
    Tensor grad = self.grad();
    accumulate(grad, grad_output);
    self.set_grad(grad);
    if (self.impl()->post_accumulate_hook) self.impl()->post_accumulate_hook();
    return;
  }
  std::unordered_map<Function*, Tensor> pending{{root.grad_fn().get(), grad_output}};
  const std::vector<FunctionPtr> order = topological_order(root.grad_fn());
  // Checked before any backward runs, so a refused pass leaves every leaf's gradient as it was.
  for (const FunctionPtr& function : order) {
    if (function->released()) {
      throw std::logic_error(fmt::format(
          "{}: backward through a graph that was already differentiated (one backward pass per "
          "graph; run the forward again)",
          function->name()));
    }
  }
  LeafUses leaf_uses = hooked_leaf_uses(order);
  for (const FunctionPtr& function : order) {
    auto found = pending.find(function.get());
    if (found == pending.end()) {
      count_off_leaf_uses(*function, leaf_uses);
      continue;
    }
    Tensor grad = std::move(found->second);
    pending.erase(found);
    const std::vector<Tensor> input_grads = function->backward(grad);
    grad = Tensor();
    const auto& edges = function->edges();
    if (input_grads.size() != edges.size()) {
      throw std::logic_error(fmt::format("{}: backward returned {} gradients for {} inputs",
                                         function->name(), input_grads.size(), edges.size()));
    }
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const Edge& edge = edges[i];
      if (!input_grads[i].defined() || (!edge.function && !edge.leaf.defined())) continue;
      if (input_grads[i].shape() != edge.shape) {
        throw std::logic_error(fmt::format("{}: gradient {} for input {} of shape {}",
                                           function->name(), to_string(input_grads[i].shape()), i,
                                           to_string(edge.shape)));
      }
      if (edge.function) {
        add_pending(pending, edge.function.get(), input_grads[i]);
      } else {
        Tensor leaf = edge.leaf;
        Tensor leaf_grad = leaf.grad();
        accumulate(leaf_grad, input_grads[i]);
        leaf.set_grad(leaf_grad);
      }
    }
    count_off_leaf_uses(*function, leaf_uses);
    function->release();
  }
}

}  // namespace mpitron::autograd
