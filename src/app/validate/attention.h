// `mpitron attention`: tensor-parallel multi-head attention inference (the reference program's
// MultiHeadAttentionTP), checked against dense attention and timed.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "app/common/options.h"

namespace mpitron::app {

struct AttentionOptions {
  CommonOptions common;
  std::int64_t embed = 512;
  std::int64_t heads = 8;
  std::int64_t batch = 128;
  std::int64_t seq = 8;
  std::string init = "normal";  ///< "normal" (seeded) or "arange" (the reference's weights)
  int iterations = 10;          ///< timed forwards
  double rtol = 1e-4;           ///< normwise: max |tp - dense| <= rtol * max |dense|
};

/// Adds the `attention` subcommand and its flags to `app`.
CLI::App& add_attention_command(CLI::App& app, AttentionOptions& options);

/// Runs the job on every rank of `world` (tp = --tp, default the world size; pp must be 1; any
/// remaining ranks are independent dp replicas). The input [batch, seq, embed] is drawn on world
/// rank 0 from --seed and broadcast. Prints the output mean, the largest difference from dense
/// attention computed on one rank and the time per forward. Returns 0 when the difference is
/// within --rtol on every rank, 1 otherwise. Throws comm::ConfigError, before any
/// communication, for sizes that do not fit (e.g. "num_heads 6 is not divisible by tp 4").
int run_attention(const AttentionOptions& options, comm::Communicator world);

}  // namespace mpitron::app
