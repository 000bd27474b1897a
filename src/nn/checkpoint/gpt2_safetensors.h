// GPT-2 weights from a safetensors file under nanoGPT's names (mpitron export's file) or Hugging
// Face's (the `model.safetensors` of the `gpt2` model repository), into mpitron's canonical full
// tensors (gpt2_weights.h).
//
// Names, after an optional "transformer." prefix (nanoGPT's state dict has it, Hugging Face's
// GPT2Model file does not):
//   wte.weight [V, C], wpe.weight [maxT, C], ln_f.{weight,bias} [C], and per block i
//   h.{i}.ln_1.{weight,bias} [C], h.{i}.attn.c_attn.weight [3C, C] (rows q, k, v) and .bias
//   [3C], h.{i}.attn.c_proj.weight [C, C] and .bias [C], h.{i}.ln_2.{weight,bias} [C],
//   h.{i}.mlp.c_fc.weight [4C, C] and .bias [4C], h.{i}.mlp.c_proj.weight [C, 4C] and .bias [C].
// nanoGPT stores these weights [out, in] (torch.nn.Linear). Hugging Face's GPT-2 uses its Conv1D
// module, y = x W + b with W stored [in, out]: the four weights above come transposed
// (c_attn.weight [C, 3C], ...), its columns q, k, v. The shape of h.0.attn.c_attn.weight tells the
// two apart. Hugging Face files may also hold h.{i}.attn.bias and h.{i}.attn.masked_bias (the
// causal mask buffers, ignored) and lm_head.weight (the LM head, tied to wte).
#pragma once

#include <cstdint>
#include <filesystem>

#include "nn/checkpoint/gpt2_weights.h"

namespace mpitron::nn {

/// Reads the GPT-2 weights of the safetensors file `path` (either naming above) as float32 CPU
/// tensors under canonical names: c_attn split into q, k, v, Conv1D weights transposed to
/// [out, in]. Sizes come from the shapes: V = Vp = rows of wte, C its columns, maxT the rows of
/// wpe, L = 1 + the largest block index; the file does not hold the head count, so NH = `heads`.
/// Throws CheckpointError "<path>: <what>" for a damaged safetensors file (SafetensorsReader),
/// heads < 1 ("a safetensors file does not record the number of attention heads: give
/// --heads") or not dividing C, a missing tensor, an unexpected one, a shape that is
/// neither layout's, a tensor that is not F32, F64, BF16 or F16 (BF16 and F16 widen exactly), or an
/// lm_head.weight that differs from wte.weight (mpitron ties the LM head to the token embedding),
/// naming the tensor as the file does. stored_bfloat16 is set when a tensor read was BF16.
Gpt2Weights read_gpt2_safetensors(const std::filesystem::path& path, std::int64_t heads);

}  // namespace mpitron::nn
