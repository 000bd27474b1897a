// One decoder block, tensor-parallel: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)), with causal
// multi-head attention (heads split over TP) and the TP MLP (column-parallel c_fc, GELU in the
// config's form, row-parallel c_proj); for a llama config RMSNorms, grouped-query attention with
// RoPE, and the SwiGLU MLP (gate and up column-parallel, down row-parallel), without biases.
// Radford et al. 2019 (pre-LayerNorm residual blocks); Shoeybi et al., "Megatron-LM",
// arXiv:1909.08053, sec. 3. LayerNorm parameters are replicated on every TP rank; their gradients
// come out equal on every TP rank without any reduction, because their inputs and output gradients
// are. With sequence parallelism (Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2) the
// block's input, output, LayerNorms and residual adds hold this rank's seq/tp rows; the LayerNorm
// and row-parallel bias gradients then are partial sums that finalize_gradients sums over TP.
#pragma once

#include <cstdint>

#include "comm/communicator.h"
#include "nn/layers/attention.h"
#include "nn/layers/mlp.h"
#include "nn/models/block_parameters.h"
#include "nn/models/gpt_config.h"

namespace mpitron::nn {

/// A block's normalization over the last dim, replicated over TP: LayerNorm with weight and
/// bias [hidden] (Ba, Kiros & Hinton, arXiv:1607.06450; gpt2), or RMSNorm with weight only
/// (Zhang & Sennrich, arXiv:1910.07467; llama) when `bias` is undefined.
class Norm {
 public:
  /// Copies of the full `weight` and `bias` [hidden] (or no bias: RMSNorm) as parameters, with
  /// epsilon `eps`; `sequence_parallel` marks them Parameter::sequence_parallel (the norm sees
  /// this rank's seq/tp rows only).
  Norm(const Tensor& weight, const Tensor& bias, double eps, bool sequence_parallel = false);
  /// x [..., hidden] -> [..., hidden].
  Tensor forward(const Tensor& x) const;
  /// "weight", and "bias" for a LayerNorm (replicated).
  Parameters parameters() const;

 private:
  Tensor weight_, bias_;
  double eps_;
  bool sequence_parallel_;
};

/// Block `layer` of a GPT over the TP communicator `tp`.
class TransformerBlock {
 public:
  /// Builds the block from the full tensors `init` returns for its parameters
  /// (block_parameter_specs) and keeps this rank's shards. Throws
  /// std::invalid_argument when gpt_size_error(config, tp.size(), 1) reports one. With `cp` of
  /// size > 1 the block sees the zigzag shard of rank cp.rank() (ParallelMultiHeadAttention).
  TransformerBlock(const GptConfig& config, std::int64_t layer, const MasterInit& init,
                   const comm::Communicator& tp, bool sequence_parallel = false,
                   const ContextParallel& cp = {});
  /// x [batch, seq, hidden] (identical on every TP rank) -> [batch, seq, hidden]; with sequence
  /// parallelism this rank's rows [batch, seq/tp, hidden] -> [batch, seq/tp, hidden] (the
  /// attention all-gathers the sequence); under context parallelism seq is the shard's seq/cp.
  /// Throws std::invalid_argument as the mappings do.
  Tensor forward(const Tensor& x) const;
  /// This rank's shards named as in block_parameter_specs ("transformer.h.0.attn.q.weight",
  /// ...), in that order, with their layouts.
  Parameters parameters() const;

 private:
  TransformerBlock(const GptConfig& config, std::int64_t layer, const BlockMasters& masters,
                   const comm::Communicator& tp, bool sequence_parallel, const ContextParallel& cp);

  GptConfig config_;
  std::int64_t layer_;
  Norm ln_1_;
  ParallelMultiHeadAttention attn_;
  Norm ln_2_;
  ParallelMlp mlp_;
};

}  // namespace mpitron::nn
