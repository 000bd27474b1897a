#include "nn/models/gpt_reference.h"

#include <fmt/format.h>

#include <stdexcept>
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

// x through autograd::round_through_bf16 where `round`, else x.
Tensor rounded_if(bool round, const Tensor& x) {
  return round ? autograd::round_through_bf16(x) : x;
}

// A linear layer whose product is rounded where `round_tp` says (an output projection where the
// TP group sums the row-parallel partial products in bfloat16; GPT-2's fc1 under --bf16), then
// its bias, if it has one.
Tensor output_projection(const TensorMap& p, const std::string& name, const Tensor& x,
                         bool round_tp) {
  const Tensor product = rounded_if(round_tp, autograd::linear(x, p.at(name + ".weight")));
  const auto bias = p.find(name + ".bias");
  return bias == p.end() ? product : autograd::add(product, bias->second);
}

// Causal attention of the dense blocks: the unfused composition, independent of the fused kernel
// the model runs; where `round_stored` (the bfloat16 reference) the fused kernel itself, whose
// bfloat16 arithmetic (its products' operands rounded, FlashAttention-2's, and its output kept
// rounded for backward) the model runs too, and which its own tests check against float32
// attention and PyTorch (tests/kernels/test_attention.cpp, gpt_train_bf16.json).
Tensor dense_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads,
                       bool round_stored) {
  return round_stored ? multi_head_attention_core(q, k, v, heads, /*causal=*/true)
                      : unfused_attention_core(q, k, v, heads, /*causal=*/true);
}

// x read as bfloat16 (autograd::read_as_bf16) where `round`, else x.
Tensor read_as_bf16_if(bool round, const Tensor& x) {
  return round ? autograd::read_as_bf16(x) : x;
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
                       const Tensor& input, GeluForm gelu, bool round_tp, bool round_stored) {
  const std::string h = fmt::format("transformer.h.{}.", layer);
  const Tensor a = rounded_if(round_tp, layer_norm(p, h + "ln_1", input));
  const auto project = [&](const char* name) {
    return read_as_bf16_if(round_stored, linear(p, h + name, a));
  };
  const Tensor context =
      dense_attention(project("attn.q"), project("attn.k"), project("attn.v"), heads, round_stored);
  const Tensor x = autograd::add(input, output_projection(p, h + "attn.c_proj", context, round_tp));
  const Tensor normed = rounded_if(round_tp, layer_norm(p, h + "ln_2", x));
  const Tensor m = autograd::gelu(output_projection(p, h + "mlp.c_fc", normed, round_stored), gelu);
  return autograd::add(x, output_projection(p, h + "mlp.c_proj", m, round_tp));
}

Tensor dense_llama_block(const GptConfig& c, const TensorMap& p, std::int64_t layer,
                         const Tensor& input, bool round_tp, bool round_stored) {
  const std::string h = fmt::format("transformer.h.{}.", layer);
  const auto weight = [&p, &h](const std::string& name) { return p.at(h + name + ".weight"); };
  const std::int64_t kv = c.kv_head_count();
  const Tensor a = rounded_if(round_tp, autograd::rms_norm(input, weight("ln_1"), c.norm_eps));
  const auto read = [round_stored](const Tensor& x) { return read_as_bf16_if(round_stored, x); };
  const Tensor q = read(rotary_heads(autograd::linear(a, weight("attn.q")), c.heads, c.rope()));
  const Tensor k = read(rotary_heads(autograd::linear(a, weight("attn.k")), kv, c.rope()));
  const Tensor v = read(autograd::linear(a, weight("attn.v")));
  const Tensor context =
      dense_attention(q, repeat_kv_heads(k, kv, c.heads / kv), repeat_kv_heads(v, kv, c.heads / kv),
                      c.heads, round_stored);
  const Tensor x = autograd::add(input, output_projection(p, h + "attn.c_proj", context, round_tp));
  const Tensor m = rounded_if(round_tp, autograd::rms_norm(x, weight("ln_2"), c.norm_eps));
  const Tensor gated = autograd::swiglu(autograd::linear(m, weight("mlp.gate")),
                                        autograd::linear(m, weight("mlp.up")));
  return autograd::add(x, output_projection(p, h + "mlp.c_proj", gated, round_tp));
}

Tensor dense_gpt_loss(const GptConfig& config, const TensorMap& p, const Tensor& tokens,
                      const Tensor& targets, const DenseBf16Rounding& bf16) {
  const std::int64_t wire_blocks = bf16.wire_blocks;
  if (wire_blocks < 0) {
    throw std::invalid_argument(
        fmt::format("dense_gpt_loss: bf16 wire_blocks {} is negative", wire_blocks));
  }
  const std::int64_t batch = tokens.size(0), seq = tokens.size(1);
  Tensor x =
      rounded_if(bf16.tp_collectives, autograd::embedding(p.at("transformer.wte.weight"), tokens));
  if (!config.llama()) {
    std::vector<std::int64_t> positions(static_cast<std::size_t>(batch * seq));
    for (std::size_t i = 0; i < positions.size(); ++i)
      positions[i] = static_cast<std::int64_t>(i) % seq;
    x = autograd::add(
        x, autograd::embedding(p.at("transformer.wpe.weight"),
                               Tensor::from_indices(positions, {batch, seq}, tokens.device())));
  }
  for (std::int64_t layer = 0; layer < config.layers; ++layer) {
    x = config.llama()
            ? dense_llama_block(config, p, layer, x, bf16.tp_collectives, bf16.stored_activations)
            : dense_gpt_block(p, layer, config.heads, x, config.gelu, bf16.tp_collectives,
                              bf16.stored_activations);
    const bool stage_boundary =
        wire_blocks > 0 && (layer + 1) % wire_blocks == 0 && layer + 1 < config.layers;
    x = rounded_if(stage_boundary, x);
  }
  const Tensor normed = rounded_if(
      bf16.tp_collectives,
      config.llama() ? autograd::rms_norm(x, p.at("transformer.ln_f.weight"), config.norm_eps)
                     : layer_norm(p, "transformer.ln_f", x));
  // Only the vocabulary's rows of a padded embedding make logits.
  const Tensor& head = p.at(config.tied_embeddings ? "transformer.wte.weight" : kUntiedHead);
  const Tensor logits =
      rounded_if(bf16.stored_activations,
                 autograd::linear(normed, autograd::narrow(head, 0, 0, config.vocab)));
  return autograd::cross_entropy(logits, targets);
}

}  // namespace mpitron::nn
