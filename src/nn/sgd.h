// Stochastic gradient descent with optional momentum, PyTorch's torch.optim.SGD update:
// v <- momentum v + g (v = g on the first step); p <- p - lr v (plain SGD when momentum is 0).
#pragma once

#include <vector>

#include "nn/parameter.h"

namespace mpitron::nn {

class Sgd {
 public:
  /// Throws std::invalid_argument when lr <= 0 or momentum is outside [0, 1).
  Sgd(Parameters parameters, double lr, double momentum = 0.0);

  /// Applies one update to every parameter that has a gradient (in place, without recording).
  void step();

  /// Clears every parameter's gradient.
  void zero_grad();

  const Parameters& parameters() const { return parameters_; }

 private:
  Parameters parameters_;
  double lr_, momentum_;
  std::vector<Tensor> velocity_;
};

}  // namespace mpitron::nn
