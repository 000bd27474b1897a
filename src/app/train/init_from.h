// `train --init-from FILE`: a run that starts from another tool's weights (GPT-2: an llm.c model
// file, or safetensors with nanoGPT's or Hugging Face's names; Llama: a Hugging Face folder)
// instead of a random initialisation, its model sizes taken from the file.
#pragma once

#include "app/train/settings.h"
#include "nn/checkpoint/gpt2_weights.h"
#include "nn/models/gpt_config.h"

namespace mpitron::app {

/// A Hugging Face Llama folder (nn::is_hf_llama_path: a folder, its config.json, its index, or
/// its model.safetensors; nn::read_hf_llama) sets every size and choice of `config` from
/// config.json (nn::gpt_config_of), block_size max_position_embeddings unless --block-size is
/// given (it may be shorter); a model flag given or filled in by --model that differs from
/// config.json is one line ("--init-from llama/: config.json has kv-heads 2, --kv-heads 4").
/// Otherwise reads the GPT-2 weights of --init-from (nn::load_pretrained; a safetensors file holds
/// no head count, so --heads, given or filled in by --model, is its NH) and sets `config`'s sizes
/// from them: vocab V, block_size maxT, layers L, hidden C, heads NH, and the tanh GELU of GPT-2
/// (llm.c's and Hugging Face's) unless --gelu was given. A model flag the command line gave, or
/// --model filled in, must agree with the file, except a given --vocab below the rows of a file
/// that records no separate vocabulary (safetensors, or llm.c with V = Vp): the rows from it on
/// are then padding (how a padded run's export is read back). Throws comm::ConfigError, one line
/// starting with "--init-from <file>: ", for a file that is neither format or is damaged, a
/// safetensors file without --heads, or a size that disagrees ("the file has hidden 768, --hidden
/// 512";
/// "--vocab 50304 is larger than the file's vocab 50257 (its wte rows from 50257 on are
/// padding)").
nn::Gpt2Weights load_init_from(const TrainOptions& options, nn::GptConfig& config);

}  // namespace mpitron::app
