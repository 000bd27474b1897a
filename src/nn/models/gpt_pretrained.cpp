#include "nn/models/gpt_pretrained.h"

#include <fmt/format.h>

#include <stdexcept>

namespace mpitron::nn {

Gpt2Weights gpt2_weights_of(const GptConfig& config, const std::map<std::string, Tensor>& full) {
  const auto wte = full.find("transformer.wte.weight");
  if (wte == full.end() || !wte->second.defined() || wte->second.ndim() != 2) {
    throw std::invalid_argument("gpt2_weights_of: no transformer.wte.weight [Vp, C]");
  }
  Gpt2Sizes sizes{.max_t = config.block_size,
                  .vocab = config.vocab,
                  .padded_vocab = wte->second.size(0),
                  .layers = config.layers,
                  .heads = config.heads,
                  .hidden = config.hidden};
  return {sizes, full};
}

MasterInit pretrained_init(const Gpt2Weights& weights, DType dtype, Device device) {
  return [&weights, dtype, device](const ParameterSpec& spec) {
    const auto it = weights.tensors.find(spec.name);
    if (it == weights.tensors.end()) {
      throw std::invalid_argument(fmt::format("pretrained_init: no tensor '{}'", spec.name));
    }
    Tensor full = it->second;
    if (spec.name == "transformer.wte.weight") {
      full = fit_vocab_rows(full, weights.sizes.vocab, spec.full_shape[0]);
    }
    if (full.shape() != spec.full_shape) {
      throw std::invalid_argument(
          fmt::format("pretrained_init: tensor '{}' has shape {}, the model {}", spec.name,
                      autograd::to_string(full.shape()), autograd::to_string(spec.full_shape)));
    }
    if (full.dtype() == dtype) return full.to(device);
    return Tensor::from_vector(full.to_vector(), full.shape(), dtype, device);
  };
}

}  // namespace mpitron::nn
