// The settings of `mpitron train`, and the one table that says for each of them its flag, its
// member, its --help line, its check, its key in the run's configuration (the metrics file's
// config line and the start-up agreement) and where a checkpoint records it (so that a resumed
// run can say which of them differ from the run that saved it).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "app/common/options.h"

namespace mpitron::app {

/// Every flag of `mpitron train`, as parsed.
struct TrainOptions {
  CommonOptions common;
  std::string data;  ///< a file read as bytes, or llm.c shards; empty: the built-in corpus
  std::string data_order = "random";  ///< random windows, or llm.c's sequential batches
  std::string model;                  ///< a preset (nn::model_preset) for the model flags not given
  std::int64_t vocab = 256;
  std::int64_t layers = 4;
  std::int64_t hidden = 256;
  std::int64_t heads = 8;
  std::int64_t seq = 128;
  std::int64_t block_size = 0;    ///< the position table's length (0: seq)
  std::string gelu = "erf";       ///< the MLP's GELU: erf or tanh
  std::string arch = "gpt2";      ///< the decoder family: gpt2 or llama (nn::Arch)
  std::int64_t kv_heads = 0;      ///< llama: key/value heads (0: --heads)
  std::int64_t ffn_hidden = 0;    ///< llama: the SwiGLU MLP's inner size (0: 4 --hidden)
  double rope_theta = 10000.0;    ///< llama: RoPE's base
  double norm_eps = 1e-5;         ///< the LayerNorm's or RMSNorm's epsilon
  bool untie_embeddings = false;  ///< llama: a separate LM head
  /// The model flags the command line gave ("vocab", "layers", "hidden", "heads", "block-size",
  /// "gelu", "arch", ...); a known --model fills in the others.
  std::set<std::string> model_flags_typed;
  std::int64_t global_batch = 32;  ///< sequences per optimizer step, all replicas
  std::int64_t micro_batch = 4;    ///< sequences per micro-batch per replica
  std::int64_t steps = 200;
  std::string schedule = "1f1b";
  std::int64_t virtual_stages = 1;  ///< model chunks per pipeline stage (interleaved 1F1B: >= 2)
  std::string optimizer = "adamw";
  std::string dtype = "float32";
  /// --bf16: GEMMs on bfloat16 operands with float32 accumulation, master weights, main
  /// gradients and optimizer states (kernels::GemmOperands::bfloat16), and bfloat16 activations
  /// and gradients between pipeline stages (PipelineSpec::bf16_wire; docs/precision.md)
  bool bf16 = false;
  /// --grad-reduce-in-bf16 (with --bf16): the DP gradient reduction carries and sums bfloat16,
  /// half the bytes (comm::Wire::bf16; Megatron-LM's flag)
  bool grad_reduce_in_bf16 = false;
  double lr = 1e-3;
  double min_lr = 1e-4;
  std::int64_t warmup_steps = 20;
  std::string lr_decay_style = "cosine";
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  bool recompute = false;  ///< --recompute: recompute each block's activations in backward
  /// --use-distributed-optimizer: ZeRO stage 1 (nn::GptTrainOptions::distributed_optimizer)
  bool use_distributed_optimizer = false;
  bool sequence_parallel = false;   ///< --sequence-parallel: activations split along seq over tp
  std::int64_t eval_interval = 50;  ///< validation loss every N steps (and after the last)
  std::int64_t eval_iters = 0;      ///< validation windows used (0: all)
  std::string metrics;              ///< JSONL file appended by rank 0
  std::string save;                 ///< checkpoint folder to write (empty: none)
  std::int64_t save_interval = 0;   ///< save every N steps (0: only after the last step)
  /// --overwrite-checkpoints: a run without --load replaces the steps another run left in --save
  bool overwrite_checkpoints = false;
  std::string load;               ///< checkpoint folder to resume from (its newest step)
  std::string init_from;          ///< GPT-2 weights to start from (llm.c model file or safetensors)
  double peak_gflops = 0.0;       ///< one rank's peak, for MFU (0: unknown)
  std::string progress = "auto";  ///< --progress: auto (in place on a terminal, else off),
                                  ///< in-place, lines or off
  std::int64_t stop_after = 0;    ///< stop after this step, as if interrupted (0: run to --steps)
  std::string exit_signal;        ///< more signals that stop gracefully, comma-separated
  double exit_duration_in_mins = 0.0;  ///< stop gracefully after this many minutes (0: never)
  std::string fault;                   ///< test only: an nn::Fault name
};

/// The check a setting's value must pass before the run starts (every rank alike).
enum class SettingCheck {
  none,
  at_least_one,            ///< "--steps must be >= 1, got 0"
  at_least_zero,           ///< "--eval-iters must be >= 0, got -1"
  finite_positive,         ///< "--lr must be a finite positive number, got nan"
  finite_at_least_zero,    ///< "--weight-decay must be finite and >= 0, got -1"
  below_one_at_least_zero  ///< "--adam-beta2 must be in [0, 1), got 1"
};

/// One row of train's settings table.
struct TrainSetting {
  const char* flag;  ///< without the leading "--"
  std::variant<std::int64_t TrainOptions::*, double TrainOptions::*, std::string TrainOptions::*,
               bool TrainOptions::*>
      member;
  const char* help;
  SettingCheck check = SettingCheck::none;
  /// In the run's configuration under the flag's name with '_' for '-' (e.g. "global_batch").
  bool in_config = false;
  /// Where a checkpoint's run settings (meta.json) record the value, as a JSON pointer (e.g.
  /// "/lr_schedule/lr"), or nullptr: a resumed run warns when its value differs from the one
  /// recorded there.
  const char* checkpoint_pointer = nullptr;
  /// --help shows the default after the type ("TEXT=1f1b"); off where the help says it.
  bool show_default = true;
};

/// The table: train's own settings in --help order (the common flags, --peak-gflops,
/// --progress and the hidden --inject-fault are registered by their shared helpers).
const std::vector<TrainSetting>& train_settings();

/// Adds the `train` subcommand and its flags to `app`. Once parsed, a known --model fills in
/// the sizes (vocab, layers, hidden, heads, seq and block size, GELU) whose flags were not given,
/// and model_flags_typed records the model flags the command line gave.
CLI::App& add_train_command(CLI::App& app, TrainOptions& options);

/// Throws comm::ConfigError with the row's message for the first setting that fails its check.
void check_train_settings(const TrainOptions& options);

/// The settings marked in_config, as {"global_batch": 32, ...}.
nlohmann::json train_config(const TrainOptions& options);

/// The settings a checkpoint records (those with a checkpoint_pointer), each at its pointer:
/// {"dtype", "optimizer", "adamw": {"beta1", "beta2", "eps"}, "lr_schedule": {"lr", "min_lr",
/// "warmup_steps", "total_steps", "style"}, "sampler": {"global_batch"}, "data"}.
nlohmann::json train_checkpoint_settings(const TrainOptions& options);

}  // namespace mpitron::app
