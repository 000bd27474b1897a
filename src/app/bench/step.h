// `mpitron bench`: times the combined TP+PP+DP MLP training step (forward, backward, DP gradient
// average; no optimizer update) — the same work as the PyTorch peer tools/torch_peer_mlp.py —
// and prints ms/step, tokens/s, achieved GFLOP/s and peak memory per rank.
#pragma once

#include <CLI/CLI.hpp>

#include "app/common/model_sizes.h"
#include "app/common/options.h"

namespace mpitron::app {

struct BenchOptions {
  CommonOptions common;
  /// Default sizes: the peer's (hidden 512, intermediate 2048, batch 8, seq 128, 4 layers).
  ModelSizes sizes{512, 2048, 8, 128, 4, 1};
  int steps = 5;
  int warmup = 2;
  std::string progress = "auto";  ///< --progress: auto, in-place, lines or off
  double peak_gflops = 0.0;       ///< one rank's peak, for MFU (0: unknown)
  bool recompute = false;         ///< recompute each layer's activations in backward
  /// --dtype: float32, or bfloat16 (GEMMs on bfloat16 operands, float32 otherwise: train --bf16)
  std::string dtype = "float32";
};

/// Adds the `bench` subcommand and its flags to `app`.
CLI::App& add_bench_command(CLI::App& app, BenchOptions& options);

/// Runs warm-up and timed steps on every rank; rank 0 prints the figures and, with --json,
/// appends one JSON line {"config", "ms_per_step", "tokens_per_s", "threads" (CPU threads per
/// rank; 1 on CUDA), "tokens_per_s_per_thread" (tokens/s over ranks x threads), "achieved_gflops",
/// "model_gflop_per_step", "peak_rss_mib_by_rank", "allocations_per_step_by_rank" (blocks the
/// backends allocated per timed step: cache misses of kernels' allocator),
/// "allocator_peak_in_use_mib_by_rank", "allocator_peak_held_mib_by_rank" (the compute device's
/// pool: largest bytes handed out, and with the cached bytes added)}. Model FLOPs per step: 12 *
/// hidden * intermediate * layers * tokens (two GEMMs per layer, forward 2 and backward 4 FLOP per
/// multiply-add), tokens = dp * batch * seq. Throws comm::ConfigError for bad sizes or topologies.
int run_bench(const BenchOptions& options, comm::Communicator world);

}  // namespace mpitron::app
