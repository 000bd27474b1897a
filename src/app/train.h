// `mpitron train`: a GPT-2-style byte-level language model trained with tensor, pipeline and
// data parallelism (1F1B or all-forward-all-backward), AdamW or SGD, warmup + cosine learning
// rate, global-norm clipping, and periodic validation loss.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "app/options.h"

namespace mpitron::app {

struct TrainOptions {
  CommonOptions common;
  std::string data;  ///< any file, read as bytes; empty: the built-in corpus
  std::int64_t vocab = 256;
  std::int64_t layers = 4;
  std::int64_t hidden = 256;
  std::int64_t heads = 8;
  std::int64_t seq = 128;
  std::int64_t global_batch = 32;  ///< sequences per optimizer step, all replicas
  std::int64_t micro_batch = 4;    ///< sequences per micro-batch per replica
  std::int64_t steps = 200;
  std::string schedule = "1f1b";
  std::string optimizer = "adamw";
  std::string dtype = "float32";
  double lr = 1e-3;
  double min_lr = 1e-4;
  std::int64_t warmup_steps = 20;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  bool recompute = false;           ///< --recompute: recompute each block's activations in backward
  std::int64_t eval_interval = 50;  ///< validation loss every N steps (and after the last)
  std::int64_t eval_iters = 0;      ///< validation windows used (0: all)
  std::string metrics;              ///< JSONL file appended by rank 0
  std::string save;                 ///< checkpoint folder to write (empty: none)
  std::int64_t save_interval = 0;   ///< save every N steps (0: only after the last step)
  std::string load;                 ///< checkpoint folder to resume from (its newest step)
  double peak_gflops = 0.0;         ///< one rank's peak, for MFU (0: unknown)
  std::string progress = "auto";    ///< --progress: auto (in place on a terminal, else off),
                                    ///< in-place, lines or off
  std::int64_t stop_after = 0;      ///< stop after this step, as if interrupted (0: run to --steps)
  std::string fault;                ///< test only: an nn::Fault name
};

/// Adds the `train` subcommand and its flags to `app`.
CLI::App& add_train_command(CLI::App& app, TrainOptions& options);

/// Trains on every rank of `world`. Rank 0 prints the topology and the parameter count per rank
/// first, then one line per step (loss, learning rate, gradient norm, ms, tokens/s) and the
/// validation loss at each eval interval. Returns 0, or 1 when the loss stops being finite
/// (naming the step). Throws comm::ConfigError (agreed over all ranks, before any training)
/// for sizes that do not divide, non-finite or non-positive rates or clip, unknown schedule /
/// optimizer / dtype names, unreadable, empty or too short data, or a --load checkpoint that is
/// missing, damaged or of other model sizes. With --load the run continues at the step after
/// the checkpoint's, on any topology (parameters and AdamW moments are resharded), with the
/// checkpoint's --seed; with --save it writes DIR/step_<k>/ every --save-interval steps and
/// after the last. --stop-after K ends the run after step K (saving it with --save) while the
/// learning-rate schedule stays that of --steps, so a later --load continues as if never stopped.
int run_train(const TrainOptions& options, comm::Communicator world);

}  // namespace mpitron::app
