#include "nn/models/regressor.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "autograd/ops.h"
#include "autograd/random.h"

namespace mpitron::nn {

std::vector<LinearWeights> make_regressor_weights(std::int64_t features, std::int64_t hidden,
                                                  std::int64_t targets, std::uint64_t seed,
                                                  DType dtype, Device device) {
  if (features < 1 || targets < 1 || hidden < 0) {
    throw std::invalid_argument(
        fmt::format("regressor: need features >= 1, targets >= 1, hidden >= 0, got {}, {}, {}",
                    features, targets, hidden));
  }
  std::vector<std::int64_t> widths{features, targets};
  if (hidden > 0) widths.insert(widths.begin() + 1, hidden);
  std::vector<LinearWeights> layers;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(widths[i]));
    const std::uint64_t layer_seed = seed + 2 * i;
    layers.push_back(
        {autograd::uniform({widths[i + 1], widths[i]}, layer_seed, -bound, bound, dtype, device),
         autograd::uniform({widths[i + 1]}, layer_seed + 1, -bound, bound, dtype, device)});
  }
  return layers;
}

Regressor::Regressor(const std::vector<LinearWeights>& layers) {
  if (layers.empty()) throw std::invalid_argument("Regressor: no layers");
  for (const LinearWeights& weights : layers)
    layers_.emplace_back(weights);
}

Tensor Regressor::forward(const Tensor& x) const {
  Tensor y = layers_.front().forward(x);
  for (std::size_t i = 1; i < layers_.size(); ++i)
    y = layers_[i].forward(autograd::gelu(y));
  return y;
}

Parameters Regressor::parameters() const {
  Parameters all;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    append_parameters(all, layers_.size() == 1 ? "fc" : fmt::format("fc{}", i + 1),
                      layers_[i].parameters());
  }
  return all;
}

}  // namespace mpitron::nn
