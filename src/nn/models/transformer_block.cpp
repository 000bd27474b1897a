#include "nn/models/transformer_block.h"

#include <stdexcept>

#include "autograd/ops.h"

namespace mpitron::nn {

namespace {

// block_masters, after the sizes are checked for `tp` ranks.
// The attention's heads under `config`: RoPE for llama.
AttentionHeads attention_shape(const GptConfig& config) {
  return {config.heads, config.kv_head_count(),
          config.llama() ? config.rope() : kernels::RopeFrequencies(0.0)};
}

BlockMasters checked_block_masters(const GptConfig& config, std::int64_t layer,
                                   const MasterInit& init, int tp) {
  if (const auto error = gpt_size_error(config, tp, 1)) throw std::invalid_argument(*error);
  return block_masters(config, layer, init);
}

}  // namespace

Norm::Norm(const Tensor& weight, const Tensor& bias, double eps, bool sequence_parallel)
    : weight_(replicate(weight)),
      bias_(bias.defined() ? replicate(bias) : Tensor()),
      eps_(eps),
      sequence_parallel_(sequence_parallel) {}

Tensor Norm::forward(const Tensor& x) const {
  if (!bias_.defined()) return autograd::rms_norm(x, weight_, eps_);
  return autograd::layer_norm(x, weight_, bias_, eps_);
}

Parameters Norm::parameters() const {
  Parameters all{{"weight", weight_, kReplicated, false, sequence_parallel_}};
  if (bias_.defined()) all.push_back({"bias", bias_, kReplicated, false, sequence_parallel_});
  return all;
}

TransformerBlock::TransformerBlock(const GptConfig& config, std::int64_t layer,
                                   const MasterInit& init, const comm::Communicator& tp,
                                   bool sequence_parallel, const ContextParallel& cp)
    : TransformerBlock(config, layer, checked_block_masters(config, layer, init, tp.size()), tp,
                       sequence_parallel, cp) {}

TransformerBlock::TransformerBlock(const GptConfig& config, std::int64_t layer,
                                   const BlockMasters& m, const comm::Communicator& tp,
                                   bool sequence_parallel, const ContextParallel& cp)
    : config_(config),
      layer_(layer),
      ln_1_(m.norm_1.weight, m.norm_1.bias, config.norm_eps, sequence_parallel),
      attn_(m.attention, attention_shape(config), tp, /*causal=*/true, sequence_parallel, cp),
      ln_2_(m.norm_2.weight, m.norm_2.bias, config.norm_eps, sequence_parallel),
      mlp_(m.mlp, tp, config.gelu, sequence_parallel) {}

Tensor TransformerBlock::forward(const Tensor& x) const {
  const Tensor h = autograd::add(x, attn_.forward(ln_1_.forward(x)));
  return autograd::add(h, mlp_.forward(ln_2_.forward(h)));
}

Parameters TransformerBlock::parameters() const {
  return block_parameters(config_, layer_, ln_1_.parameters(), attn_.parameters(),
                          ln_2_.parameters(), mlp_.parameters());
}

}  // namespace mpitron::nn
