// The sizes of a GPT-2-style language model and the list of its parameters with their full
// shapes and tensor-parallel layouts. The model (Radford et al., "Language Models are
// Unsupervised Multitask Learners", 2019; the nanoGPT layout, bias everywhere, no dropout):
//   x = wte[idx] + wpe[pos];  per block x = x + attn(ln_1(x)); x = x + mlp(ln_2(x));
//   logits = ln_f(x) wte^T (the LM head is tied to the token embedding); mean cross-entropy.
// The token embedding may have more rows than the vocabulary (llm.c's padded vocabulary Vp):
// the padding rows are zero, no token uses them, and their logits take no part in the softmax,
// the loss or the gradient, so the model computes the same function at any padding.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/rope.h"
#include "nn/parameter.h"

namespace mpitron::nn {

using kernels::GeluForm;

/// The decoder family (docs/architecture.md, "One decoder, several families"). gpt2: LayerNorm
/// with weight and bias, a learned position table, a GELU MLP [4C], biases everywhere, the LM
/// head tied to the token embedding. llama (Touvron et al., "LLaMA", arXiv:2302.13971, sec.
/// 2.2; Hugging Face transformers' modeling_llama): RMSNorm with weight only, rotary position
/// embedding (RoPE) on q and k, a SwiGLU MLP [ffn_hidden], grouped-query attention with
/// kv_heads key/value heads (Ainslie et al., "GQA", arXiv:2305.13245), no biases, the LM head
/// tied or a separate lm_head.
enum class Arch { gpt2, llama };

/// Model sizes and the family's choices. `block_size` is the longest sequence (the length of
/// GPT-2's position table).
struct GptConfig {
  std::int64_t vocab = 256;  ///< V, the token ids [0, V)
  std::int64_t block_size = 128;
  std::int64_t layers = 4;
  std::int64_t hidden = 256;
  std::int64_t heads = 8;
  std::int64_t padded_vocab = 0;    ///< Vp >= V, the rows of wte; 0: V (no padding)
  GeluForm gelu = GeluForm::exact;  ///< the MLP's GELU: exact (erf) or GPT-2's tanh form
  Arch arch = Arch::gpt2;           ///< the decoder family
  std::int64_t kv_heads = 0;        ///< key/value heads (llama); 0: heads
  std::int64_t ffn_hidden = 0;      ///< the SwiGLU MLP's inner size (llama); 0: 4 hidden
  double norm_eps = 1e-5;           ///< the LayerNorm's or RMSNorm's epsilon
  double rope_theta = 10000.0;      ///< RoPE's base (llama; Llama 2 10000, Llama 3 500000)
  bool tied_embeddings = true;      ///< the LM head is the token embedding (gpt2: always)
  /// Llama 3's rope_scaling (llama; factor 0: none): Llama 3.1 and 3.2 (kernels/rope.h).
  kernels::Llama3RopeScaling rope_scaling{};

  /// The rows of the token embedding and the columns of the logits: Vp, or V without padding.
  std::int64_t vocab_rows() const { return padded_vocab > 0 ? padded_vocab : vocab; }
  /// Key/value heads: kv_heads, or heads (multi-head attention).
  std::int64_t kv_head_count() const { return kv_heads > 0 ? kv_heads : heads; }
  /// The MLP's inner size: ffn_hidden, or 4 hidden.
  std::int64_t ffn_size() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  bool llama() const { return arch == Arch::llama; }
  /// RoPE's frequencies: rope_theta with rope_scaling.
  kernels::RopeFrequencies rope() const { return {rope_theta, rope_scaling}; }
};

/// "gpt2" or "llama"; and back (otherwise std::invalid_argument "--arch 'x' is not one of:
/// gpt2, llama").
const char* to_string(Arch arch);
Arch arch_from_string(const std::string& name);

/// The padded vocabulary Vp for `vocab` at tensor-parallel degree `tp`: the smallest multiple of
/// lcm(128, tp) that is >= vocab (50257 -> 50304 at tp 1, 2, 4, 8; 256 -> 256 at tp 1..128 that
/// divide 128; 256 -> 384 at tp 3). A multiple of 128, as llm.c pads GPT-2's vocabulary for its
/// GEMMs, that tp divides, so every rank holds Vp / tp rows. Throws std::invalid_argument when
/// vocab or tp < 1.
std::int64_t padded_vocab_size(std::int64_t vocab, int tp);

/// A model's sizes and choices by name, from each model's published config.json:
/// - GPT-2 (Radford et al. 2019, table 2): gpt2 (124M: 12 layers, hidden 768, 12 heads),
///   gpt2-medium (350M: 24, 1024, 16), gpt2-large (774M: 36, 1280, 20), gpt2-xl (1558M: 48,
///   1600, 25); all with vocab 50257, block size 1024 and the tanh GELU.
/// - the llama family (RMSNorm eps 1e-5): smollm-135m (30 layers, hidden 576, 9 heads, 3 kv
///   heads, ffn 1536, vocab 49152, tied, block 2048, theta 10000), smollm2-360m (32, 960, 15, 5,
///   2560, 49152, tied, 8192, 100000), tinyllama-1.1b (22, 2048, 32, 4, 5632, 32000, untied,
///   2048, 10000), llama-3.2-1b (16, 2048, 32, 8, 8192, 128256, tied, 131072, 500000, with
///   rope_scaling llama3: factor 32, low 1, high 4, original 8192), llama-3-8b (32, 4096, 32,
///   8, 14336, 128256, untied, 8192, 500000).
/// Nothing for another name.
std::optional<GptConfig> model_preset(const std::string& name);

/// The names model_preset knows, comma-separated, for messages and --help.
const char* model_preset_names();

/// "erf" or "tanh"; and back (otherwise std::invalid_argument "GELU form '<name>' is not one of:
/// erf, tanh").
const char* to_string(GeluForm form);
GeluForm gelu_form_from_string(const std::string& name);

/// The message of the first size rule `config` breaks for (tp, pp) with `virtual_stages` model
/// chunks per stage, or nothing: every size >= 1, hidden divisible by heads, heads divisible by
/// tp, heads divisible by the key/value heads and those by tp (whole key/value heads per rank:
/// mpitron does not replicate them as Megatron-LM does when kv heads < tp), an even head size
/// for RoPE and the MLP's inner size divisible by tp (llama), padded_vocab 0 or >= vocab, the
/// embedding's rows (vocab_rows) divisible by tp, layers divisible by pp ("layers 6 is not
/// divisible by pp 4") and by pp x virtual_stages ("layers 4 is not divisible by pp 2 x 4
/// virtual stages"); a finite positive norm eps and RoPE theta, and a rope_scaling that
/// kernels::rope_error accepts.
std::optional<std::string> gpt_size_error(const GptConfig& config, int tp, int pp,
                                          int virtual_stages = 1);

/// `wte` [rows, C] refitted to `rows_wanted` rows: its first `vocab` rows, then zero rows (a
/// token embedding, or an optimizer moment of it, saved at one padding and loaded at another).
/// Throws std::invalid_argument when wte has fewer than `vocab` rows or rows_wanted < vocab.
Tensor fit_vocab_rows(const Tensor& wte, std::int64_t vocab, std::int64_t rows_wanted);

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
/// layers / pp blocks: per block s b (34 C + 2 a) bytes in half precision (Korthikanti et al.
/// 2022, "Reducing Activation Recomputation in Large Transformer Models", section 4.1: 34 s b C,
/// and the fused attention's log-sum-exp per row and head, 2 a s b, in place of the 5 a s^2 b of
/// its scores, softmax and dropout mask), scaled by dtype_bytes / 2 and divided by tp. With
/// `recompute` (GptStage::set_recompute) a block keeps only its input, s b C dtype_bytes, and one
/// block's activations exist at a time. The distributed optimizer splits the two moments over
/// `state_shards` DP ranks (1: not split). Sizes must pass gpt_size_error first; state_shards must
/// be >= 1.
double gpt_step_memory_bytes(const GptConfig& config, int tp, int pp, std::int64_t micro_batch,
                             std::int64_t seq, std::int64_t in_flight, std::size_t dtype_bytes,
                             bool recompute = false, int state_shards = 1);

/// The name of a separate (untied) LM head [Vp, C].
inline constexpr const char* kUntiedHead = "lm_head.weight";

/// One parameter of the whole (unsharded) model.
struct ParameterSpec {
  std::string name;        ///< e.g. "transformer.h.0.attn.q.weight"
  Shape full_shape;        ///< e.g. [hidden, hidden]
  int split_dim;           ///< kReplicated or the dim cut over TP (see Parameter)
  bool is_block = false;   ///< belongs to transformer.h.{layer}
  std::int64_t layer = 0;  ///< the block index when is_block
  /// The rows that hold values: for wte the vocabulary V (rows from V on are zero padding);
  /// 0 for every other parameter (all rows).
  std::int64_t used_rows = 0;
};

/// Every parameter in canonical order (wte [Vp, C], wpe, then per block ln_1, attn.q/k/v,
/// attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, then ln_f): names and full shapes as in
/// tools/torch_peer_gpt.py except that c_attn is kept as separate q, k and v [C, C].
/// Column-parallel weights and biases (q, k, v, c_fc) and the vocab-parallel wte split dim 0,
/// row-parallel weights (c_proj) dim 1; LayerNorms, wpe and row-parallel biases are replicated.
/// llama: no wpe and no biases, the blocks of block_parameter_specs, ln_f.weight, and with
/// untied embeddings lm_head.weight [Vp, C] (vocab-parallel, dim 0) last.
std::vector<ParameterSpec> gpt_parameter_specs(const GptConfig& config);

/// The full (unsharded) value of one parameter, given its spec: how a model is initialised,
/// loaded from a checkpoint or from golden values. Every rank calls it for the parameters of
/// its stage and slices its TP shard, so the model never depends on the topology.
using MasterInit = std::function<Tensor(const ParameterSpec& spec)>;

/// GPT-2's initialisation: weights and embeddings N(0, 0.02), residual projections (c_proj
/// weights) N(0, 0.02 / sqrt(2 layers)), biases 0, LayerNorm weight 1 and bias 0; a llama
/// model's the same by name (its RMSNorm weights 1, its down and output projections, named
/// c_proj, scaled as GPT-2's, the depth-scaled rule torchtitan also uses). Each tensor
/// comes from its own counter-based stream (seed mixed with the parameter's name), so its
/// values do not depend on the topology or on which other parameters exist. The token
/// embedding's first `used_rows` (the vocabulary) are drawn and its padding rows are 0, so the
/// values do not depend on the padding either.
MasterInit gpt2_init(std::uint64_t seed, std::int64_t layers, DType dtype, Device device);

/// Like gpt2_init, but every bias (LayerNorm biases included) ~ N(0, 0.1^2) and LayerNorm
/// weights ~ 1 + N(0, 0.1^2), and matrices [rows, cols] N(0, 1/cols): every parameter is
/// non-trivial and activations are not tiny, so checks see every term of every gradient. The
/// token embedding's padding rows are 0.
MasterInit random_init(std::uint64_t seed, DType dtype, Device device);

}  // namespace mpitron::nn
