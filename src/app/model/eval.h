// `mpitron eval`: the mean cross-entropy of a trained checkpoint, or of another tool's weights
// (--init-from), over a text file or token shards.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "app/common/options.h"
#include "app/model/checkpoint_loading.h"

namespace mpitron::app {

struct EvalOptions {
  CommonOptions common;
  ModelSource model;                ///< --load or --init-from (and --heads)
  std::string data;                 ///< a text file, or llm.c token shards
  std::string tokenizer;            ///< GPT-2 tokenizer files: --data is text to encode
  std::optional<std::int64_t> seq;  ///< window length; not given: the model's block size
  /// The tokens scored: "all" of --data, or the "train" or "val" side of train's split
  /// (nn::TokenCorpus::split: a text file's first 90 % trains; llm.c shards' val shards validate)
  std::string split = "all";
  /// --bf16: evaluate as a `train --bf16` run's validation does: the loaded float32 weights
  /// rounded to bfloat16 (nearest even) as the parameters, bfloat16 GEMM operands, bfloat16 TP
  /// collectives and pipeline sends (nn::GptTrainOptions::bf16, kernels::GemmOperands::bfloat16)
  bool bf16 = false;
};

/// Adds the `eval` subcommand and its flags to `app`.
CLI::App& add_eval_command(CLI::App& app, EvalOptions& options);

/// Prints (rank 0) the mean cross-entropy of the model (--load's checkpoint, or --init-from's
/// weights: load_model_agreed) in nats and bits per token over the non-overlapping
/// windows of --data's tokens (or of the side of train's split --split names, windows counted
/// from its first token): inputs tokens[i seq, (i+1) seq), targets shifted by one, every
/// window whose targets fit (torch_peer_gpt.py --eval computes the same), on any topology. The
/// tokens are a text file's bytes (the unit is then "byte"), llm.c shards (train then val
/// shards, or val shards alone: TokenCorpus::from_shards with ValShardsAlone::taken), or with
/// --tokenizer the text file encoded on the fly as `mpitron tokenize` would (end-of-text, then the
/// text's ids). With --bf16 the model computes as `train --bf16` does (EvalOptions::bf16), so the
/// loss of a bf16 run's checkpoint over its validation windows (--split val on its --data, with
/// --eval-iters 0), on its (tp, pp, cp), is the run's own val_loss bit for bit. --json writes
/// {"loss", "bits_per_byte" or "bits_per_token", "windows", "split", "bf16", "step" or "init_from",
/// ...}. Throws comm::ConfigError (agreed) for both or neither of --load and --init-from, a
/// missing/damaged checkpoint or file, unreadable data or a bad shard, a tokenizer that is not
/// one, has more ids than the model's vocabulary or meets shards (already tokens), data (or the
/// --split side) shorter than one window, or --seq outside [1, block size] (the model's position
/// table).
int run_eval(const EvalOptions& options, comm::Communicator world);

}  // namespace mpitron::app
