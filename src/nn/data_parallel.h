// Data parallelism: every replica computes gradients on its own batch; one post-backward call
// averages them over the DP communicator, so each replica applies the gradient of the union of
// the batches (for a mean loss over equal-size batches).
#pragma once

#include "comm/communicator.h"
#include "kernels/device.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// Averages parameter gradients over a DP communicator with one all-reduce over a flat buffer
/// (not one MPI call per parameter). The flat buffer is kept and reused between steps.
class GradientAverager {
 public:
  explicit GradientAverager(const comm::Communicator& dp);

  /// For every parameter, grad <- (sum over the dp replicas of grad) / dp. A parameter without a
  /// gradient contributes zeros (and receives the average). All parameters must share one
  /// dtype and device (std::invalid_argument otherwise). Collective over `dp`.
  void average(const Parameters& parameters);

 private:
  comm::Communicator dp_;
  kernels::Buffer flat_;
};

}  // namespace mpitron::nn
