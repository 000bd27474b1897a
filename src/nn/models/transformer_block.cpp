#include "nn/models/transformer_block.h"

#include <stdexcept>

#include "autograd/ops.h"

namespace mpitron::nn {

namespace {

// block_masters, after the sizes are checked for `tp` ranks.
BlockMasters checked_block_masters(const GptConfig& config, std::int64_t layer,
                                   const MasterInit& init, int tp) {
  if (const auto error = gpt_size_error(config, tp, 1)) throw std::invalid_argument(*error);
  return block_masters(config, layer, init);
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
    : TransformerBlock(config, layer, checked_block_masters(config, layer, init, tp.size()), tp,
                       sequence_parallel) {}

TransformerBlock::TransformerBlock(const GptConfig& config, std::int64_t layer,
                                   const BlockMasters& m, const comm::Communicator& tp,
                                   bool sequence_parallel)
    : layer_(layer),
      ln_1_(m.norm_1.weight, m.norm_1.bias, sequence_parallel),
      attn_(m.attention, config.heads, tp, /*causal=*/true, sequence_parallel),
      ln_2_(m.norm_2.weight, m.norm_2.bias, sequence_parallel),
      mlp_(m.mlp, tp, config.gelu, sequence_parallel) {}

Tensor TransformerBlock::forward(const Tensor& x) const {
  const Tensor h = autograd::add(x, attn_.forward(ln_1_.forward(x)));
  return autograd::add(h, mlp_.forward(ln_2_.forward(h)));
}

Parameters TransformerBlock::parameters() const {
  return block_parameters(layer_, ln_1_.parameters(), attn_.parameters(), ln_2_.parameters(),
                          mlp_.parameters());
}

}  // namespace mpitron::nn
