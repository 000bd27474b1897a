// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter, arXiv:1711.05101), with
// torch.optim.AdamW's update order (PyTorch 1.13, amsgrad off), so runs match PyTorch.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/optim/optimizer.h"

namespace mpitron::nn {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  /// Applied to parameters with two or more dims (matrices and embeddings), never to biases or
  /// LayerNorm parameters (the GPT-2 / nanoGPT convention).
  double weight_decay = 0.1;
};

class AdamW final : public Optimizer {
 public:
  /// Moments start at zero. With `shards` (one range per parameter: the distributed optimizer,
  /// DataParallelGradients::owned) only those elements of each parameter are updated and have
  /// moments; empty means every element. Throws std::invalid_argument when lr is not a finite
  /// positive number, a beta is outside [0, 1), eps <= 0 or weight_decay < 0, and when `shards`
  /// has another count than the parameters or a range outside its parameter.
  AdamW(Parameters parameters, double lr, const AdamWOptions& options = {},
        std::vector<ElementRange> shards = {});

  /// Steps taken so far (each `step` counts one).
  std::int64_t steps() const { return steps_; }
  /// The elements of each parameter this optimizer updates (the whole parameter unsharded).
  const std::vector<ElementRange>& shards() const { return shards_; }
  /// First and second moments, one per parameter, for checkpoints: the parameter's shape, or
  /// [shards()[i].size()] when the optimizer is sharded.
  std::vector<Tensor>& exp_avg() { return exp_avg_; }
  std::vector<Tensor>& exp_avg_sq() { return exp_avg_sq_; }
  /// Sets the step count (when resuming from a checkpoint). Throws std::invalid_argument when
  /// steps < 0.
  void set_steps(std::int64_t steps);

 private:
  /// For each parameter with a gradient g (step t counted from 1; p its values, or its float32
  /// master): p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  /// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
  void update() override;

  /// Elements per piece of a CPU update: 1 MiB of float32 master, which the rounding into the
  /// parameter (write_master) then finds in L2 or L3.
  static constexpr std::size_t kPieceElements = std::size_t{1} << 18;

  AdamWOptions options_;
  std::int64_t steps_ = 0;
  std::vector<ElementRange> shards_;
  bool sharded_ = false;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

}  // namespace mpitron::nn
