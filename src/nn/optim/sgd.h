// Stochastic gradient descent with optional momentum, PyTorch's torch.optim.SGD update:
// v <- momentum v + g (v = g on the first step); p <- p - lr v (plain SGD when momentum is 0).
#pragma once

#include <vector>

#include "nn/optim/optimizer.h"

namespace mpitron::nn {

class Sgd final : public Optimizer {
 public:
  /// Throws std::invalid_argument when lr is not a finite positive number or momentum is
  /// outside [0, 1).
  Sgd(Parameters parameters, double lr, double momentum = 0.0);

 private:
  /// p -= lr v (p the parameter's values, or its float32 master).
  void update() override;

  double momentum_;
  std::vector<Tensor> velocity_;
};

}  // namespace mpitron::nn
