#include "app/train/settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "app/common/context_parallel_options.h"
#include "app/common/help.h"
#include "app/common/options.h"
#include "app/common/progress.h"
#include "app/report/throughput.h"
#include "comm/errors.h"
#include "nn/models/gpt_config.h"

namespace mpitron::app {

namespace {

using O = TrainOptions;
using Check = SettingCheck;

// The rule of SettingCheck `check` for `value` (an integer or a number): the message of a
// failure, or empty.
template <class T>
std::string check_failure(const char* flag, Check check, T value) {
  switch (check) {
    case Check::none:
      return {};
    case Check::at_least_one:
      return value >= 1 ? std::string() : fmt::format("--{} must be >= 1, got {}", flag, value);
    case Check::at_least_zero:
      return value >= 0 ? std::string() : fmt::format("--{} must be >= 0, got {}", flag, value);
    case Check::finite_positive:
      return std::isfinite(value) && value > 0.0
                 ? std::string()
                 : fmt::format("--{} must be a finite positive number, got {}", flag, value);
    case Check::finite_at_least_zero:
      return std::isfinite(value) && value >= 0.0
                 ? std::string()
                 : fmt::format("--{} must be finite and >= 0, got {}", flag, value);
    case Check::below_one_at_least_zero:
      return value >= 0.0 && value < 1.0
                 ? std::string()
                 : fmt::format("--{} must be in [0, 1), got {}", flag, value);
  }
  return {};
}

std::string config_key(const char* flag) {
  std::string key = flag;
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

// The value of `setting` in `options` as JSON.
nlohmann::json value_of(const TrainSetting& setting, const TrainOptions& options) {
  return std::visit([&options](auto member) { return nlohmann::json(options.*member); },
                    setting.member);
}

// Fills in the sizes of a known --model whose flags were not given (an unknown name is left to
// the start-up checks, which end every rank with one line).
// The model flags a preset sets (and --init-from's file does).
constexpr const char* kModelFlags[] = {
    "vocab", "layers",   "hidden",     "heads",      "block-size",       "gelu",
    "arch",  "kv-heads", "ffn-hidden", "rope-theta", "untie-embeddings", "norm-eps"};

void apply_model(const CLI::App& command, TrainOptions& o) {
  const std::optional<nn::GptConfig> model = nn::model_preset(o.model);
  if (!model) return;
  const auto fill = [&command](const char* flag, auto& member, auto value) {
    if (command.count(std::string("--") + flag) == 0) member = value;
  };
  fill("vocab", o.vocab, model->vocab);
  fill("layers", o.layers, model->layers);
  fill("hidden", o.hidden, model->hidden);
  fill("heads", o.heads, model->heads);
  fill("seq", o.seq, model->block_size);
  fill("block-size", o.block_size, model->block_size);
  fill("gelu", o.gelu, std::string(nn::to_string(model->gelu)));
  fill("arch", o.arch, std::string(nn::to_string(model->arch)));
  if (!model->llama()) return;
  fill("kv-heads", o.kv_heads, model->kv_head_count());
  fill("ffn-hidden", o.ffn_hidden, model->ffn_size());
  fill("rope-theta", o.rope_theta, model->rope_theta);
  fill("norm-eps", o.norm_eps, model->norm_eps);
  fill("untie-embeddings", o.untie_embeddings, !model->tied_embeddings);
}

// Records the model flags given on the command line.
void note_model_flags_typed(const CLI::App& command, TrainOptions& o) {
  for (const char* flag : kModelFlags) {
    if (command.count(std::string("--") + flag) > 0) o.model_flags_typed.insert(flag);
  }
}

}  // namespace

const std::vector<TrainSetting>& train_settings() {
  static const std::vector<TrainSetting> table{
      {"data", &O::data, "Text file (as bytes), or llm.c token shards: file, folder or glob",
       Check::none, false, "/data"},
      {"data-order", &O::data_order, "random windows, or sequential (llm.c's batches)", Check::none,
       true, "/sampler/order"},
      {"model", &O::model, "Preset for the model flags not given: gpt2, smollm-135m, ...",
       Check::none, true},
      {"vocab", &O::vocab, "Vocabulary size (bytes use 0..255)", Check::none, true},
      {"layers", &O::layers, "Transformer blocks", Check::none, true},
      {"hidden", &O::hidden, "Hidden size", Check::none, true},
      {"heads", &O::heads, "Attention heads", Check::none, true},
      {"seq", &O::seq, "Sequence length", Check::none, true},
      {"block-size", &O::block_size, "Position table's length (0: --seq)", Check::at_least_zero,
       true},
      {"gelu", &O::gelu, "MLP activation: erf, or tanh (GPT-2's)", Check::none, true},
      {"arch", &O::arch, "Decoder family: gpt2, or llama (RMSNorm, RoPE, SwiGLU, GQA)", Check::none,
       true},
      {"kv-heads", &O::kv_heads, "llama: key/value heads (0: --heads)", Check::at_least_zero, true},
      {"ffn-hidden", &O::ffn_hidden, "llama: SwiGLU inner size (0: 4 x --hidden)",
       Check::at_least_zero, true},
      {"rope-theta", &O::rope_theta, "llama: RoPE base", Check::finite_positive, true},
      {"norm-eps", &O::norm_eps, "LayerNorm / RMSNorm epsilon", Check::finite_positive, true},
      {"untie-embeddings", &O::untie_embeddings, "llama: an LM head of its own", Check::none, true},
      {"global-batch", &O::global_batch, "Sequences per optimizer step, all replicas",
       Check::at_least_one, true, "/sampler/global_batch"},
      {"micro-batch", &O::micro_batch, "Sequences per micro-batch per replica", Check::at_least_one,
       true},
      {"steps", &O::steps, "Optimizer steps", Check::at_least_one, true,
       "/lr_schedule/total_steps"},
      {"schedule", &O::schedule, "Pipeline schedule: 1f1b or afab", Check::none, true},
      {"virtual-stages", &O::virtual_stages,
       "Model chunks per pipeline stage: interleaved 1F1B with 2 or more", Check::at_least_one,
       true},
      {"optimizer", &O::optimizer, "adamw or sgd", Check::none, true, "/optimizer"},
      {"dtype", &O::dtype, "float32, or float64 (CPU checks)", Check::none, true, "/dtype"},
      {"bf16", &O::bf16, "bfloat16 GEMMs; float32 master weights and gradients", Check::none, true,
       "/bf16"},
      {"grad-reduce-in-bf16", &O::grad_reduce_in_bf16,
       "with --bf16: reduce the DP gradients in bfloat16", Check::none, true,
       "/grad_reduce_in_bf16"},
      {"lr", &O::lr, "Peak learning rate", Check::finite_positive, true, "/lr_schedule/lr"},
      {"min-lr", &O::min_lr, "Learning rate at the last step", Check::finite_at_least_zero, true,
       "/lr_schedule/min_lr"},
      {"warmup-steps", &O::warmup_steps, "Linear warmup steps, then the decay",
       Check::at_least_zero, true, "/lr_schedule/warmup_steps"},
      {"lr-decay-style", &O::lr_decay_style,
       "Decay to --min-lr: cosine (default), linear, constant", Check::none, true,
       "/lr_schedule/style", false},
      {"adam-beta1", &O::adam_beta1, "AdamW beta1", Check::below_one_at_least_zero, true,
       "/adamw/beta1"},
      {"adam-beta2", &O::adam_beta2, "AdamW beta2", Check::below_one_at_least_zero, true,
       "/adamw/beta2"},
      {"adam-eps", &O::adam_eps, "AdamW epsilon", Check::finite_positive, true, "/adamw/eps"},
      {"weight-decay", &O::weight_decay, "AdamW weight decay (not on biases/LayerNorm)",
       Check::finite_at_least_zero, true},
      {"grad-clip", &O::grad_clip, "Global gradient-norm clipping threshold",
       Check::finite_positive, true},
      {"recompute", &O::recompute, "Recompute each block's activations in backward (less memory)",
       Check::none, true},
      {"use-distributed-optimizer", &O::use_distributed_optimizer,
       "ZeRO-1: each DP replica keeps 1/dp of AdamW's moments", Check::none, true},
      {"sequence-parallel", &O::sequence_parallel,
       "LayerNorm and residual activations split along --seq over tp", Check::none, true},
      {"eval-interval", &O::eval_interval, "Validation loss every N steps (0: at the end)",
       Check::at_least_zero, true},
      {"eval-iters", &O::eval_iters, "Validation windows to use (0: all)", Check::at_least_zero,
       true},
      {"metrics", &O::metrics, "Append one JSON object per step / eval to this file"},
      {"save", &O::save, "Write checkpoints into this folder (DIR/step_<k>/)", Check::none, true},
      {"save-interval", &O::save_interval, "Save every N steps (0: after the last step)",
       Check::at_least_zero, true},
      {"overwrite-checkpoints", &O::overwrite_checkpoints,
       "Replace the steps another run left in --save (no --load)", Check::none, true},
      {"load", &O::load, "Resume from the newest checkpoint in this folder"},
      {"init-from", &O::init_from,
       "Start from GPT-2 weights (llm.c .bin or safetensors) or a Hugging Face Llama folder",
       Check::none, true},
      {"stop-after", &O::stop_after, "Stop (and save) after this step, on --steps' schedule",
       Check::at_least_zero, true},
      {"exit-signal", &O::exit_signal,
       "More signals that stop and save, e.g. SIGUSR2 (TERM, INT, USR1 do)", Check::none, true},
      {"exit-duration-in-mins", &O::exit_duration_in_mins,
       "Stop the same way after this many minutes (0, default: no limit)",
       Check::finite_at_least_zero, true, nullptr, false},
  };
  return table;
}

CLI::App& add_train_command(CLI::App& app, TrainOptions& o) {
  CLI::App& c = *app.add_subcommand(
      "train", "Train a GPT-2 or Llama-family language model with TP, PP (1F1B), DP and CP");
  add_common_options(c, o.common);
  add_context_parallel_options(c, o.common);
  for (const TrainSetting& s : train_settings()) {
    const std::string flag = std::string("--") + s.flag;
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(o.*member)>;
          if constexpr (std::is_same_v<T, bool>) {
            add_switch(c, flag, o.*member, s.help);
          } else {
            CLI::Option* option = c.add_option(flag, o.*member, s.help);
            if constexpr (std::is_same_v<T, std::int64_t>) option->check(size_at_most_max());
            bool empty_text = false;
            if constexpr (std::is_same_v<T, std::string>) empty_text = (o.*member).empty();
            if (s.show_default && !empty_text) option->capture_default_str();
          }
        },
        s.member);
  }
  c.parse_complete_callback([&c, &o] {
    note_model_flags_typed(c, o);
    apply_model(c, o);
  });
  add_peak_option(c, o.peak_gflops);
  add_progress_option(c, o.progress, "off");
  c.add_option("--inject-fault", o.fault, "Test only: break one parallel rule")->group("");
  add_example(c, "mpirun -np 8 mpitron train --tp 2 --pp 2 --dp 2 --data input.txt --save ckpt");
  return c;
}

void check_train_settings(const TrainOptions& options) {
  for (const TrainSetting& s : train_settings()) {
    const std::string failure = std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(options.*member)>;
          if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
            return check_failure(s.flag, s.check, options.*member);
          } else {
            return std::string();
          }
        },
        s.member);
    if (!failure.empty()) throw comm::ConfigError(failure);
  }
}

nlohmann::json train_config(const TrainOptions& options) {
  nlohmann::json config = nlohmann::json::object();
  for (const TrainSetting& s : train_settings()) {
    if (s.in_config) config[config_key(s.flag)] = value_of(s, options);
  }
  return config;
}

nlohmann::json train_checkpoint_settings(const TrainOptions& options) {
  nlohmann::json settings = nlohmann::json::object();
  for (const TrainSetting& s : train_settings()) {
    if (s.checkpoint_pointer)
      settings[nlohmann::json::json_pointer(s.checkpoint_pointer)] = value_of(s, options);
  }
  return settings;
}

}  // namespace mpitron::app
