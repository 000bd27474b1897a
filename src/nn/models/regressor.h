// The `train-dp` model: Linear(features -> targets), or Linear(features -> hidden) -> GELU ->
// Linear(hidden -> targets) (the reference program's SimpleModel, and its MLP variant).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layers/linear.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// Master weights of the regressor's layers, in order: one LinearWeights when hidden == 0
/// ([targets, features]), two when hidden > 0 ([hidden, features] and [targets, hidden]).
/// Layer i draws its weight and bias from U(-1/sqrt(in), 1/sqrt(in)), the range of
/// torch.nn.Linear's default init, with seeds seed + 2i and seed + 2i + 1. Throws
/// std::invalid_argument when features or targets < 1, or hidden < 0.
std::vector<LinearWeights> make_regressor_weights(std::int64_t features, std::int64_t hidden,
                                                  std::int64_t targets, std::uint64_t seed,
                                                  DType dtype, Device device);

/// A dense regressor owning copies of its weights; x [batch, features] -> [batch, targets].
class Regressor {
 public:
  /// Throws std::invalid_argument when `layers` is empty.
  explicit Regressor(const std::vector<LinearWeights>& layers);
  Tensor forward(const Tensor& x) const;
  /// "fc.weight", "fc.bias" for one layer; "fc1.*", "fc2.*" for two.
  Parameters parameters() const;

 private:
  std::vector<Linear> layers_;
};

}  // namespace mpitron::nn
