#include "nn/models/gpt_pretrained.h"

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

}  // namespace mpitron::nn
