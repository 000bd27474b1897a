// `mpitron generate`: autoregressive sampling from a trained checkpoint.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "app/options.h"

namespace mpitron::app {

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
/// prompt, or a negative --tokens, --temperature or --top-k.
int run_generate(const GenerateOptions& options, comm::Communicator world);

}  // namespace mpitron::app
