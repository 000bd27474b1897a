// --init-from FILE_OR_FOLDER: another tool's weights (GPT-2: an llm.c model file, or safetensors
// with nanoGPT's or Hugging Face's names; Llama: a Hugging Face folder), the model sizes taken
// from the file. `train` starts a run from them; `eval` and `generate` read them as they read a
// checkpoint.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "nn/checkpoint/gpt2_weights.h"
#include "nn/models/gpt_config.h"

namespace mpitron::app {

/// What a command's model flags say beside --init-from: the file, and each model flag's value,
/// checked against the file only when `given` names it ("vocab", "layers", "hidden", "heads",
/// "kv-heads", "ffn-hidden", "block-size", "rope-theta", "norm-eps", "untie-embeddings",
/// "gelu": flags the command line gave or a --model preset filled in). `eval` and `generate`
/// give none but, for a safetensors GPT-2 file, "heads".
struct InitFromFlags {
  std::string init_from;  ///< the file or folder
  /// The --model preset that filled in every model flag the command line did not give: messages
  /// name it for those ("--model smollm-135m's vocab 49152"); empty: none.
  std::string model;
  /// The model flags the command line gave ("vocab", "heads", "block-size", ...).
  std::set<std::string> typed;

  /// Whether model flag `flag` has a value to check against the file: typed, or filled in by
  /// the --model preset.
  bool given(const char* flag) const { return !model.empty() || typed.contains(flag); }

  std::int64_t vocab = 0;
  std::int64_t block_size = 0;  ///< 0: `seq`
  std::int64_t seq = 0;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t ffn_hidden = 0;
  double rope_theta = 0.0;
  double norm_eps = 0.0;
  bool untie_embeddings = false;
};

/// A Hugging Face Llama folder (nn::is_hf_llama_path: a folder, its config.json, its index, or
/// its model.safetensors; nn::read_hf_llama) sets every size and choice of `config` from
/// config.json (nn::gpt_config_of), block_size max_position_embeddings unless "block-size" is
/// given (it may be shorter); a model flag given that differs from config.json is one line
/// ("--init-from llama/: config.json has kv-heads 2, --kv-heads 4", or "..., --model
/// smollm-135m's kv-heads 3" for a flag the preset filled in).
/// Otherwise reads the GPT-2 weights of the file (nn::load_pretrained; a safetensors file holds
/// no head count, so `heads`, when given, is its NH) and sets `config`'s sizes from them: vocab
/// V, block_size maxT, layers L, hidden C, heads NH, and the tanh GELU of GPT-2 (llm.c's and
/// Hugging Face's) unless "gelu" is given. A model flag given must agree with the file, except a
/// given vocab below the rows of a file that records no separate vocabulary (safetensors, or
/// llm.c with V = Vp): the rows from it on are then padding (how a padded run's export is read
/// back). `config`'s other fields are kept. Throws comm::ConfigError, one line starting with
/// "--init-from <file>: ", for a path that does not exist ("no such file or folder"), a file that
/// is neither format or is damaged, a safetensors file
/// without heads ("... does not record the number of attention heads: give --heads"), or a size
/// that disagrees ("the file has hidden 768, --hidden 512"; "--vocab 50304 is larger than the
/// file's vocab 50257 (its wte rows from 50257 on are padding)").
nn::Gpt2Weights load_init_from(const InitFromFlags& flags, nn::GptConfig& config);

}  // namespace mpitron::app
