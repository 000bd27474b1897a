// The dense GPT, written directly with autograd ops from the full parameter tensors: the
// single-process reference that the tensor- and pipeline-parallel model (gpt.h) is checked
// against. It shares no layer class with the parallel model, only the differentiable ops.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "nn/models/gpt_config.h"

namespace mpitron::nn {

/// Full tensors by the names of gpt_parameter_specs.
using TensorMap = std::map<std::string, Tensor>;

/// `init`'s full tensor for every parameter of `config`, as leaves that require grad.
TensorMap dense_gpt_parameters(const GptConfig& config, const MasterInit& init);

/// Where dense_gpt_loss rounds to bfloat16 to compute what the messages of a parallel train
/// --bf16 run round: each point goes through autograd::round_through_bf16 (forward and gradient).
struct DenseBf16Rounding {
  /// > 0: the activation after every wire_blocks-th block except the last, as the pipeline's
  /// bfloat16 wire rounds between virtual stages of that many blocks (layers / (pp
  /// virtual_stages)); 0: never.
  std::int64_t wire_blocks = 0;
  /// Where the TP mappings at tp > 1 round (nn/layers/tp_mappings.h): the token embedding (the
  /// vocab-parallel embedding's all-reduce), each output projection's product before its bias
  /// (the sum of the row-parallel partial products) and the outputs of ln_1, ln_2 and ln_f
  /// (whose gradients the column-parallel input mapping sums; forward, only GEMMs read them,
  /// which round them anyway). The dense model has no partial sums, so it rounds each such
  /// value once where the TP group rounds every partial and each combination. Its rounding of
  /// the token embedding's gradient, which the parallel model sums in bfloat16 only with
  /// sequence parallelism (there with the position embedding's), differs as well.
  bool tp_collectives = false;
  /// What a --bf16 run writes as bfloat16, forward and gradient: the logits (GptStage::loss;
  /// their gradient overwrites them as bfloat16) and GPT-2's MLP product x W1^T before its bias
  /// (autograd::fused_mlp; dY rounded as fc1's GEMMs round it); and what it reads as bfloat16
  /// with a float32 gradient: attention's q, k and v (after RoPE; autograd::read_as_bf16, as
  /// scaled_dot_product_attention and ring attention read them); and attention itself runs the
  /// model's fused kernel, whose products round their operands and whose backward reads its
  /// output rounded (FlashAttention-2's bfloat16 arithmetic, checked on its own).
  /// The normalizations and SwiGLU are the model's own ops, which keep theirs rounded already.
  bool stored_activations = false;
};

/// Dense block `layer` of `parameters` (names transformer.h.{layer}.*): x [batch, seq, hidden] ->
/// x + attn(ln_1(x)), then + mlp(ln_2(.)), causal attention with `heads` heads
/// (unfused_attention_core, independent of the fused kernel the model runs; where `round_stored`
/// that kernel, as DenseBf16Rounding::stored_activations says), GELU of form
/// `gelu`; `round_tp` rounds as DenseBf16Rounding::tp_collectives says, `round_stored` attention's
/// q, k, v and output and the MLP's product before its bias as
/// DenseBf16Rounding::stored_activations does.
Tensor dense_gpt_block(const TensorMap& parameters, std::int64_t layer, std::int64_t heads,
                       const Tensor& x, GeluForm gelu = GeluForm::exact, bool round_tp = false,
                       bool round_stored = false);

/// Dense block `layer` of a llama `config`: x + attn(rms_norm_1(x)) with RoPE on q and k and
/// each key/value head repeated for its query heads (as dense_gpt_block's attention), then
/// + c_proj(swiglu(gate(.), up(.))) of rms_norm_2; no biases. x [batch, seq, hidden];
/// `round_tp` rounds as DenseBf16Rounding::tp_collectives says, `round_stored` q, k, v and the
/// attention output as its stored_activations does.
Tensor dense_llama_block(const GptConfig& config, const TensorMap& parameters, std::int64_t layer,
                         const Tensor& input, bool round_tp = false, bool round_stored = false);

/// Mean cross-entropy (nats per token) of the dense model (either family): tokens and targets
/// (int32/int64) [batch, seq] -> scalar; the logits are those of wte's first config.vocab rows only
/// (an independent form of the padding rule). Backward fills the gradients of `parameters`.
/// `bf16` says where it rounds to bfloat16 (none by default). Throws std::out_of_range when a
/// parameter is missing, std::invalid_argument for bad token ids, a negative bf16.wire_blocks,
/// or rounding a model that is not float32.
Tensor dense_gpt_loss(const GptConfig& config, const TensorMap& parameters, const Tensor& tokens,
                      const Tensor& targets, const DenseBf16Rounding& bf16 = {});

}  // namespace mpitron::nn
