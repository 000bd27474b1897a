// The Function extension point: one node of the autograd graph, i.e. one differentiable op's
// backward rule. Built-in ops and user ops (e.g. the tensor-parallel communication ops in nn/)
// are written the same way: compute the output, then `attach` a Function to it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace mpitron::autograd {

/// Backward rule of one op with a single output.
///
/// Subclasses keep whatever the rule needs (saved inputs, shapes, a communicator) and implement
/// `backward`. The engine calls it once per backward pass with d(root)/d(output), after every
/// consumer of the output has contributed (reverse topological order).
class Function {
 public:
  virtual ~Function() = default;

  /// Op name used in error messages and graph dumps, e.g. "linear".
  virtual std::string name() const = 0;

  /// Given `grad_output` (the output's shape), returns one gradient per input, in the order of
  /// `inputs()`, each with that input's shape; an undefined Tensor means "no gradient".
  virtual std::vector<Tensor> backward(const Tensor& grad_output) = 0;

  /// The op's inputs (the graph edges), as given to `attach`.
  const std::vector<Tensor>& inputs() const { return inputs_; }

 private:
  friend Tensor attach(Tensor output, std::shared_ptr<Function> function,
                       std::vector<Tensor> inputs);
  std::vector<Tensor> inputs_;
};

/// Records `function` as the grad_fn of `output` when grad mode is enabled and at least one of
/// `inputs` requires grad; otherwise returns `output` unchanged (and drops `function`). Returns
/// the (possibly marked) output. `output` must be a fresh leaf made by the caller.
Tensor attach(Tensor output, std::shared_ptr<Function> function, std::vector<Tensor> inputs);

/// Whether ops record graph nodes on this thread (default true).
bool grad_enabled();

/// Disables graph recording for its lifetime (inference, reference computations, optimizer
/// steps); restores the previous mode on destruction. Like torch.no_grad().
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace mpitron::autograd
