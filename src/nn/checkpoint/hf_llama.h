// Hugging Face Llama folders (the layout of a `meta-llama/Llama-3.2-1B` or `HuggingFaceTB/
// SmolLM-135M` model repository), read into and written from mpitron's canonical full tensors.
//
// A folder holds `config.json` (LlamaConfig: sizes and choices) and the weights: one
// `model.safetensors`, or shards listed by `model.safetensors.index.json` ({"weight_map":
// {tensor name: shard file name}}). The tensors (weights [out, in], as torch.nn.Linear):
//   model.embed_tokens.weight [V, C]                              transformer.wte.weight
//   model.layers.{i}.input_layernorm.weight [C]                   transformer.h.{i}.ln_1.weight
//   model.layers.{i}.self_attn.q_proj.weight [C, C]               ...attn.q.weight
//   model.layers.{i}.self_attn.k_proj.weight [K D, C]             ...attn.k.weight
//   model.layers.{i}.self_attn.v_proj.weight [K D, C]             ...attn.v.weight
//   model.layers.{i}.self_attn.o_proj.weight [C, C]               ...attn.c_proj.weight
//   model.layers.{i}.post_attention_layernorm.weight [C]          ...ln_2.weight
//   model.layers.{i}.mlp.gate_proj.weight [F, C]                  ...mlp.gate.weight
//   model.layers.{i}.mlp.up_proj.weight [F, C]                    ...mlp.up.weight
//   model.layers.{i}.mlp.down_proj.weight [C, F]                  ...mlp.c_proj.weight
//   model.norm.weight [C]                                         transformer.ln_f.weight
//   lm_head.weight [V, C] (absent when tie_word_embeddings)       lm_head.weight
// (K key/value heads, D = C / heads the head size, F the MLP's inner size.) Hugging Face's
// q_proj and k_proj rows are in the rotate-half layout mpitron's RoPE uses (pair i of a head is
// its elements i and i + D/2), so they are copied without a permutation. Meta's original
// `consolidated.*.pth` files use the interleaved layout (pairs 2i, 2i + 1): their q and k rows
// would need the inverse of the permutation of transformers' convert_llama_weights_to_hf.py;
// mpitron does not read those files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "autograd/tensor.h"
#include "nn/checkpoint/hf_llama_config.h"
#include "nn/checkpoint/safetensors.h"

namespace mpitron::nn {

/// A Hugging Face Llama model: its config and every parameter as a full float32 CPU tensor under
/// mpitron's names (the table at the top; wte [V, C], lm_head only when untied).
struct HfLlamaWeights {
  HfLlamaConfig config;
  std::map<std::string, autograd::Tensor> tensors;
  /// A tensor read was stored as BF16 (all are float32 here, widened exactly).
  bool stored_bfloat16 = false;
};

/// Whether `path` names a Hugging Face Llama folder: a folder, a config.json,
/// model.safetensors.index.json, or a model.safetensors with a config.json beside it whose
/// model_type is "llama" (a GPT-2 repository's model.safetensors is not one) or, without a
/// config.json, holding model.embed_tokens.weight.
bool is_hf_llama_path(const std::filesystem::path& path);

/// Reads the folder `path` names (is_hf_llama_path): config.json, then the weights, as
/// transformers finds them: the file `path` names (model.safetensors, or the index and its
/// shards), else model.safetensors when the folder has it, else model.safetensors.index.json and
/// its shards. F32, F64, BF16 and F16 tensors become float32 (BF16 and F16 exactly). Ignores the
/// rotary inverse-frequency buffers older files hold
/// (model.layers.{i}.self_attn.rotary_emb.inv_freq), and a tied model's lm_head.weight when it
/// equals model.embed_tokens.weight. Throws CheckpointError "<file>: <what>" for a missing ("...
/// /config.json: missing: a Hugging Face Llama model's sizes are in the config.json beside its
/// weights") or
/// malformed config.json or index, a refused config field (hf_llama_config_from_json), a shard
/// the index lists that is missing ("<folder>/model-00002-of-00002.safetensors: missing shard
/// listed by model.safetensors.index.json"), a damaged safetensors file, a missing, unexpected
/// or misshapen tensor, one of another dtype, a NaN or infinity, or a tied lm_head that differs
/// from the embedding.
HfLlamaWeights read_hf_llama(const std::filesystem::path& path);

/// Why write_hf_llama refuses `folder`, or "" when it does not: a folder holding
/// model.safetensors.index.json (a sharded model), whose shards would stay beside the
/// model.safetensors written ("holds model.safetensors.index.json (a sharded model), ...").
std::string hf_llama_write_refusal(const std::filesystem::path& folder);

/// Writes `weights` as a Hugging Face Llama folder `folder` (created when missing; its parent must
/// exist): config.json (hf_llama_config_json, torch_dtype "bfloat16" when `storage` is BF16)
/// and model.safetensors (each write atomic) with the tensors under Hugging Face's names in the
/// order of the table at the top, stored as `storage` (F32, or BF16 rounded to nearest even);
/// metadata {"format": "pt"} and `metadata`. weights.tensors must hold exactly the tensors of
/// weights.config (wte and lm_head with at least V rows: rows from V on are dropped). Throws
/// std::invalid_argument "hf llama: ..." naming a missing, unexpected or misshapen tensor or a
/// storage other than F32 and BF16; CheckpointError "<folder>: <why>" for a folder
/// hf_llama_write_refusal refuses; std::runtime_error when the folder cannot be written.
void write_hf_llama(const std::filesystem::path& folder, const HfLlamaWeights& weights,
                    StoredDType storage, const SafetensorsMetadata& metadata = {});

}  // namespace mpitron::nn
