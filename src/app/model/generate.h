// `mpitron generate`: autoregressive sampling from a trained checkpoint or another tool's weights.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "app/common/options.h"
#include "app/model/checkpoint_loading.h"

namespace mpitron::app {

/// The most tokens one `generate` run samples (--tokens): about 1 MB of a byte model's text, far
/// beyond what a model's context makes coherent, and a bound on the memory the output takes.
inline constexpr std::int64_t kMaxGenerateTokens = 1000000;

struct GenerateOptions {
  CommonOptions common;  ///< --seed seeds the sampling
  ModelSource model;     ///< --load or --init-from (and --heads)
  std::string prompt;
  std::string tokenizer;  ///< GPT-2 tokenizer files; empty: the model's tokens are bytes
  std::int64_t tokens = 200;
  double temperature = 1.0;
  std::int64_t top_k = 0;
  /// --bf16: compute as `train --bf16` does: the loaded float32 weights rounded to bfloat16
  /// (nearest even) as the parameters (nn::round_parameters_to_bf16), bfloat16 GEMM operands and
  /// bfloat16 TP collectives (kernels::GemmOperands::bfloat16)
  bool bf16 = false;
};

/// Adds the `generate` subcommand and its flags to `app`.
CLI::App& add_generate_command(CLI::App& app, GenerateOptions& options);

/// Prints (rank 0, to stdout) the prompt followed by --tokens tokens sampled from the model
/// (--load's checkpoint, or --init-from's weights: load_model_agreed): greedy at
/// --temperature 0, else softmax sampling over the --top-k most likely tokens (0: all), drawn
/// from --seed so that every topology prints the same text. The tokens are bytes, or with
/// --tokenizer GPT-2 ids: the prompt is encoded, ids outside the tokenizer are never drawn and
/// the ids are decoded. pp must be 1 (any tp and dp). With --bf16 the logits are computed as a
/// `train --bf16` run computes them (GenerateOptions::bf16). --json writes the prompt's and
/// sampled ids ("prompt_bytes"/"bytes" or "prompt_tokens"/"ids": a sample need not be valid
/// UTF-8) and "bf16"; "load" and "step", or "init_from", name the model. Throws comm::ConfigError
/// (agreed) for both or neither of --load and --init-from, a missing/damaged checkpoint or file, pp
/// > 1, an empty prompt,
/// --tokens outside [0, kMaxGenerateTokens], a negative --top-k, a --temperature that is
/// negative or not finite (one message per option, e.g. "--top-k must be >= 0, got -1"), a
/// --tokenizer that is not one or has more ids than the model's vocabulary, or a
/// model of more than 256 ids without --tokenizer.
int run_generate(const GenerateOptions& options, comm::Communicator world);

}  // namespace mpitron::app
