#include "nn/models/gpt_reference.h"

#include <fmt/format.h>

#include <vector>

#include "autograd/ops.h"
#include "nn/layers/attention.h"

namespace mpitron::nn {

namespace {

Tensor layer_norm(const TensorMap& p, const std::string& name, const Tensor& x) {
  return autograd::layer_norm(x, p.at(name + ".weight"), p.at(name + ".bias"), 1e-5);
}

Tensor linear(const TensorMap& p, const std::string& name, const Tensor& x) {
  return autograd::linear(x, p.at(name + ".weight"), p.at(name + ".bias"));
}

}  // namespace

TensorMap dense_gpt_parameters(const GptConfig& config, const MasterInit& init) {
  TensorMap parameters;
  for (const ParameterSpec& spec : gpt_parameter_specs(config)) {
    parameters[spec.name] = init(spec).detach().set_requires_grad();
  }
  return parameters;
}

Tensor dense_gpt_block(const TensorMap& p, std::int64_t layer, std::int64_t heads,
                       const Tensor& input, GeluForm gelu) {
  const std::string h = fmt::format("transformer.h.{}.", layer);
  const Tensor a = layer_norm(p, h + "ln_1", input);
  const Tensor context =
      unfused_attention_core(linear(p, h + "attn.q", a), linear(p, h + "attn.k", a),
                             linear(p, h + "attn.v", a), heads, /*causal=*/true);
  const Tensor x = autograd::add(input, linear(p, h + "attn.c_proj", context));
  const Tensor m = autograd::gelu(linear(p, h + "mlp.c_fc", layer_norm(p, h + "ln_2", x)), gelu);
  return autograd::add(x, linear(p, h + "mlp.c_proj", m));
}

Tensor dense_gpt_loss(const GptConfig& config, const TensorMap& p, const Tensor& tokens,
                      const Tensor& targets) {
  const std::int64_t batch = tokens.size(0), seq = tokens.size(1);
  std::vector<std::int64_t> positions(static_cast<std::size_t>(batch * seq));
  for (std::size_t i = 0; i < positions.size(); ++i)
    positions[i] = static_cast<std::int64_t>(i) % seq;
  Tensor x = autograd::add(
      autograd::embedding(p.at("transformer.wte.weight"), tokens),
      autograd::embedding(p.at("transformer.wpe.weight"),
                          Tensor::from_indices(positions, {batch, seq}, tokens.device())));
  for (std::int64_t layer = 0; layer < config.layers; ++layer)
    x = dense_gpt_block(p, layer, config.heads, x, config.gelu);
  // Only the vocabulary's rows of a padded embedding make logits.
  const Tensor logits =
      autograd::linear(layer_norm(p, "transformer.ln_f", x),
                       autograd::narrow(p.at("transformer.wte.weight"), 0, 0, config.vocab));
  return autograd::cross_entropy(logits, targets);
}

}  // namespace mpitron::nn
