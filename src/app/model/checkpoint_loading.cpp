#include "app/model/checkpoint_loading.h"

#include <fmt/format.h>

#include "app/common/init_from.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "nn/checkpoint/hf_llama.h"
#include "nn/models/gpt_pretrained.h"

namespace mpitron::app {

void add_model_source_options(CLI::App& c, ModelSource& source) {
  c.add_option("--load", source.load,
               "Checkpoint folder (its newest complete step); or give --init-from");
  c.add_option("--init-from", source.init_from,
               "Another tool's weights instead of --load: an llm.c model file, GPT-2 safetensors "
               "(nanoGPT's or Hugging Face's names), a Hugging Face Llama folder; sizes from it");
  add_size_option(c, "--heads", source.heads,
                  "Attention heads of a --init-from safetensors GPT-2 file (it does not record "
                  "them)");
  c.add_option("--gelu", source.gelu,
               "MLP activation of a --init-from GPT-2 file: tanh (GPT-2's, the default) or erf "
               "(what export says a --gelu erf run needs)")
      ->check(CLI::IsMember({"erf", "tanh"}));
}

nn::MasterInit model_init(const LoadedRun& run, kernels::DType dtype) {
  if (run.pretrained) return nn::pretrained_init(*run.pretrained, dtype, run.device);
  return nn::checkpoint_init(run.checkpoint, dtype, run.device);
}

namespace {

// This rank's model: the checkpoint's step, or --init-from's weights; sets run.config.
void read_model(const ModelSource& source, LoadedRun& run) {
  if (source.load.empty() && source.init_from.empty()) {
    throw comm::ConfigError("give --load DIR or --init-from FILE_OR_FOLDER");
  }
  if (!source.load.empty() && !source.init_from.empty()) {
    throw comm::ConfigError("give --load DIR or --init-from FILE_OR_FOLDER, not both");
  }
  if (!source.init_from.empty()) {
    InitFromFlags flags;
    flags.init_from = source.init_from;
    flags.heads = source.heads;
    if (source.heads > 0) flags.typed.insert("heads");
    if (!source.gelu.empty()) {
      if (nn::is_hf_llama_path(source.init_from)) {
        throw comm::ConfigError(fmt::format(
            "--gelu is GPT-2's MLP activation, and --init-from {} is a Llama folder (SwiGLU)",
            source.init_from));
      }
      flags.typed.insert("gelu");
      run.config.gelu = nn::gelu_form_from_string(source.gelu);
    }
    run.pretrained = load_init_from(flags, run.config);
    // A float32 model from bfloat16 values: said once, in every line that names the weights.
    run.label = source.init_from +
                (run.pretrained->stored_bfloat16 ? " (bfloat16 weights, widened to float32)" : "");
    return;
  }
  if (source.heads > 0) {
    throw comm::ConfigError("--heads goes with --init-from: a checkpoint records its heads");
  }
  if (!source.gelu.empty()) {
    throw comm::ConfigError("--gelu goes with --init-from: a checkpoint records its GELU");
  }
  try {
    run.checkpoint = nn::load_gpt_checkpoint(source.load, /*with_moments=*/false);
  } catch (const std::exception& e) {
    throw comm::ConfigError(e.what());
  }
  run.config = run.checkpoint.config;
  run.label = fmt::format("{} step {}", source.load, run.checkpoint.step);
}

}  // namespace

LoadedRun load_model_agreed(
    const std::string& what, const CommonOptions& common, const ModelSource& source,
    comm::Communicator& world,
    const std::function<std::string(const nn::GptConfig&, const ParallelSizes&)>& extra_checks) {
  LoadedRun run;
  comm::agree_on_configuration(world, [&] {
    run.sizes = resolve_parallel_sizes(common, world.size());
    run.device = resolve_device(common.device);
    read_model(source, run);
    run.config.padded_vocab = nn::padded_vocab_size(run.config.vocab, run.sizes.tp);
    if (const auto error = nn::gpt_size_error(run.config, run.sizes.tp, run.sizes.pp)) {
      throw comm::ConfigError(*error);
    }
    const std::string settings = extra_checks(run.config, run.sizes);
    run.log = prepare_run(common, world);
    if (world.rank() == 0) {
      for (const std::string& why : run.checkpoint.skipped)
        run.log->warn("warning: --load {}: skipped a newer step that does not load: {}",
                      source.load, why);
    }
    // The model as read (so --heads and --gelu too) and a fingerprint of its values: ranks that
    // read other files under the same name, or were given other flags, disagree.
    const std::string weights = fmt::format(
        "{} model={} weights_fnv={:016x}",
        source.load.empty() ? "init_from=" + source.init_from
                            : fmt::format("load={} step={}", source.load, run.checkpoint.step),
        nn::to_json(run.config).dump(),
        nn::weights_fingerprint(run.pretrained ? run.pretrained->tensors : run.checkpoint.full));
    return fmt::format("mpitron {} {} tp={} pp={} dp={} cp={} cp_comm={} {} {}", MPITRON_VERSION,
                       what, run.sizes.tp, run.sizes.pp, run.sizes.dp, run.sizes.cp, common.cp_comm,
                       weights, settings);
  });
  return run;
}

void warn_if_trained_with_bf16(const LoadedRun& run, bool bf16, const std::string& what,
                               const comm::Communicator& world) {
  const nlohmann::json& meta = run.checkpoint.meta;  // null with --init-from
  if (world.rank() != 0 || bf16 || !meta.is_object() || !meta.value("bf16", false)) return;
  run.log->warn(
      "warning: {} was trained with --bf16; without --bf16 {} computes its float32 master "
      "weights in float32, not as the run did (give --bf16 for that)",
      run.label, what);
}

}  // namespace mpitron::app
