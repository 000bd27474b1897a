// `mpitron generate`: autoregressive sampling from a trained checkpoint.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "app/options.h"

namespace mpitron::app {

/// The most bytes one `generate` run samples (--tokens): about 1 MB of text, far beyond what a
/// byte model's context makes coherent, and a bound on the memory the output takes.
inline constexpr std::int64_t kMaxGenerateTokens = 1000000;

struct GenerateOptions {
  CommonOptions common;  ///< --seed seeds the sampling
  std::string load;
  std::string prompt;
  std::int64_t tokens = 200;
  double temperature = 1.0;
  std::int64_t top_k = 0;
};

/// Adds the `generate` subcommand and its flags to `app`.
CLI::App& add_generate_command(CLI::App& app, GenerateOptions& options);

/// Prints (rank 0, to stdout) the prompt followed by --tokens sampled bytes: greedy at
/// --temperature 0, else softmax sampling over the --top-k most likely bytes (0: all), drawn
/// from --seed so that every topology prints the same text. pp must be 1 (any tp and dp).
/// Throws comm::ConfigError (agreed) for a missing/damaged checkpoint, pp > 1, an empty
/// prompt, --tokens outside [0, kMaxGenerateTokens], a negative --top-k, or a --temperature
/// that is negative or not finite (one message per option, e.g. "--top-k must be >= 0, got -1").
int run_generate(const GenerateOptions& options, comm::Communicator world);

}  // namespace mpitron::app
