// The sizes of a GPT-2-style byte-level language model and the list of its parameters with
// their full shapes and tensor-parallel layouts. The model (Radford et al., "Language Models are
// Unsupervised Multitask Learners", 2019; the nanoGPT layout, bias everywhere, no dropout):
//   x = wte[idx] + wpe[pos];  per block x = x + attn(ln_1(x)); x = x + mlp(ln_2(x));
//   logits = ln_f(x) wte^T (the LM head is tied to the token embedding); mean cross-entropy.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nn/parameter.h"

namespace mpitron::nn {

/// Model sizes. `block_size` is the length of the position table (the longest sequence).
struct GptConfig {
  std::int64_t vocab = 256;
  std::int64_t block_size = 128;
  std::int64_t layers = 4;
  std::int64_t hidden = 256;
  std::int64_t heads = 8;
};

/// The message of the first size rule `config` breaks for (tp, pp), or nothing: every size
/// >= 1, hidden divisible by heads, heads and vocab divisible by tp, layers divisible by pp.
std::optional<std::string> gpt_size_error(const GptConfig& config, int tp, int pp);

/// Model FLOPs of one training step per token of a sequence of `seq` tokens (forward and
/// backward; the PaLM paper's estimate, Chowdhery et al. 2022, appendix B): 6 N + 12 L C seq,
/// where N = 12 L C^2 + vocab C counts the weights of the block matmuls and the LM head (biases,
/// LayerNorms and the embedding gathers are left out) and the second term is attention's scores
/// and weighted sum over the whole (unmasked) sequence.
double gpt_flops_per_token(const GptConfig& config, std::int64_t seq);

/// A rough count of the bytes one rank holds during a training step at (tp, pp), to reject
/// sizes that cannot fit before anything is allocated (not an accounting): its share of the
/// parameters, their gradients and two AdamW moments (4 copies of layers (12 C^2 + 13 C) / (tp
/// pp) plus the (vocab + block_size) x C embeddings / tp), and the activations kept for
/// backward by `in_flight` micro-batches of `micro_batch` sequences of `seq` tokens on its
/// layers / pp blocks: per block s b C (34 + 5 a s / C) bytes in half precision (Korthikanti
/// et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", section 4.1),
/// scaled by dtype_bytes / 2 and divided by tp. With `recompute` (GptStage::set_recompute) a
/// block keeps only its input, s b C dtype_bytes, and one block's activations exist at a time.
/// Sizes must pass gpt_size_error first.
double gpt_step_memory_bytes(const GptConfig& config, int tp, int pp, std::int64_t micro_batch,
                             std::int64_t seq, std::int64_t in_flight, std::size_t dtype_bytes,
                             bool recompute = false);

/// One parameter of the whole (unsharded) model.
struct ParameterSpec {
  std::string name;        ///< e.g. "transformer.h.0.attn.q.weight"
  Shape full_shape;        ///< e.g. [hidden, hidden]
  int split_dim;           ///< kReplicated or the dim cut over TP (see Parameter)
  bool is_block = false;   ///< belongs to transformer.h.{layer}
  std::int64_t layer = 0;  ///< the block index when is_block
};

/// Every parameter in canonical order (wte, wpe, then per block ln_1, attn.q/k/v, attn.c_proj,
/// ln_2, mlp.c_fc, mlp.c_proj, then ln_f): names and full shapes as in
/// tools/torch_peer_gpt.py except that c_attn is kept as separate q, k and v [C, C].
/// Column-parallel weights and biases (q, k, v, c_fc) and the vocab-parallel wte split dim 0,
/// row-parallel weights (c_proj) dim 1; LayerNorms, wpe and row-parallel biases are replicated.
std::vector<ParameterSpec> gpt_parameter_specs(const GptConfig& config);

/// The full (unsharded) value of one parameter, given its spec: how a model is initialised,
/// loaded from a checkpoint or from golden values. Every rank calls it for the parameters of
/// its stage and slices its TP shard, so the model never depends on the topology.
using MasterInit = std::function<Tensor(const ParameterSpec& spec)>;

/// GPT-2's initialisation: weights and embeddings N(0, 0.02), residual projections (c_proj
/// weights) N(0, 0.02 / sqrt(2 layers)), biases 0, LayerNorm weight 1 and bias 0. Each tensor
/// comes from its own counter-based stream (seed mixed with the parameter's name), so its
/// values do not depend on the topology or on which other parameters exist.
MasterInit gpt2_init(std::uint64_t seed, std::int64_t layers, DType dtype, Device device);

/// Like gpt2_init, but every bias (LayerNorm biases included) ~ N(0, 0.1^2) and LayerNorm
/// weights ~ 1 + N(0, 0.1^2), and matrices [rows, cols] N(0, 1/cols): every parameter is
/// non-trivial and activations are not tiny, so checks see every term of every gradient.
MasterInit random_init(std::uint64_t seed, DType dtype, Device device);

}  // namespace mpitron::nn
