// Export of mpitron's GPT parameters under the nanoGPT / GPT-2 state-dict names and shapes (the
// layout documented at the top of tools/torch_peer_gpt.py), so PyTorch code can load a
// trained model with `GPT.load_state_dict`, and under Hugging Face transformers' GPT-2 names
// and Conv1D layout.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/checkpoint/safetensors.h"

namespace mpitron::nn {

/// The nanoGPT / GPT-2 state dict of a GPT with L layers, hidden size C, vocabulary V and
/// context `block`, from its full dense parameters under mpitron's names:
///   transformer.wte.weight [V, C], transformer.wpe.weight [block, C],
///   transformer.h.{i}.ln_1.{weight,bias} [C], transformer.h.{i}.attn.{q,k,v}.weight [C, C],
///   transformer.h.{i}.attn.{q,k,v}.bias [C], transformer.h.{i}.attn.c_proj.weight [C, C] and
///   .bias [C], transformer.h.{i}.ln_2.{weight,bias} [C], transformer.h.{i}.mlp.c_fc.weight
///   [4C, C] and .bias [4C], transformer.h.{i}.mlp.c_proj.weight [C, 4C] and .bias [C],
///   transformer.ln_f.{weight,bias} [C]   (i = 0 .. L-1; weights are [out, in]).
/// The result renames each of these to the same name with "attn.q/k/v" replaced by one
/// "attn.c_attn": c_attn.weight [3C, C] = rows q, k, v stacked in that order, c_attn.bias [3C]
/// likewise (nanoGPT splits c_attn's output into q, k, v in that order). Entries come in the
/// order of nanoGPT's state_dict: wte, wpe, per layer ln_1, c_attn, attn.c_proj, ln_2, c_fc,
/// mlp.c_proj (weight before bias), then ln_f; L and C are read from the names and wte.
/// Throws std::invalid_argument "gpt export: ..." naming the tensor for a missing or unexpected
/// name, or a shape other than the above.
std::vector<NamedTensor> gpt_export_tensors(const std::map<std::string, autograd::Tensor>& tensors);

/// Hugging Face's GPT-2 state dict of the same parameters (the names and layout of the `gpt2`
/// model repository's model.safetensors, GPT2Model: no LM head, no mask buffers): the entries
/// of gpt_export_tensors in its order without the "transformer." prefix, the four weights of
/// Hugging Face's Conv1D modules stored [in, out] (h.{i}.attn.c_attn.weight [C, 3C] with
/// columns q, k, v, attn.c_proj.weight [C, C], mlp.c_fc.weight [C, 4C], mlp.c_proj.weight
/// [4C, C]), and wte.weight cut to its first `vocab` rows [V, C] (padding rows dropped). Throws
/// like gpt_export_tensors, and std::invalid_argument "gpt export: ..." when vocab is not in
/// [1, rows of transformer.wte.weight].
std::vector<NamedTensor> gpt_hf_export_tensors(
    const std::map<std::string, autograd::Tensor>& tensors, std::int64_t vocab);

}  // namespace mpitron::nn
