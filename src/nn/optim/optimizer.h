// The interface the training step drives every optimizer through.
#pragma once

#include "nn/parameter.h"

namespace mpitron::nn {

/// An optimizer over a fixed list of parameters whose learning rate may change every step.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// The learning rate of the next `step` (per step, from a schedule). Throws
  /// std::invalid_argument unless lr is finite and >= 0.
  void set_lr(double lr);
  double lr() const { return lr_; }
  /// Applies one update to every parameter that has a gradient (in place, without recording).
  virtual void step() = 0;
  /// Sets every parameter's gradient to zero in place (its storage is kept: gradients may be
  /// views of a flat data-parallel buffer); a parameter without a gradient keeps none.
  void zero_grad();
  const Parameters& parameters() const { return parameters_; }

 protected:
  /// Throws std::invalid_argument unless lr is finite and > 0.
  Optimizer(Parameters parameters, double lr);
  Parameters parameters_;
  double lr_;
};

}  // namespace mpitron::nn
