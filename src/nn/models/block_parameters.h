// The one place that names a decoder block's parameters and says what each one is: the specs of
// block `layer` (its part of gpt_parameter_specs), the full tensors a block is built from, by
// part, and the names of a built block's shards. The block (transformer_block.h) builds its
// layers from parts and names nothing, so another family of the same decoder (other parts, no
// biases, a gated MLP) changes this file and its config, not a copy of the block
// (docs/architecture.md, "One decoder, several families").
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layers/attention.h"
#include "nn/layers/mlp.h"
#include "nn/models/gpt_config.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// The specs of block `layer`, named "transformer.h.{layer}.<part>", in canonical order (GPT-2
/// in nanoGPT's layout, its c_attn kept as separate q, k and v; C hidden):
/// ln_1.weight and .bias [C] (replicated); attn.q, attn.k and attn.v: weight [C, C] and bias [C]
/// (column-parallel, split dim 0); attn.c_proj: weight [C, C] (row-parallel, dim 1) and bias [C]
/// (replicated); ln_2 as ln_1; mlp.c_fc: weight [4C, C] and bias [4C] (dim 0); mlp.c_proj:
/// weight [C, 4C] (dim 1) and bias [C] (replicated). llama, without biases (F ffn_size, K
/// kv_head_count head_dim): ln_1.weight [C], attn.q.weight [C, C], attn.k.weight and
/// attn.v.weight [K, C] (dim 0), attn.c_proj.weight [C, C] (dim 1), ln_2.weight [C],
/// mlp.gate.weight and mlp.up.weight [F, C] (dim 0), mlp.c_proj.weight [C, F] (the down
/// projection, dim 1).
std::vector<ParameterSpec> block_parameter_specs(const GptConfig& config, std::int64_t layer);

/// A norm's full weight and bias [hidden] (no bias: RMSNorm).
struct NormWeights {
  Tensor weight, bias;
};

/// The full tensors of one block, by part.
struct BlockMasters {
  NormWeights norm_1;  ///< before the attention (ln_1)
  AttentionWeights attention;
  NormWeights norm_2;  ///< before the MLP (ln_2)
  MlpWeights mlp;      ///< fc1: c_fc (llama: up), fc2: c_proj, gate (llama)
};

/// The full tensors `init` returns for the specs of block `layer`, by part.
BlockMasters block_masters(const GptConfig& config, std::int64_t layer, const MasterInit& init);

/// The parameters of block `layer` named as block_parameter_specs names them, in its order, from
/// the parameters of its parts as their layers name them (a norm's "weight" and "bias"; the
/// attention's "q.weight" ... "out.bias"; the MLP's "gate.weight", "fc1.weight" ... "fc2.bias");
/// layouts kept.
Parameters block_parameters(const GptConfig& config, std::int64_t layer, const Parameters& norm_1,
                            const Parameters& attention, const Parameters& norm_2,
                            const Parameters& mlp);

}  // namespace mpitron::nn
