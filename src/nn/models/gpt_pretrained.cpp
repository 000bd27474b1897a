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

GptConfig gpt_config_of(const HfLlamaConfig& c) {
  GptConfig config{c.vocab, c.max_positions, c.layers, c.hidden, c.heads};
  config.arch = Arch::llama;
  config.kv_heads = c.kv_heads;
  config.ffn_hidden = c.ffn_hidden;
  config.norm_eps = c.norm_eps;
  config.rope_theta = c.rope_theta;
  config.rope_scaling = c.rope_scaling;
  config.tied_embeddings = c.tied_embeddings;
  return config;
}

HfLlamaConfig hf_llama_config_of(const GptConfig& c) {
  if (!c.llama()) throw std::invalid_argument("hf_llama_config_of: the model is not llama");
  HfLlamaConfig config;
  config.vocab = c.vocab;
  config.hidden = c.hidden;
  config.layers = c.layers;
  config.heads = c.heads;
  config.kv_heads = c.kv_head_count();
  config.ffn_hidden = c.ffn_size();
  config.max_positions = c.block_size;
  config.norm_eps = c.norm_eps;
  config.rope_theta = c.rope_theta;
  config.tied_embeddings = c.tied_embeddings;
  config.rope_scaling = c.rope_scaling;
  return config;
}

Gpt2Weights pretrained_weights_of(const HfLlamaWeights& weights) {
  Gpt2Weights result = gpt2_weights_of(gpt_config_of(weights.config), weights.tensors);
  result.stored_bfloat16 = weights.stored_bfloat16;
  return result;
}

MasterInit pretrained_init(const Gpt2Weights& weights, DType dtype, Device device) {
  return [&weights, dtype, device](const ParameterSpec& spec) {
    const auto it = weights.tensors.find(spec.name);
    if (it == weights.tensors.end()) {
      throw std::invalid_argument(fmt::format("pretrained_init: no tensor '{}'", spec.name));
    }
    Tensor full = it->second;
    if (spec.used_rows != 0) full = fit_vocab_rows(full, weights.sizes.vocab, spec.full_shape[0]);
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
