// `mpitron bench gpt`: times the GPT training step (nn::GptTrainer::step: forward, backward,
// gradient reduction, clipping, AdamW) on seeded random tokens at any (tp, cp, pp, dp), and
// reports what context parallelism changes: peak memory per rank beside the estimate, each cp
// rank's attention time (the zigzag's balance), and the ring's waits (its overlap).
// docs/context-parallel.md#measuring describes the figures.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "app/common/options.h"

namespace mpitron::app {

struct BenchGptOptions {
  CommonOptions common;
  std::string arch = "gpt2";  ///< --arch: gpt2 or llama
  std::int64_t layers = 2;
  std::int64_t hidden = 128;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 0;  ///< llama's key/value heads (0: heads)
  std::int64_t vocab = 256;
  std::int64_t seq = 1024;         ///< tokens per sequence (the whole sequence, before CP)
  std::int64_t micro_batch = 1;    ///< sequences per micro-batch
  std::int64_t micro_batches = 1;  ///< micro-batches per step and replica
  int steps = 3;
  int warmup = 1;
  bool recompute = false;          ///< recompute each block's activations in backward
  bool sequence_parallel = false;  ///< activations split along seq over tp (train's flag)
  bool bf16 = false;               ///< train --bf16's step (GptTrainOptions::bf16, bfloat16 GEMMs)
  bool beside_float32 = false;  ///< with bf16: time a float32 trainer's steps alternating with it
  bool no_cp_prefetch = false;  ///< the ring waits for each transfer before computing
};

/// Adds the `gpt` subcommand and its flags (the common ones, --cp --cp-comm --no-cp-prefetch,
/// --arch --layers --hidden --heads --kv-heads --vocab --seq --micro-batch --micro-batches,
/// --steps --warmup --recompute --sequence-parallel --bf16 --beside-float32) to `bench`.
CLI::App& add_bench_gpt_command(CLI::App& bench, BenchGptOptions& options);

/// Runs warm-up and timed GptTrainer steps on every rank (each replica's micro-batches of random
/// tokens in [0, vocab) from --seed and its dp rank, the same on its tp, cp and pp ranks). Rank 0
/// prints:
/// - ms/step and tokens/s (dp x micro-batches x micro-batch x seq tokens per step);
/// - the peak RSS per rank (MiB) beside nn::estimate_gpt_memory's peak and its activations
///   (seq/cp tokens, the schedule's micro-batches in flight; AdamW, float32 or --bf16, not
///   sharded), and
///   the compute device's allocator peaks: bytes in use, and with its cache;
/// - per rank, the seconds per timed step that context-parallel attention spent computing blocks
///   and waiting for key/value transfers (nn::cp_attention_times, reset after warm-up; zero at
///   cp 1, where the fused attention runs), and the balance: the largest max/min of the compute
///   seconds within a cp group;
/// - each rank's share of the timed steps spent in comm's wait routine (comm::wait_seconds, the
///   cp transfers included) and in the cp waits (timed around the ring's or all-gather's wait
///   calls, so a little above their part of the former).
/// With --json it appends one line {"tool", "bench": "gpt", "config" (the flags, --steps and
/// --warmup among them), "cp_comm", "cp_prefetch",
/// "recompute", "bf16", "ms_per_step", "tokens_per_s", "peak_rss_mib_by_rank",
/// "memory_estimate_mib_by_rank", "memory_estimate_activations_mib_by_rank",
/// "allocator_peak_in_use_mib_by_rank", "allocator_peak_held_mib_by_rank",
/// "attention_compute_s_by_rank", "cp_wait_s_by_rank" (seconds per step), "cp_balance" (null at
/// cp 1), "comm_wait_share_by_rank", "cp_wait_share_by_rank" (fractions of the step)}.
///
/// With --beside-float32 (and --bf16), once those figures are taken, a float32 trainer of the
/// same model and initialization runs --warmup steps (at least one), then one untimed pair (a
/// step right after the other trainer's start-up took up to twice its later ones); then --steps
/// pairs of steps alternate
/// between the two trainers (which goes first alternates too), each step timed alone between
/// barriers, so that a machine whose speed drifts slows both alike; rank 0 prints each
/// trainer's median and fastest ms/step and the median of the pairs' bf16 / float32 ratios
/// (its range beside it), and --json's line gains "beside_float32": {"bf16_ms", "float32_ms"
/// (per pair), "ratio_median"}. Throws comm::ConfigError (one line, agreed on every rank) for
/// sizes nn::gpt_size_error refuses, a seq that does not split into 2 cp zigzag chunks, a tensor
/// above kMaxTensorElements, --kv-heads without --arch llama, or --beside-float32 without
/// --bf16.
int run_bench_gpt(const BenchGptOptions& options, comm::Communicator world);

}  // namespace mpitron::app
