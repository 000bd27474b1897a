// The config.json of a Hugging Face Llama model (transformers' LlamaConfig): the fields mpitron
// reads and writes, and the fields it refuses because their values would change the model's
// function (hf_llama.h reads and writes the whole folder).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/rope.h"

namespace mpitron::nn {

/// The fields of a Llama config.json that mpitron uses (Hugging Face's names in brackets).
struct HfLlamaConfig {
  std::int64_t vocab = 0;          ///< V [vocab_size]
  std::int64_t hidden = 0;         ///< C [hidden_size]
  std::int64_t layers = 0;         ///< [num_hidden_layers]
  std::int64_t heads = 0;          ///< [num_attention_heads]
  std::int64_t kv_heads = 0;       ///< K [num_key_value_heads]; absent: heads
  std::int64_t ffn_hidden = 0;     ///< F [intermediate_size]
  std::int64_t max_positions = 0;  ///< [max_position_embeddings]; absent: 2048
  double norm_eps = 1e-6;          ///< [rms_norm_eps]; absent: 1e-6, LlamaConfig's default
  double rope_theta = 10000.0;     ///< [rope_theta] or [rope_parameters][rope_theta]
  bool tied_embeddings = false;    ///< [tie_word_embeddings]; absent: false
  /// [rope_scaling] (or [rope_parameters]) of rope_type "llama3"; null or "default": none
  kernels::Llama3RopeScaling rope_scaling{};
  std::string torch_dtype = "float32";  ///< [torch_dtype], informative only
};

/// The config of a config.json object; `context` starts every message (the file's path).
/// Requires model_type "llama" and the five sizes hidden_size, num_hidden_layers,
/// num_attention_heads, intermediate_size and vocab_size (integers >= 1); takes the others with
/// LlamaConfig's defaults. Refuses, in one line naming the field, every field whose value
/// changes the model's function from what mpitron computes: hidden_act other than "silu",
/// attention_bias or mlp_bias true, sliding_window not null, attention_dropout not 0,
/// head_dim other than hidden_size / num_attention_heads, rope_scaling of a rope_type (or
/// type) other than "default" (no scaling) and "llama3", a llama3 rope_scaling without factor,
/// low_freq_factor, high_freq_factor and original_max_position_embeddings or outside
/// kernels::rope_error's rules (factor 0 included), a rope_theta that is not a finite number > 0,
/// an rms_norm_eps that is not a number > 0 finite in float32. rope_theta and rope_scaling may
/// also come as transformers' newer rope_parameters object ({"rope_type", "rope_theta", and the
/// llama3 fields}); beside the top-level fields it must agree with them. Unknown fields (token ids,
/// architectures, use_cache, ...) are ignored. Throws CheckpointError "<context>: <what>" (e.g.
/// "config.json: attention_bias true is not supported (mpitron's Llama has no biases)").
HfLlamaConfig hf_llama_config_from_json(const nlohmann::json& json, const std::string& context);

/// The config.json of `config`: model_type "llama", architectures ["LlamaForCausalLM"],
/// hidden_act "silu", no biases, head_dim, the sizes, rms_norm_eps, rope_theta, rope_scaling
/// (null or its four llama3 fields), tie_word_embeddings and torch_dtype. Read back by
/// hf_llama_config_from_json into the same config.
nlohmann::json hf_llama_config_json(const HfLlamaConfig& config);

}  // namespace mpitron::nn
