// Between a GPT's sizes and parameters (GptConfig, full tensors under canonical names) and the
// weight files of other tools (Gpt2Weights of src/nn/checkpoint/: llm.c, nanoGPT, Hugging
// Face's GPT-2; HfLlamaWeights: Hugging Face Llama folders).
#pragma once

#include <map>
#include <string>

#include "nn/checkpoint/gpt2_weights.h"
#include "nn/checkpoint/hf_llama.h"
#include "nn/models/gpt_config.h"

namespace mpitron::nn {

/// The weights of a model of sizes `config` whose full parameters are `full` (canonical names,
/// e.g. a loaded checkpoint's): maxT = block_size, V = vocab, Vp = the rows of
/// transformer.wte.weight, L, NH, C from `config`. The tensors are shared, not copied; they are
/// checked when written (check_gpt2_weights). Throws std::invalid_argument when `full` has no
/// two-dimensional transformer.wte.weight.
Gpt2Weights gpt2_weights_of(const GptConfig& config, const std::map<std::string, Tensor>& full);

/// The llama GptConfig of a Hugging Face Llama config: vocab V, block_size max_positions,
/// layers, hidden, heads, kv_heads, ffn_hidden, norm_eps, rope_theta, rope_scaling and
/// tied_embeddings; no padding (padded_vocab 0).
GptConfig gpt_config_of(const HfLlamaConfig& config);

/// The Hugging Face Llama config of a llama `config` (the inverse of gpt_config_of; torch_dtype
/// "float32"). Throws std::invalid_argument when `config` is not llama.
HfLlamaConfig hf_llama_config_of(const GptConfig& config);

/// The weights of a Hugging Face Llama model as a MasterInit reads them: sizes maxT =
/// max_positions, V = Vp = vocab, L, NH, C from the config, its tensors (shared) and its
/// stored_bfloat16.
Gpt2Weights pretrained_weights_of(const HfLlamaWeights& weights);

/// A MasterInit that returns the full tensors of `weights` (which must outlive it), in `dtype`
/// on `device`; the token embedding and an untied lm_head (the specs with used_rows) refitted
/// to the spec's rows (fit_vocab_rows: their V = weights.sizes.vocab vocabulary rows, then zero
/// padding), so a file padded to one Vp starts a model padded to another. Throws
/// std::invalid_argument naming a parameter `weights` lacks or holds in another shape.
MasterInit pretrained_init(const Gpt2Weights& weights, DType dtype, Device device);

}  // namespace mpitron::nn
