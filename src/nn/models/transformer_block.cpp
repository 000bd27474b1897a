#include "nn/models/transformer_block.h"

#include <fmt/format.h>

#include <stdexcept>

#include "autograd/ops.h"

namespace mpitron::nn {

namespace {

// The full tensors of block `layer`, by their name inside the block ("attn.q.weight", ...).
std::map<std::string, Tensor> block_masters(const GptConfig& config, std::int64_t layer,
                                            const MasterInit& init, int tp) {
  if (const auto error = gpt_size_error(config, tp, 1)) throw std::invalid_argument(*error);
  const std::string prefix = fmt::format("transformer.h.{}.", layer);
  std::map<std::string, Tensor> masters;
  for (const ParameterSpec& spec : gpt_parameter_specs(config)) {
    if (spec.is_block && spec.layer == layer) {
      masters[spec.name.substr(prefix.size())] = init(spec);
    }
  }
  return masters;
}

LinearWeights linear_of(const std::map<std::string, Tensor>& m, const std::string& name) {
  return {m.at(name + ".weight"), m.at(name + ".bias")};
}

// Renames the first component of every parameter name: {"out", "c_proj"} turns "out.weight"
// into "c_proj.weight".
Parameters renamed(Parameters parameters, const std::map<std::string, std::string>& names) {
  for (Parameter& p : parameters) {
    const std::size_t dot = p.name.find('.');
    const auto it = names.find(p.name.substr(0, dot));
    if (it != names.end()) p.name = it->second + p.name.substr(dot);
  }
  return parameters;
}

}  // namespace

LayerNorm::LayerNorm(const Tensor& weight, const Tensor& bias, bool sequence_parallel)
    : weight_(replicate(weight)), bias_(replicate(bias)), sequence_parallel_(sequence_parallel) {}

Tensor LayerNorm::forward(const Tensor& x) const {
  return autograd::layer_norm(x, weight_, bias_, 1e-5);
}

Parameters LayerNorm::parameters() const {
  return {{"weight", weight_, kReplicated, false, sequence_parallel_},
          {"bias", bias_, kReplicated, false, sequence_parallel_}};
}

TransformerBlock::TransformerBlock(const GptConfig& config, std::int64_t layer,
                                   const MasterInit& init, const comm::Communicator& tp,
                                   bool sequence_parallel)
    : TransformerBlock(layer, config.heads, config.gelu,
                       block_masters(config, layer, init, tp.size()), tp, sequence_parallel) {}

TransformerBlock::TransformerBlock(std::int64_t layer, std::int64_t heads, GeluForm gelu, Masters m,
                                   const comm::Communicator& tp, bool sequence_parallel)
    : layer_(layer),
      ln_1_(m.at("ln_1.weight"), m.at("ln_1.bias"), sequence_parallel),
      attn_({linear_of(m, "attn.q"), linear_of(m, "attn.k"), linear_of(m, "attn.v"),
             linear_of(m, "attn.c_proj")},
            heads, tp, /*causal=*/true, sequence_parallel),
      ln_2_(m.at("ln_2.weight"), m.at("ln_2.bias"), sequence_parallel),
      mlp_({linear_of(m, "mlp.c_fc"), linear_of(m, "mlp.c_proj")}, tp, gelu, sequence_parallel) {}

Tensor TransformerBlock::forward(const Tensor& x) const {
  const Tensor h = autograd::add(x, attn_.forward(ln_1_.forward(x)));
  return autograd::add(h, mlp_.forward(ln_2_.forward(h)));
}

Parameters TransformerBlock::parameters() const {
  Parameters all;
  const std::string prefix = fmt::format("transformer.h.{}", layer_);
  append_parameters(all, prefix + ".ln_1", ln_1_.parameters());
  append_parameters(all, prefix + ".attn", renamed(attn_.parameters(), {{"out", "c_proj"}}));
  append_parameters(all, prefix + ".ln_2", ln_2_.parameters());
  append_parameters(all, prefix + ".mlp",
                    renamed(mlp_.parameters(), {{"fc1", "c_fc"}, {"fc2", "c_proj"}}));
  return all;
}

}  // namespace mpitron::nn
