// The Function extension point: one node of the autograd graph, i.e. one differentiable op's
// backward rule. Built-in ops and user ops (e.g. the tensor-parallel communication ops in nn/)
// are written the same way: compute the output, then `attach` a Function to it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace mpitron::autograd {

class Function;

/// One input of a Function as the engine sees it: where that input's gradient goes. An edge
/// holds the input's producer, not the input tensor, so an activation's storage is freed as soon
/// as the ops that saved it have run their backward (PyTorch's graph does the same).
struct Edge {
  std::shared_ptr<Function> function;  ///< the input's grad_fn when it is not a leaf, else null
  Tensor leaf;  ///< the input itself when it is a leaf that requires grad, else undefined
  Shape shape;  ///< the input's shape, to check the gradient `backward` returns
};

/// Backward rule of one op with a single output.
///
/// Subclasses keep whatever the rule needs (saved inputs, shapes, a communicator) and implement
/// `backward`. The engine calls it once per backward pass with d(root)/d(output), after every
/// consumer of the output has contributed (reverse topological order), and then releases the
/// node: its edges are dropped and `release_saved` frees what the rule kept, so a graph is
/// differentiated once (a second backward through it throws, like PyTorch without retain_graph).
class Function {
 public:
  virtual ~Function() = default;

  /// Op name used in error messages and graph dumps, e.g. "linear".
  virtual std::string name() const = 0;

  /// Given `grad_output` (the output's shape), returns one gradient per input, in the order of
  /// `inputs()`, each with that input's shape; an undefined Tensor means "no gradient".
  virtual std::vector<Tensor> backward(const Tensor& grad_output) = 0;

  /// Drops whatever `backward` needed (saved tensors, buffers). Called once by the engine right
  /// after `backward`; the default keeps nothing to drop.
  virtual void release_saved() {}

  /// One edge per input given to `attach`, in that order; empty once released.
  const std::vector<Edge>& edges() const { return edges_; }

  /// Whether a backward pass has already run through this node (and freed its state).
  bool released() const { return released_; }

  /// Drops the edges and calls `release_saved` (the engine calls it after `backward`).
  void release();

 private:
  friend Tensor attach(Tensor output, std::shared_ptr<Function> function,
                       std::vector<Tensor> inputs);
  std::vector<Edge> edges_;
  bool released_ = false;
};

/// Records `function` as the grad_fn of `output` when grad mode is enabled and at least one of
/// `inputs` requires grad; otherwise returns `output` unchanged (and drops `function`). Returns
/// the (possibly marked) output. `output` must be a fresh leaf made by the caller.
Tensor attach(Tensor output, std::shared_ptr<Function> function, std::vector<Tensor> inputs);

/// Whether ops record graph nodes on this thread (default true).
bool grad_enabled();

/// Sets grad mode to `enabled` for its lifetime on this thread and restores the previous mode on
/// destruction. Like torch.set_grad_enabled(enabled); `GradModeGuard(true)` is torch.enable_grad()
/// (a checkpointed layer's recomputation records its graph even when backward runs under
/// NoGradGuard).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

/// Disables graph recording for its lifetime (inference, reference computations, optimizer
/// steps); restores the previous mode on destruction. Like torch.no_grad().
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

}  // namespace mpitron::autograd
