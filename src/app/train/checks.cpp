#include "app/train/checks.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>

#include "app/common/context_parallel_options.h"
#include "app/train/stop.h"
#include "comm/errors.h"
#include "nn/checkpoint/checkpoint.h"
#include "nn/checkpoint/hf_llama.h"
#include "nn/parallel/schedule.h"
#include "nn/wording.h"

namespace mpitron::app {

namespace {

// Whether `message` names `name value` ("kv heads 3") as a whole, not inside a longer name
// ("heads 3" inside "kv heads 3").
bool names_size(const std::string& message, const std::string& name, std::int64_t value) {
  const std::string text = fmt::format("{} {}", name, value);
  const auto preceded_by = [&message](std::size_t at, std::string_view word) {
    return at >= word.size() && message.compare(at - word.size(), word.size(), word) == 0;
  };
  for (std::size_t at = message.find(text); at != std::string::npos;
       at = message.find(text, at + 1)) {
    const std::size_t end = at + text.size();
    const bool starts =
        at == 0 || (message[at - 1] == ' ' && !preceded_by(at, "kv ") && !preceded_by(at, "ffn "));
    if (starts && (end == message.size() || std::isdigit(message[end]) == 0)) return true;
  }
  return false;
}

// `error` (a model size rule's message), with the sizes it names that a --model preset set
// rather than the command line: "heads 4 is not divisible by kv heads 3 (kv heads 3 comes from
// --model smollm-135m)".
std::string with_preset_sizes(const TrainOptions& o, const nn::GptConfig& config,
                              std::string error) {
  if (!nn::model_preset(o.model)) return error;
  const struct {
    const char* flag;
    const char* name;
    std::int64_t value;
  } sizes[] = {{"kv-heads", "kv heads", config.kv_head_count()},
               {"ffn-hidden", "ffn hidden", config.ffn_size()},
               {"heads", "heads", config.heads},
               {"hidden", "hidden", config.hidden},
               {"layers", "layers", config.layers},
               {"vocab", "vocab", config.vocab}};
  std::string from_preset;
  for (const auto& size : sizes) {
    if (!o.model_flags_typed.contains(size.flag) && names_size(error, size.name, size.value)) {
      from_preset += fmt::format("{}{} {}", from_preset.empty() ? "" : ", ", size.name, size.value);
    }
  }
  if (from_preset.empty()) return error;
  return fmt::format("{} ({} {} from --model {})", error, from_preset,
                     from_preset.find(',') == std::string::npos ? "comes" : "come", o.model);
}

// Where the model's block size came from, for messages: "--block-size 512", or "the block size
// 512 of --init-from llama/" or "of --model smollm-135m".
std::string block_size_origin(const TrainOptions& o, const nn::GptConfig& config) {
  if (o.model_flags_typed.contains("block-size")) {
    return fmt::format("--block-size {}", config.block_size);
  }
  if (!o.init_from.empty()) {
    return fmt::format("the block size {} of --init-from {}", config.block_size, o.init_from);
  }
  if (nn::model_preset(o.model)) {
    return fmt::format("the block size {} of --model {}", config.block_size, o.model);
  }
  return fmt::format("--block-size {}", config.block_size);
}

}  // namespace

void check_family_flags(const TrainOptions& o, nn::Arch arch) {
  const std::optional<nn::GptConfig> preset = nn::model_preset(o.model);
  const auto typed = [&o](const char* flag) { return o.model_flags_typed.contains(flag); };
  if (preset && typed("arch") && preset->arch != arch) {
    throw comm::ConfigError(fmt::format("--model {} is a {} model, not --arch {}", o.model,
                                        nn::to_string(preset->arch), nn::to_string(arch)));
  }
  if (arch == nn::Arch::gpt2) {
    for (const char* flag : {"kv-heads", "ffn-hidden", "rope-theta", "untie-embeddings"}) {
      if (!typed(flag)) continue;
      throw comm::ConfigError(
          preset ? fmt::format("--{} is a llama flag: --model {} is a gpt2 model", flag, o.model)
                 : fmt::format("--{} is a llama flag: add --arch llama", flag));
    }
    return;
  }
  if (typed("gelu")) throw comm::ConfigError("--gelu is a gpt2 flag: the llama MLP is SwiGLU");
  if (!o.init_from.empty() && !nn::is_hf_llama_path(o.init_from)) {
    const std::string llama = preset && !typed("arch")
                                  ? fmt::format("--model {} (a llama model)", o.model)
                                  : std::string("--arch llama");
    throw comm::ConfigError(
        fmt::format("--init-from {}: {} reads a Hugging Face Llama folder (config.json and "
                    "model.safetensors), not a GPT-2 file",
                    o.init_from, llama));
  }
}

void check_train_flags(const TrainOptions& o, const nn::GptConfig& config, const ParallelSizes& s) {
  check_train_settings(o);
  if (o.seq < 1) throw comm::ConfigError(fmt::format("--seq must be >= 1, got {}", o.seq));
  if (config.layers >= 1 && o.virtual_stages > config.layers) {
    throw comm::ConfigError(fmt::format("--virtual-stages {} is more than the {} layers",
                                        o.virtual_stages, config.layers));
  }
  const auto virtual_stages = static_cast<int>(o.virtual_stages);
  if (const auto error = nn::gpt_size_error(config, s.tp, s.pp, virtual_stages)) {
    throw comm::ConfigError(with_preset_sizes(o, config, *error));
  }
  if (o.global_batch % (o.micro_batch * s.dp) != 0) {
    throw comm::ConfigError(
        fmt::format("--global-batch {} is not divisible by --micro-batch {} x dp {}",
                    o.global_batch, o.micro_batch, s.dp));
  }
  const std::int64_t micro_batches = o.global_batch / (o.micro_batch * s.dp);
  if (virtual_stages > 1 && s.pp < 2) {
    throw comm::ConfigError(
        fmt::format("--virtual-stages {} needs --pp 2 or more, got --pp {}", virtual_stages, s.pp));
  }
  if (virtual_stages > 1 && micro_batches % s.pp != 0) {
    throw comm::ConfigError(fmt::format(
        "--virtual-stages {} needs micro-batches per step (--global-batch / (--micro-batch x dp) "
        "= {}) a multiple of --pp {}",
        virtual_stages, micro_batches, s.pp));
  }
  if (!o.model.empty() && !nn::model_preset(o.model)) {
    throw comm::ConfigError(
        fmt::format("--model '{}' is not one of: {}", o.model, nn::model_preset_names()));
  }
  check_context_parallel_sequence(o.seq, s, o.sequence_parallel);
  if (o.sequence_parallel && o.seq % s.tp != 0) {
    throw comm::ConfigError(
        fmt::format("--sequence-parallel needs --seq {} divisible by tp {}", o.seq, s.tp));
  }
  if (o.seq > config.block_size) {
    throw comm::ConfigError(
        fmt::format("--seq {} is longer than {}", o.seq, block_size_origin(o, config)));
  }
  // A value finite as a double can still be infinite in the training dtype (1e39 in float32).
  for (const auto& [flag, value] :
       {std::pair{"lr", o.lr}, std::pair{"min-lr", o.min_lr}, std::pair{"norm-eps", o.norm_eps},
        std::pair{"rope-theta", o.rope_theta}}) {
    if (o.dtype == "float32" && value > std::numeric_limits<float>::max()) {
      throw comm::ConfigError(fmt::format("--{} {} is not finite in float32 (at most {:g})", flag,
                                          value, std::numeric_limits<float>::max()));
    }
  }
  if (o.min_lr > o.lr) {
    throw comm::ConfigError(fmt::format("--min-lr {} is above --lr {}", o.min_lr, o.lr));
  }
  stop_signals(o.exit_signal);  // names an unknown --exit-signal
  if (o.stop_after > o.steps) {
    throw comm::ConfigError(
        fmt::format("--stop-after {} is beyond --steps {}", o.stop_after, o.steps));
  }
}

void check_memory(const TrainOptions& o, const nn::GptConfig& config, const ParallelSizes& sizes,
                  const nn::GptTrainOptions& train, int ranks_on_node) {
  const auto micro = static_cast<int>(o.global_batch / (o.micro_batch * sizes.dp));
  const int v = train.virtual_stages;
  const std::int64_t in_flight =
      (nn::chunks_in_flight(train.schedule, sizes.pp, 0, micro, v) + v - 1) / v;
  const double need =
      nn::gpt_step_memory_bytes(config, sizes.tp, sizes.pp, o.micro_batch, o.seq / sizes.cp,
                                in_flight, kernels::dtype_size(train.dtype), o.recompute,
                                o.use_distributed_optimizer ? sizes.dp * sizes.cp : 1);
  const double node =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (need * ranks_on_node > node) {
    throw comm::ConfigError(fmt::format(
        "this run needs about {:.1f} GiB per rank (parameters, gradients, AdamW moments and "
        "activations), {} on this node have {:.1f} GiB: use fewer layers, a smaller "
        "--hidden, --seq or --micro-batch, {}or more ranks",
        need / (1 << 30), nn::counted(ranks_on_node, "rank"), node / (1 << 30),
        o.recompute ? "" : "--recompute, "));
  }
}

void check_outputs(const TrainOptions& o) {
  if (!o.save.empty()) {
    std::error_code error;
    std::filesystem::create_directories(o.save, error);
    if (error || !std::filesystem::is_directory(o.save)) {
      throw comm::ConfigError(fmt::format("--save {}: cannot create the folder{}", o.save,
                                          error ? ": " + error.message() : std::string()));
    }
  }
  if (!o.metrics.empty()) {
    std::ofstream probe(o.metrics, std::ios::app);
    if (!probe) {
      throw comm::ConfigError(
          fmt::format("--metrics {}: cannot open for appending: {}", o.metrics,
                      std::error_code(errno, std::generic_category()).message()));
    }
  }
}

std::optional<std::string> steps_to_overwrite(const TrainOptions& o) {
  if (o.save.empty() || !o.load.empty()) return std::nullopt;
  const std::optional<std::int64_t> step = nn::latest_step(o.save);
  if (!step) return std::nullopt;
  std::string run = "an earlier run";
  try {
    const nlohmann::json meta = nn::read_meta(o.save, *step);
    if (meta.contains("run_id") && meta["run_id"].is_string() &&
        !meta["run_id"].get<std::string>().empty()) {
      run = "run " + meta["run_id"].get<std::string>();
    }
  } catch (const std::exception&) {  // a damaged meta.json still holds a step: named alike
  }
  const std::string steps = fmt::format("{}'s steps up to step {}", run, *step);
  if (!o.overwrite_checkpoints) {
    throw comm::ConfigError(fmt::format(
        "--save {} holds {}: resume that run with --load {}, or give --overwrite-checkpoints to "
        "replace them",
        o.save, steps, o.save));
  }
  return steps;
}

bool first_start_of_requeued_run(const TrainOptions& o) {
  std::error_code error;
  return !o.save.empty() &&
         std::filesystem::weakly_canonical(o.load, error) ==
             std::filesystem::weakly_canonical(o.save, error) &&
         !nn::latest_step(o.load);
}

}  // namespace mpitron::app
