#include "app/train/plan.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "app/common/context_parallel_options.h"
#include "app/common/init_from.h"
#include "app/train/checks.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "kernels/ops.h"
#include "nn/checkpoint/checkpoint.h"
#include "nn/checkpoint/gpt2_weights.h"
#include "nn/checkpoint/hf_llama.h"
#include "nn/fault_injection.h"
#include "nn/train/gpt_checkpoint.h"
#include "nn/wording.h"

namespace mpitron::app {

namespace {

template <class T>
T parse_choice(const char* flag, const std::string& text,
               std::initializer_list<std::pair<const char*, T>> choices) {
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
  }
  std::string names;
  for (const auto& choice : choices)
    names += (names.empty() ? "" : ", ") + std::string(choice.first);
  throw comm::ConfigError(fmt::format("--{} '{}' is not one of: {}", flag, text, names));
}

// The value of --`flag` that nn's `parse` reads from `text`; its error (which ends "'<text>' is
// not one of: ...") as "--<flag> '<text>' is not one of: ...".
template <typename T>
T parse_named(const char* flag, const std::string& text, T (*parse)(const std::string&)) {
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw comm::ConfigError(fmt::format("--{} {}", flag, what.substr(what.find('\''))));
  }
}

// Rank 0 warns about each setting of this run that differs from the one the --load checkpoint
// was trained with (the resumed run is then not the continuation of that run): the settings of
// this run against the checkpoint's meta.json, entry by entry.
void warn_resume_differences(const TrainOptions& o, const nlohmann::json& settings,
                             const nlohmann::json& meta, spdlog::logger& log) {
  for (const TrainSetting& s : train_settings()) {
    if (!s.checkpoint_pointer) continue;
    const nlohmann::json::json_pointer at(s.checkpoint_pointer);
    if (meta.contains(at) && meta.at(at) != settings.at(at)) {
      log.warn("warning: --{} is {} in this run but was {} in the run that saved --load {}", s.flag,
               settings.at(at).dump(), meta.at(at).dump(), o.load);
    }
  }
  // A change of --bf16, warned above, changes what computes anyway.
  const nlohmann::json float32_run(false);
  if (settings.contains("cpu_gemm") && meta.contains("cpu_gemm") &&
      meta.at("cpu_gemm") != settings.at("cpu_gemm") &&
      meta.value("bf16", float32_run) == settings.value("bf16", float32_run)) {
    // dump(): meta.json is the user's file, and its entry may be any JSON value.
    log.warn(
        "warning: the CPU GEMM is {} in this run but was {} in the run that saved --load {}: the "
        "losses continue within rounding, not bit for bit{}",
        settings.at("cpu_gemm").dump(), meta.at("cpu_gemm").dump(), o.load,
        o.bf16 ? " (under --bf16 the bfloat16 GEMM's path, which MPITRON_BF16_GEMM chooses)"
        : requested_gemm(o.common) == "auto"
            ? " (--gemm auto picks by measurement at the run's --threads; pin --gemm to keep it)"
            : "");
  }
  if (o.common.seed != 0 && meta.value("seed", o.common.seed) != o.common.seed) {
    log.warn("warning: --seed {} is ignored: a resumed run keeps the checkpoint's seed {}",
             o.common.seed, meta.value("seed", o.common.seed));
  }
}

// The stop signals of --exit-signal, or the default ones where it names an unknown signal
// (check_train_flags reports that on every rank).
std::vector<int> stop_signals_or_default(const std::string& exit_signal) {
  try {
    return stop_signals(exit_signal);
  } catch (const comm::ConfigError&) {
    return stop_signals("");
  }
}

// --init-from's file and the model flags to check against it.
nn::Gpt2Weights read_init_from(const TrainOptions& o, nn::GptConfig& config) {
  return load_init_from({.init_from = o.init_from,
                         .model = nn::model_preset(o.model) ? o.model : std::string(),
                         .typed = o.model_flags_typed,
                         .vocab = o.vocab,
                         .block_size = o.block_size,
                         .seq = o.seq,
                         .layers = o.layers,
                         .hidden = o.hidden,
                         .heads = o.heads,
                         .kv_heads = o.kv_heads,
                         .ffn_hidden = o.ffn_hidden,
                         .rope_theta = o.rope_theta,
                         .norm_eps = o.norm_eps,
                         .untie_embeddings = o.untie_embeddings},
                        config);
}

// The plan's part that the flags alone give, and --init-from's file, whose sizes are the
// model's: choices, sizes, device, progress, model, optimizer and schedule, seed. Reads the
// choices first and the model last, so that the checks run in one pass.
void read_flags(const TrainOptions& o, int world_size, TrainPlan& plan) {
  nn::GptTrainOptions& train = plan.train;
  train.schedule = parse_choice<nn::ScheduleKind>(
      "schedule", o.schedule,
      {{"1f1b", nn::ScheduleKind::one_f_one_b}, {"afab", nn::ScheduleKind::afab}});
  train.optimizer = parse_choice<nn::OptimizerKind>(
      "optimizer", o.optimizer,
      {{"adamw", nn::OptimizerKind::adamw}, {"sgd", nn::OptimizerKind::sgd}});
  plan.data_order = parse_choice<nn::DataOrder>(
      "data-order", o.data_order,
      {{"random", nn::DataOrder::random}, {"sequential", nn::DataOrder::sequential}});
  if (o.dtype == "bfloat16") {
    throw comm::ConfigError(
        "--dtype bfloat16 is not a parameter dtype: --bf16 trains in bfloat16 with float32 "
        "master weights (--dtype float32)");
  }
  train.dtype = parse_choice<kernels::DType>(
      "dtype", o.dtype, {{"float32", kernels::DType::f32}, {"float64", kernels::DType::f64}});
  if (o.bf16 && train.dtype != kernels::DType::f32) {
    throw comm::ConfigError("--bf16 needs --dtype float32 (its master weights), got --dtype " +
                            o.dtype);
  }
  if (o.grad_reduce_in_bf16 && !o.bf16) {
    throw comm::ConfigError(
        "--grad-reduce-in-bf16 needs --bf16 (a float32 run reduces its gradients in float32)");
  }
  const nn::GeluForm gelu = parse_named("gelu", o.gelu, nn::gelu_form_from_string);
  nn::Arch arch = parse_named("arch", o.arch, nn::arch_from_string);
  if (!o.init_from.empty() && nn::is_hf_llama_path(o.init_from)) {
    if (o.model_flags_typed.contains("arch") && arch != nn::Arch::llama) {
      throw comm::ConfigError(fmt::format(
          "--init-from {}: a Hugging Face Llama folder, but --arch {}", o.init_from, o.arch));
    }
    arch = nn::Arch::llama;
  }
  check_family_flags(o, arch);
  const nn::LrDecayStyle decay =
      parse_named("lr-decay-style", o.lr_decay_style, nn::lr_decay_style_from_string);
  plan.sizes = resolve_parallel_sizes(o.common, world_size);
  plan.device = resolve_device(o.common.device);
  try {
    // The per-step lines are the run's record; the progress line only adds a live view, so
    // `auto` shows it in place on a terminal and not at all elsewhere.
    plan.progress = parse_progress_mode(o.progress);
  } catch (const std::invalid_argument& e) {
    throw comm::ConfigError(e.what());
  }
  if (plan.progress == ProgressMode::automatic) {
    plan.progress = stdout_is_terminal() ? ProgressMode::in_place : ProgressMode::off;
  }
  plan.config = {o.vocab, o.block_size > 0 ? o.block_size : o.seq, o.layers, o.hidden, o.heads};
  plan.config.gelu = gelu;
  plan.config.arch = arch;
  plan.config.kv_heads = o.kv_heads;
  plan.config.ffn_hidden = o.ffn_hidden;
  plan.config.rope_theta = o.rope_theta;
  plan.config.norm_eps = o.norm_eps;
  plan.config.tied_embeddings = !o.untie_embeddings;
  if (const auto preset = nn::model_preset(o.model); preset && arch == nn::Arch::llama) {
    plan.config.rope_scaling = preset->rope_scaling;  // no flag sets it: a preset or a file
  }
  if (!o.init_from.empty()) plan.start.pretrained = read_init_from(o, plan.config);
  if (plan.config.vocab >= 1 && plan.sizes.tp >= 1) {
    plan.config.padded_vocab = nn::padded_vocab_size(plan.config.vocab, plan.sizes.tp);
  }
  check_train_flags(o, plan.config, plan.sizes);
  plan.lr_schedule = {o.lr, o.min_lr, o.warmup_steps, o.steps, decay};
  train.virtual_stages = static_cast<int>(o.virtual_stages);
  train.lr = o.lr;
  train.adamw = {o.adam_beta1, o.adam_beta2, o.adam_eps, o.weight_decay};
  train.grad_clip = o.grad_clip;
  train.recompute = o.recompute;
  train.distributed_optimizer = o.use_distributed_optimizer;
  train.sequence_parallel = o.sequence_parallel;
  train.cp_comm = cp_comm_of(o.common);
  train.grad_reduce_in_bf16 = o.grad_reduce_in_bf16;
  train.bf16 = o.bf16;
  train.device = plan.device;
  if (!o.fault.empty()) nn::inject_fault(nn::parse_fault(o.fault));
  kernels::set_gemm_operands(o.bf16 ? kernels::GemmOperands::bfloat16
                                    : kernels::GemmOperands::float32);
  plan.start.seed = o.common.seed;
}

// The plan's inputs: the --load step (whose seed the run keeps) and the data, checked against
// the model and the flags; then the step's memory against this node's.
void load_inputs(const TrainOptions& o, int ranks_on_node, TrainPlan& plan) {
  if (!o.load.empty() && !first_start_of_requeued_run(o)) {
    plan.start.checkpoint =
        nn::load_gpt_checkpoint(o.load, plan.train.optimizer == nn::OptimizerKind::adamw);
    if (const auto error = nn::checkpoint_config_error(*plan.start.checkpoint, plan.config)) {
      throw comm::ConfigError(fmt::format("--load {}: {}", o.load, *error));
    }
    plan.start.seed = plan.start.checkpoint->meta.value("seed", plan.start.seed);
    plan.first_step = plan.start.checkpoint->step + 1;
  }
  const std::int64_t vocab = plan.config.vocab;
  plan.corpus =
      o.data.empty() ? nn::TokenCorpus::builtin() : nn::TokenCorpus::from_data(o.data, vocab);
  if (plan.corpus->is_bytes() && vocab < 256) {
    throw comm::ConfigError(fmt::format("{} {} cannot hold the 256 byte values",
                                        o.init_from.empty() ? "--vocab" : "the --init-from vocab",
                                        vocab));
  }
  nn::WindowSampler(static_cast<std::int64_t>(plan.corpus->split()), o.seq, o.global_batch,
                    plan.sizes.dp, 0, plan.start.seed, plan.data_order);
  const std::size_t validation = plan.corpus->tokens().size() - plan.corpus->split();
  if (validation < static_cast<std::size_t>(o.seq) + 1) {
    throw comm::ConfigError(fmt::format(
        "the validation part of the data ({}) is shorter than one window of --seq + 1 = {} {}s",
        nn::counted(static_cast<std::int64_t>(validation), plan.corpus->unit()), o.seq + 1,
        plan.corpus->unit()));
  }
  check_memory(o, plan.config, plan.sizes, plan.train, ranks_on_node);
}

// World rank 0 claims the outputs: --save's folder and --metrics writable, the folder's lock
// under the run's new id (returned), what an interrupted save left there removed, and another
// run's steps refused or, with --overwrite-checkpoints, removed.
std::string claim_outputs(const TrainOptions& o, TrainPlan& plan) {
  check_outputs(o);
  std::string run_id = nn::new_run_id();
  if (!o.save.empty()) {
    plan.save_lock = std::make_unique<nn::FolderLock>(o.save, run_id);
    // The folder is this run's now: what an interrupted save left there can go, and another
    // run's steps where this run replaces them.
    nn::remove_interrupted_save_leftovers(o.save);
    plan.overwritten = steps_to_overwrite(o);
    if (plan.overwritten) nn::remove_steps(o.save);
  }
  return run_id;
}

// The run's settings a checkpoint records (TrainPlan::settings).
void record_settings(const TrainOptions& o, const std::string& run_id, TrainPlan& plan) {
  plan.settings = train_checkpoint_settings(o);
  plan.settings["data"] = plan.corpus->source();
  plan.settings["seed"] = plan.start.seed;
  plan.settings["mpitron_version"] = MPITRON_VERSION;
  plan.settings["run_id"] = run_id;
  if (plan.device == kernels::Device::cpu) {
    // What runs the products: under --bf16 the bfloat16 GEMM's path (--gemm does not reach it),
    // else this dtype's provider.
    plan.settings["cpu_gemm"] =
        o.bf16 ? kernels::to_string(kernels::bf16_gemm_path())
               : kernels::to_string(kernels::gemm_provider_for(plan.train.dtype));
  }
}

// Rank 0's start-up warnings and notes; drops --init-from's weights when --load resumes.
void warn_at_start(const TrainOptions& o, TrainPlan& plan, bool writer) {
  spdlog::logger& log = *plan.log;
  nn::GptStart& start = plan.start;
  if (writer && plan.corpus->is_bytes() && plan.config.vocab > 256) {
    log.warn(
        "warning: --data {} is read as bytes (ids 0-255), but the model's vocab is {}: to train "
        "on GPT-2's tokens, make token shards with mpitron tokenize (docs/data.md)",
        o.data.empty() ? std::string("(the built-in text)") : o.data, plan.config.vocab);
  }
  if (plan.save_lock && plan.save_lock->taken_over()) {
    log.warn("warning: --save {}: took over the lock of {}, which is gone", o.save,
             *plan.save_lock->taken_over());
  }
  if (plan.overwritten) {
    log.warn("warning: --save {}: --overwrite-checkpoints removed {}", o.save, *plan.overwritten);
  }
  if (o.overwrite_checkpoints && !o.load.empty() && writer) {
    log.warn(
        "warning: --overwrite-checkpoints does nothing with --load: this run continues the one it "
        "loads and keeps the steps in --save");
  }
  if (!o.load.empty() && !start.checkpoint && writer) {
    log.info("--load {}: no checkpoint there yet, so this run starts at step 1", o.load);
  }
  if (start.checkpoint && writer) {
    for (const std::string& why : start.checkpoint->skipped)
      log.warn("warning: --load {}: skipped a newer step that does not load: {}", o.load, why);
    warn_resume_differences(o, plan.settings, start.checkpoint->meta, log);
  }
  if (start.checkpoint && start.pretrained) {
    if (writer) {
      log.info("--init-from {}: not used, the run resumes from --load {}", o.init_from, o.load);
    }
    start.pretrained.reset();
  }
  if (start.checkpoint) {
    const nlohmann::json& saved = start.checkpoint->meta["topology"];
    plan.start_line =
        fmt::format("resuming from {} step {} (saved by tp={} pp={} dp={} cp={}), seed {}", o.load,
                    start.checkpoint->step, saved["tp"].get<int>(), saved["pp"].get<int>(),
                    saved["dp"].get<int>(), saved.value("cp", 1), start.seed);
  } else if (start.pretrained) {
    plan.start_line = fmt::format("initialised from --init-from {}", o.init_from);
    if (writer && start.pretrained->stored_bfloat16 && !o.bf16) {
      log.warn(
          "warning: --init-from {} stores bfloat16 weights: they are widened to "
          "float32 exactly, and this float32 run trains them in float32 (--bf16: bfloat16 GEMMs)",
          o.init_from);
    }
  }
}

// The run's configuration: the metrics' config line, and what the ranks agree on.
nlohmann::json describe_run(const TrainOptions& o, const TrainPlan& plan) {
  nlohmann::json config = train_config(o);
  if (!o.init_from.empty()) {  // the model's sizes are the file's, not the flags'
    if (plan.config.llama()) {
      config.update({{"arch", nn::to_string(plan.config.arch)},
                     {"kv_heads", plan.config.kv_head_count()},
                     {"ffn_hidden", plan.config.ffn_size()},
                     {"rope_theta", plan.config.rope_theta},
                     {"norm_eps", plan.config.norm_eps},
                     {"untie_embeddings", !plan.config.tied_embeddings}});
    }
    config.update({{"vocab", plan.config.vocab},
                   {"block_size", plan.config.block_size},
                   {"layers", plan.config.layers},
                   {"hidden", plan.config.hidden},
                   {"heads", plan.config.heads},
                   {"gelu", nn::to_string(plan.config.gelu)}});
  }
  config.update({{"mpitron", MPITRON_VERSION},
                 {"tp", plan.sizes.tp},
                 {"pp", plan.sizes.pp},
                 {"dp", plan.sizes.dp},
                 {"cp", plan.sizes.cp},
                 {"cp_comm", o.common.cp_comm},
                 {"device", kernels::to_string(plan.device)},
                 {"threads", kernels::cpu_threads()},
                 {"gemm", kernels::to_string(kernels::gemm_provider())},
                 {"seed", plan.start.seed},
                 {"data", plan.corpus->source()},
                 {"data_tokens", plan.corpus->tokens().size()},
                 {"data_fnv", fmt::format("{:016x}", plan.corpus->fingerprint())}});
  // Llama 3's RoPE scaling comes from a preset or the --init-from folder, not a flag.
  config["rope_scaling"] = nn::to_json(plan.config).value("rope_scaling", nlohmann::json());
  if (plan.start.pretrained) {  // files of the same sizes may hold other weights
    config["init_from_fnv"] =
        fmt::format("{:016x}", nn::weights_fingerprint(plan.start.pretrained->tensors));
  }
  return config;
}

}  // namespace

TrainPlan plan_train(const TrainOptions& o, comm::Communicator& world) {
  TrainPlan plan;
  // Caught from here on: a stop signal while the run loads a checkpoint or its data (minutes at
  // scale) is acted on before the first step instead of ending the rank.
  plan.stop =
      std::make_unique<StopWatch>(stop_signals_or_default(o.exit_signal), o.exit_duration_in_mins);
  const bool writer = world.rank() == 0;
  std::string run_id;  // world rank 0's
  comm::agree_on_configuration(world, [&] {
    try {
      read_flags(o, world.size(), plan);
      load_inputs(o, world.node().size, plan);
      if (writer) run_id = claim_outputs(o, plan);
    } catch (const comm::ConfigError&) {
      throw;
    } catch (const std::exception& e) {
      throw comm::ConfigError(e.what());
    }
    plan.log = prepare_run(o.common, world);
    record_settings(o, run_id, plan);
    warn_at_start(o, plan, writer);
    plan.description = describe_run(o, plan);
    // Rank 0 prepares the file, and a file it cannot continue (unreadable, not JSON) ends every
    // rank with one line.
    try {
      plan.metrics.emplace(o.metrics, writer, plan.description,
                           plan.first_step > 1 ? std::optional(plan.first_step - 1) : std::nullopt);
    } catch (const std::runtime_error& e) {
      throw comm::ConfigError(e.what());
    }
    if (const auto& moved = plan.metrics->moved_to()) {
      plan.log->warn(
          "warning: --metrics {} held another run's records: moved to {}, and this run starts "
          "the file anew",
          o.metrics, *moved);
    }
    return plan.description.dump();
  });
  return plan;
}

}  // namespace mpitron::app
