#include "app/train.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/progress.h"
#include "comm/agreement.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "comm/topology.h"
#include "nn/fault_injection.h"
#include "nn/gpt_checkpoint.h"
#include "nn/gpt_trainer.h"
#include "nn/lr_schedule.h"

namespace mpitron::app {

CLI::App& add_train_command(CLI::App& app, TrainOptions& o) {
  CLI::App& c = *app.add_subcommand(
      "train", "Train a GPT-2-style byte-level language model with TP, PP (1F1B) and DP");
  add_common_options(c, o.common);
  c.add_option("--data", o.data,
               "Training text, any file read as bytes (default: built-in corpus)");
  c.add_option("--vocab", o.vocab, "Vocabulary size (bytes use 0..255)")->capture_default_str();
  c.add_option("--layers", o.layers, "Transformer blocks")->capture_default_str();
  c.add_option("--hidden", o.hidden, "Hidden size")->capture_default_str();
  c.add_option("--heads", o.heads, "Attention heads")->capture_default_str();
  c.add_option("--seq", o.seq, "Sequence length (also the position table's length)")
      ->capture_default_str();
  c.add_option("--global-batch", o.global_batch, "Sequences per optimizer step, all replicas")
      ->capture_default_str();
  c.add_option("--micro-batch", o.micro_batch, "Sequences per micro-batch per replica")
      ->capture_default_str();
  c.add_option("--steps", o.steps, "Optimizer steps")->capture_default_str();
  c.add_option("--schedule", o.schedule, "Pipeline schedule: 1f1b or afab")->capture_default_str();
  c.add_option("--optimizer", o.optimizer, "adamw (betas 0.9/0.95, eps 1e-8) or sgd")
      ->capture_default_str();
  c.add_option("--dtype", o.dtype, "float32, or float64 (CPU checks)")->capture_default_str();
  c.add_option("--lr", o.lr, "Peak learning rate")->capture_default_str();
  c.add_option("--min-lr", o.min_lr, "Learning rate at the last step")->capture_default_str();
  c.add_option("--warmup-steps", o.warmup_steps, "Linear warmup steps, then cosine decay")
      ->capture_default_str();
  c.add_option("--weight-decay", o.weight_decay, "AdamW weight decay (not on biases/LayerNorm)")
      ->capture_default_str();
  c.add_option("--grad-clip", o.grad_clip, "Global gradient-norm clipping threshold")
      ->capture_default_str();
  c.add_option("--eval-interval", o.eval_interval, "Validation loss every N steps (0: at the end)")
      ->capture_default_str();
  c.add_option("--eval-iters", o.eval_iters, "Validation windows to use (0: all)")
      ->capture_default_str();
  c.add_option("--metrics", o.metrics, "Append one JSON object per step / eval to this file");
  c.add_option("--save", o.save, "Write checkpoints into this folder (DIR/step_<k>/)");
  c.add_option("--save-interval", o.save_interval, "Save every N steps (0: after the last step)")
      ->capture_default_str();
  c.add_option("--load", o.load, "Resume from the newest checkpoint in this folder");
  add_progress_option(c, o.progress);
  c.add_option("--inject-fault", o.fault, "Test only: break one parallel rule")->group("");
  return c;
}

namespace {

void check_options(const TrainOptions& o, const nn::GptConfig& config, const ParallelSizes& s) {
  const std::pair<const char*, std::int64_t> positive[] = {
      {"global-batch", o.global_batch}, {"micro-batch", o.micro_batch}, {"steps", o.steps}};
  for (const auto& [name, value] : positive) {
    if (value < 1) throw comm::ConfigError(fmt::format("--{} must be >= 1, got {}", name, value));
  }
  const std::pair<const char*, std::int64_t> non_negative[] = {{"warmup-steps", o.warmup_steps},
                                                               {"eval-interval", o.eval_interval},
                                                               {"eval-iters", o.eval_iters},
                                                               {"save-interval", o.save_interval}};
  for (const auto& [name, value] : non_negative) {
    if (value < 0) throw comm::ConfigError(fmt::format("--{} must be >= 0, got {}", name, value));
  }
  const std::pair<const char*, double> rates[] = {
      {"lr", o.lr}, {"min-lr", o.min_lr}, {"grad-clip", o.grad_clip}};
  for (const auto& [name, value] : rates) {
    if (!std::isfinite(value) || !(value > 0.0)) {
      throw comm::ConfigError(
          fmt::format("--{} must be a finite positive number, got {}", name, value));
    }
  }
  if (!std::isfinite(o.weight_decay) || o.weight_decay < 0.0) {
    throw comm::ConfigError(
        fmt::format("--weight-decay must be finite and >= 0, got {}", o.weight_decay));
  }
  if (const auto error = nn::gpt_size_error(config, s.tp, s.pp)) throw comm::ConfigError(*error);
  if (o.global_batch % (o.micro_batch * s.dp) != 0) {
    throw comm::ConfigError(
        fmt::format("--global-batch {} is not divisible by --micro-batch {} x dp {}",
                    o.global_batch, o.micro_batch, s.dp));
  }
  if (o.vocab < 256) {
    throw comm::ConfigError(fmt::format("--vocab {} cannot hold the 256 byte values", o.vocab));
  }
}

template <class T>
T parse_choice(const char* flag, const std::string& text,
               std::initializer_list<std::pair<const char*, T>> choices) {
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
  }
  throw comm::ConfigError(fmt::format("--{} '{}' is not one of the accepted names", flag, text));
}

struct Run {
  ParallelSizes sizes;
  kernels::Device device{};
  nn::GptConfig config;
  nn::GptTrainOptions train;
  std::optional<nn::ByteCorpus> corpus;
  std::optional<nn::GptCheckpoint> checkpoint;
  std::uint64_t seed = 0;
  ProgressMode progress = ProgressMode::off;
  std::shared_ptr<spdlog::logger> log;
  std::string description;
};

Run configure(const TrainOptions& o, comm::Communicator& world) {
  Run run;
  run.description = comm::agree_on_configuration(world, [&] {
    run.sizes = resolve_parallel_sizes(o.common, world.size());
    run.config = {o.vocab, o.seq, o.layers, o.hidden, o.heads};
    check_options(o, run.config, run.sizes);
    run.train.schedule = parse_choice<nn::ScheduleKind>(
        "schedule", o.schedule,
        {{"1f1b", nn::ScheduleKind::one_f_one_b}, {"afab", nn::ScheduleKind::afab}});
    run.train.optimizer = parse_choice<nn::OptimizerKind>(
        "optimizer", o.optimizer,
        {{"adamw", nn::OptimizerKind::adamw}, {"sgd", nn::OptimizerKind::sgd}});
    run.train.dtype = parse_choice<kernels::DType>(
        "dtype", o.dtype, {{"float32", kernels::DType::f32}, {"float64", kernels::DType::f64}});
    run.train.lr = o.lr;
    run.train.adamw.weight_decay = o.weight_decay;
    run.train.grad_clip = o.grad_clip;
    run.device = resolve_device(o.common.device);
    run.train.device = run.device;
    if (!o.fault.empty()) nn::inject_fault(nn::parse_fault(o.fault));
    run.seed = o.common.seed;
    try {
      // The per-step lines are the run's record; the progress line only adds a live view, so
      // `auto` shows it in place on a terminal and not at all elsewhere.
      run.progress = parse_progress_mode(o.progress);
      if (run.progress == ProgressMode::automatic) {
        run.progress = stdout_is_terminal() ? ProgressMode::in_place : ProgressMode::off;
      }
      if (!o.load.empty()) {
        run.checkpoint =
            nn::load_gpt_checkpoint(o.load, run.train.optimizer == nn::OptimizerKind::adamw);
        if (const auto error = nn::checkpoint_config_error(*run.checkpoint, run.config)) {
          throw comm::ConfigError(fmt::format("--load {}: {}", o.load, *error));
        }
        run.seed = run.checkpoint->meta.value("seed", run.seed);
      }
      run.corpus = o.data.empty() ? nn::ByteCorpus::builtin() : nn::ByteCorpus::from_file(o.data);
      nn::WindowSampler(static_cast<std::int64_t>(run.corpus->split()), o.seq, o.global_batch,
                        run.sizes.dp, 0, run.seed);
    } catch (const comm::ConfigError&) {
      throw;
    } catch (const std::exception& e) {
      throw comm::ConfigError(e.what());
    }
    run.log = prepare_run(o.common, world);
    return fmt::format(
        "mpitron {} train tp={} pp={} dp={} device={} dtype={} vocab={} layers={} hidden={} "
        "heads={} seq={} global_batch={} micro_batch={} steps={} schedule={} optimizer={} lr={} "
        "min_lr={} warmup={} wd={} clip={} seed={} data={} bytes={} fnv={:016x}",
        MPITRON_VERSION, run.sizes.tp, run.sizes.pp, run.sizes.dp, kernels::to_string(run.device),
        o.dtype, o.vocab, o.layers, o.hidden, o.heads, o.seq, o.global_batch, o.micro_batch,
        o.steps, o.schedule, o.optimizer, o.lr, o.min_lr, o.warmup_steps, o.weight_decay,
        o.grad_clip, run.seed, run.corpus->source(), run.corpus->bytes().size(),
        run.corpus->fingerprint());
  });
  return run;
}

std::vector<nn::TokenBatch> micro_batches(const nn::ByteCorpus& corpus,
                                          const std::vector<std::int64_t>& starts,
                                          std::int64_t micro_batch, std::int64_t seq,
                                          kernels::Device device) {
  std::vector<nn::TokenBatch> batches;
  for (std::size_t i = 0; i < starts.size(); i += static_cast<std::size_t>(micro_batch)) {
    const std::vector<std::int64_t> part(
        starts.begin() + static_cast<std::ptrdiff_t>(i),
        starts.begin() + static_cast<std::ptrdiff_t>(i) + micro_batch);
    batches.push_back(nn::make_token_batch(corpus.bytes(), part, seq, device));
  }
  return batches;
}

class MetricsFile {
 public:
  MetricsFile(std::string path, bool writer) : path_(writer ? std::move(path) : std::string()) {}
  void write(const nlohmann::json& line) const {
    if (!path_.empty()) write_json(path_, line, /*append=*/true);
  }

 private:
  std::string path_;
};

}  // namespace

int run_train(const TrainOptions& o, comm::Communicator world) {
  Run run = configure(o, world);
  const comm::ParallelTopology topology(world, run.sizes.tp, run.sizes.pp, run.sizes.dp);
  const nn::MasterInit init =
      run.checkpoint ? nn::checkpoint_init(*run.checkpoint, run.train.dtype, run.device)
                     : nn::gpt2_init(run.seed, o.layers, run.train.dtype, run.device);
  nn::GptTrainer trainer(run.config, init, topology, run.train);
  std::int64_t first_step = 1;
  if (run.checkpoint) {
    if (run.train.optimizer == nn::OptimizerKind::adamw) {
      nn::restore_optimizer(trainer, *run.checkpoint, topology);
    }
    first_step = run.checkpoint->step + 1;
    run.log->info("resuming from {} step {} (saved by tp={} pp={} dp={}), seed {}", o.load,
                  run.checkpoint->step, run.checkpoint->meta["topology"]["tp"].get<int>(),
                  run.checkpoint->meta["topology"]["pp"].get<int>(),
                  run.checkpoint->meta["topology"]["dp"].get<int>(), run.seed);
    run.checkpoint.reset();
  }
  const nn::ByteCorpus& corpus = *run.corpus;
  nn::WindowSampler sampler(static_cast<std::int64_t>(corpus.split()), o.seq, o.global_batch,
                            run.sizes.dp, topology.dp_rank(), run.seed);
  const nn::LrSchedule schedule{o.lr, o.min_lr, o.warmup_steps, o.steps};
  const std::int64_t micro_per_step = o.global_batch / (o.micro_batch * run.sizes.dp);
  const std::vector<double> counts = comm::all_gather_scalar(
      world, static_cast<double>(nn::parameter_count(trainer.parameters())));
  run.log->info(
      "train: tp={} pp={} dp={} ({} ranks, device {}, {}), {} layers x hidden {} x {} heads, seq "
      "{}, vocab {}; parameters per rank {}; {} micro-batches of {} sequences per replica per "
      "step ({} schedule), global batch {} ({} tokens); data {} ({} bytes: {} train, {} "
      "validation)",
      run.sizes.tp, run.sizes.pp, run.sizes.dp, world.size(), kernels::to_string(run.device),
      o.dtype, o.layers, o.hidden, o.heads, o.seq, o.vocab, fmt::join(counts, ", "), micro_per_step,
      o.micro_batch, o.schedule, o.global_batch, o.global_batch * o.seq, corpus.source(),
      corpus.bytes().size(), corpus.split(), corpus.bytes().size() - corpus.split());

  const MetricsFile metrics(o.metrics, world.rank() == 0);
  metrics.write({{"config", run.description}});
  const auto validation = [&]() {
    std::vector<nn::TokenBatch> windows;
    for (const std::int64_t start :
         nn::evaluation_starts(static_cast<std::int64_t>(corpus.bytes().size() - corpus.split()),
                               o.seq, o.eval_iters, run.sizes.dp, topology.dp_rank())) {
      windows.push_back(nn::make_token_batch(
          corpus.bytes(), {static_cast<std::int64_t>(corpus.split()) + start}, o.seq, run.device));
    }
    return trainer.evaluate(windows);
  };
  const auto start = std::chrono::steady_clock::now();
  const auto save = [&](std::int64_t step) {
    nn::save_gpt_checkpoint(o.save, step, trainer, topology,
                            {{"seed", run.seed},
                             {"dtype", o.dtype},
                             {"optimizer", o.optimizer},
                             {"lr_schedule",
                              {{"lr", o.lr},
                               {"min_lr", o.min_lr},
                               {"warmup_steps", o.warmup_steps},
                               {"total_steps", o.steps},
                               {"next_step", step + 1}}},
                             {"sampler", {{"global_batch", o.global_batch}, {"next_step", step}}},
                             {"data", corpus.source()},
                             {"mpitron_version", MPITRON_VERSION}});
    run.log->info("saved checkpoint {}/step_{}", o.save, step);
  };
  ProgressLine progress(first_step == 1 ? "train" : fmt::format("train from step {}", first_step),
                        o.steps - first_step + 1, "tokens/s", run.progress, world.rank() == 0);
  for (std::int64_t step = first_step; step <= o.steps; ++step) {
    const auto batches =
        micro_batches(corpus, sampler.starts(step - 1), o.micro_batch, o.seq, run.device);
    const double lr = schedule.at(step);
    const auto t0 = std::chrono::steady_clock::now();
    const nn::StepResult result = trainer.step(batches, lr);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double tokens_per_s = static_cast<double>(o.global_batch * o.seq) / (ms / 1000.0);
    progress.suspend();
    if (!std::isfinite(result.loss)) {
      run.log->error("error: training diverged at step {}: the loss is {} (lower --lr)", step,
                     result.loss);
      return 1;
    }
    run.log->info("step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.4f} {:.1f} ms {:.0f} tokens/s",
                  step, o.steps, result.loss, lr, result.grad_norm, ms, tokens_per_s);
    metrics.write({{"step", step},
                   {"loss", result.loss},
                   {"lr", lr},
                   {"grad_norm", result.grad_norm},
                   {"ms", ms},
                   {"tokens_per_s", tokens_per_s}});
    if ((o.eval_interval > 0 && step % o.eval_interval == 0) || step == o.steps) {
      const double val_loss = validation();
      run.log->info("step {} val_loss {:.4f} ({:.4f} bits per byte)", step, val_loss,
                    val_loss / std::log(2.0));
      metrics.write({{"step", step}, {"val_loss", val_loss}});
    }
    if (!o.save.empty() &&
        ((o.save_interval > 0 && step % o.save_interval == 0) || step == o.steps)) {
      save(step);
    }
    progress.update(step - first_step + 1, result.loss, tokens_per_s);
  }
  progress.suspend();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.log->info("train done: steps {}..{} in {:.1f} s", first_step, o.steps, seconds);
  return 0;
}

}  // namespace mpitron::app
