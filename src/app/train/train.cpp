#include "app/train/train.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "app/report/idle_share.h"
#include "app/report/memory.h"
#include "app/report/throughput.h"
#include "app/train/metrics.h"
#include "app/train/plan.h"
#include "app/train/step_phases.h"
#include "comm/agreement.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "comm/topology.h"
#include "comm/wait.h"
#include "kernels/ops.h"
#include "nn/optim/lr_schedule.h"
#include "nn/train/memory_estimate.h"
#include "nn/wording.h"

namespace mpitron::app {

namespace {

// The start-up line's words for the model's family: ", tanh GELU" for GPT-2's, and the llama
// choices.
std::string family_text(const nn::GptConfig& c) {
  if (c.llama()) {
    const kernels::Llama3RopeScaling& s = c.rope_scaling;
    const std::string scaling =
        s.active() ? fmt::format(
                         " with llama3 scaling (factor {:g}, low {:g}, high {:g}, "
                         "original {:g})",
                         s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_positions)
                   : "";
    return fmt::format(", llama ({} kv heads, ffn {}, RoPE theta {:g}{}, {} head)",
                       c.kv_head_count(), c.ffn_size(), c.rope_theta, scaling,
                       c.tied_embeddings ? "tied" : "untied");
  }
  return c.gelu == nn::GeluForm::tanh ? ", tanh GELU" : "";
}

// The start-up line's words for the precision: the dtype, or what --bf16 rounds, the bfloat16
// GEMM's path on `device` (the CPU paths differ in bits, so runs compared bit for bit must share
// one) and where the gradients are reduced across the `sharing` ranks of the DP x CP group.
std::string precision_text(const TrainOptions& o, kernels::Device device, int sharing) {
  if (!o.bf16) return o.dtype;
  const std::string gemms = fmt::format(
      "bfloat16 GEMMs ({})",
      device == kernels::Device::cpu ? kernels::to_string(kernels::bf16_gemm_path()) : "cuBLAS");
  if (!o.grad_reduce_in_bf16) return gemms + ", float32 master";
  return sharing > 1 ? gemms + " and DP gradient reduction, float32 master"
                     : gemms +
                           ", float32 master; --grad-reduce-in-bf16 has no DP gradient "
                           "reduction to act on at dp 1";
}

std::vector<nn::TokenBatch> micro_batches(const nn::TokenCorpus& corpus,
                                          const std::vector<std::int64_t>& starts,
                                          std::int64_t micro_batch, std::int64_t seq,
                                          kernels::Device device) {
  std::vector<nn::TokenBatch> batches;
  for (std::size_t i = 0; i < starts.size(); i += static_cast<std::size_t>(micro_batch)) {
    const std::vector<std::int64_t> part(
        starts.begin() + static_cast<std::ptrdiff_t>(i),
        starts.begin() + static_cast<std::ptrdiff_t>(i) + micro_batch);
    batches.push_back(nn::make_token_batch(corpus.tokens(), part, seq, device));
  }
  return batches;
}

}  // namespace

int run_train(const TrainOptions& o, comm::Communicator world) {
  TrainPlan run = plan_train(o, world);
  const comm::ParallelTopology topology(world, run.sizes.tp, run.sizes.pp, run.sizes.dp,
                                        run.sizes.cp);
  const std::uint64_t seed = run.start.seed;
  const std::int64_t first_step = run.first_step;
  const std::unique_ptr<nn::GptTrainer> trainer_owner =
      nn::start_gpt_trainer(run.config, std::move(run.start), topology, run.train);
  nn::GptTrainer& trainer = *trainer_owner;
  if (!run.start_line.empty()) run.log->info("{}", run.start_line);
  const nn::TokenCorpus& corpus = *run.corpus;
  nn::WindowSampler sampler(static_cast<std::int64_t>(corpus.split()), o.seq, o.global_batch,
                            run.sizes.dp, topology.dp_rank(), seed, run.data_order);
  const nn::LrSchedule& schedule = run.lr_schedule;
  const std::int64_t micro_per_step = o.global_batch / (o.micro_batch * run.sizes.dp);
  const double flops_per_token = nn::gpt_flops_per_token(run.config, o.seq);
  const std::vector<double> counts = comm::all_gather_scalar(
      world, static_cast<double>(nn::parameter_count(trainer.parameters())));
  run.log->info(
      "train: tp={} pp={} dp={}{} ({}, device {}, {}), {} x hidden {} x {}, seq "
      "{}{}, vocab {}{}{}; parameters per rank {}; {} of {} per replica per "
      "step ({} schedule{}{}{}), global batch {} ({}); data {} ({}: {} train, {} "
      "validation)",
      run.sizes.tp, run.sizes.pp, run.sizes.dp,
      run.sizes.cp > 1
          ? fmt::format(" cp={} ({})", run.sizes.cp, nn::cp_comm_name(run.train.cp_comm))
          : std::string(),
      nn::counted(world.size(), "rank"), device_text(run.device, run.train.dtype),
      precision_text(o, run.device, run.sizes.dp * run.sizes.cp),
      nn::counted(run.config.layers, "layer"), run.config.hidden,
      nn::counted(run.config.heads, "head"), o.seq,
      run.config.block_size != o.seq ? fmt::format(" (positions {})", run.config.block_size)
                                     : std::string(),
      run.config.vocab,
      run.config.vocab_rows() != run.config.vocab
          ? fmt::format(" (padded to {})", run.config.vocab_rows())
          : std::string(),
      family_text(run.config), fmt::join(counts, ", "),
      nn::counted(micro_per_step, "micro-batch", "micro-batches"),
      nn::counted(o.micro_batch, "sequence"), o.schedule,
      (o.virtual_stages > 1 ? fmt::format(", {} virtual stages", o.virtual_stages) : "") +
          (o.recompute ? ", recomputing activations" : ""),
      trainer.gradients().sharded() ? ", distributed optimizer" : "",
      o.sequence_parallel && run.sizes.tp > 1 ? ", sequence parallel" : "", o.global_batch,
      nn::counted(o.global_batch * o.seq, "token"), corpus.source(),
      nn::counted(static_cast<std::int64_t>(corpus.tokens().size()), corpus.unit()), corpus.split(),
      corpus.tokens().size() - corpus.split());

  const std::vector<double> estimate_mib = comm::all_gather_scalar(
      world,
      mib(nn::estimate_gpt_memory(
              {run.config, nn::parameter_count(trainer.parameters()), o.seq, o.micro_batch,
               micro_per_step, run.sizes.tp, run.sizes.pp, topology.pp_rank(), run.train.schedule,
               o.recompute, run.train.optimizer == nn::OptimizerKind::adamw ? 2 : 0,
               static_cast<std::int64_t>(kernels::dtype_size(run.train.dtype)),
               !o.init_from.empty() && first_step == 1,
               trainer.gradients().sharded() && run.train.optimizer == nn::OptimizerKind::adamw
                   ? run.sizes.dp * run.sizes.cp
                   : 1,
               o.sequence_parallel, run.train.virtual_stages, run.sizes.cp, o.bf16})
              .peak()));
  run.log->info(
      "memory estimate: {:.0f} MiB per rank at most (parameter states, activations in "
      "flight, start-up copy; docs/train.md)",
      *std::max_element(estimate_mib.begin(), estimate_mib.end()));

  const nlohmann::json& config = run.description;
  const MetricsFile& metrics = *run.metrics;
  const auto validation = [&]() {
    std::vector<nn::TokenBatch> windows;
    for (const std::int64_t start :
         nn::evaluation_starts(static_cast<std::int64_t>(corpus.tokens().size() - corpus.split()),
                               o.seq, o.eval_iters, run.sizes.dp, topology.dp_rank())) {
      windows.push_back(nn::make_token_batch(
          corpus.tokens(), {static_cast<std::int64_t>(corpus.split()) + start}, o.seq, run.device));
    }
    return trainer.evaluate(windows);
  };
  const auto start = std::chrono::steady_clock::now();
  const auto save = [&](std::int64_t step) {
    nlohmann::json settings = run.settings;
    settings["lr_schedule"]["next_step"] = step + 1;
    settings["sampler"]["next_step"] = step;
    nn::save_gpt_checkpoint(o.save, step, trainer, topology, settings);
    run.log->info("saved checkpoint {}/step_{}", o.save, step);
  };
  const std::int64_t last_step = o.stop_after > 0 ? std::min(o.stop_after, o.steps) : o.steps;
  ProgressLine progress(first_step == 1 ? "train" : fmt::format("train from step {}", first_step),
                        std::max<std::int64_t>(last_step - first_step + 1, 1), "tokens/s",
                        run.progress, world.rank() == 0);
  nlohmann::json summary{{"config", config},
                         {"first_step", first_step},
                         {"last_step", last_step},
                         {"loss", nullptr},
                         {"val_loss", nullptr}};
  double step_ms = 0.0;
  double step_wait_s = 0.0;  // in the wait routine during the steps
  PhaseTotals phases(o.use_distributed_optimizer && run.sizes.dp > 1);  // this rank's
  TrafficTotals traffic;                                                // this rank's
  // Saves `step` with --save; false (after the error line) when the step is not finite.
  const auto save_step = [&](std::int64_t step) {
    try {
      save(step);
      return true;
    } catch (const nn::NonFiniteStateError& e) {  // agreed: thrown on every rank alike
      run.log->error("error: {}", e.what());
      return false;
    }
  };
  // (Nothing to do is not a stop: that run ends as done, not with the requeue code.)
  if (const std::string reason = first_step <= last_step ? run.stop->agreed_reason(world) : "";
      !reason.empty()) {
    progress.suspend();
    run.log->info("stopping before step {} on {}: nothing new to save", first_step, reason);
    return kStoppedExitCode;
  }
  for (std::int64_t step = first_step; step <= last_step; ++step) {
    const auto batches =
        micro_batches(corpus, sampler.starts(step - 1), o.micro_batch, o.seq, run.device);
    const double lr = schedule.at(step);
    const auto t0 = std::chrono::steady_clock::now();
    const double wait0 = comm::wait_seconds();
    const comm::Traffic sent0 = comm::traffic();
    const nn::StepResult result = trainer.step(batches, lr);
    traffic.add(sent0, comm::traffic());
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    step_wait_s += comm::wait_seconds() - wait0;
    const double tokens_per_s = static_cast<double>(o.global_batch * o.seq) / (ms / 1000.0);
    const double gflops = flops_per_token * tokens_per_s / 1e9;
    const std::optional<double> mfu = model_flops_utilisation(gflops, o.peak_gflops, world.size());
    progress.suspend();
    if (!std::isfinite(result.loss)) {  // the same on every rank
      if (step == first_step) {         // no update of this run has touched the weights yet
        run.log->error(
            "error: the loss at step {} is {}, from the weights this run started from (before "
            "any update): the model's values overflow float32 on this data",
            step, nn::value_text(result.loss));
      } else {
        run.log->error("error: training diverged at step {}: the loss is {} (lower --lr)", step,
                       result.loss);
      }
      return 1;
    }
    run.log->info(
        "step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.4f} {:.1f} ms {:.0f} tokens/s {:.1f} "
        "GFLOP/s{}",
        step, o.steps, result.loss, lr, result.grad_norm, ms, tokens_per_s, gflops,
        mfu ? " " + mfu_text(mfu) : std::string());
    nlohmann::json line{{"step", step},     {"loss", result.loss},
                        {"lr", lr},         {"grad_norm", result.grad_norm},
                        {"ms", ms},         {"tokens_per_s", tokens_per_s},
                        {"gflops", gflops}, {"phases_ms", phases_ms(result.phases)}};
    if (mfu) line["mfu"] = *mfu;
    phases.add(result.phases);
    metrics.write(line);
    summary["loss"] = result.loss;
    step_ms += ms;
    if ((o.eval_interval > 0 && step % o.eval_interval == 0) || step == o.steps) {
      const double val_loss = validation();
      run.log->info("step {} val_loss {:.4f} ({:.4f} bits per {})", step, val_loss,
                    val_loss / std::log(2.0), corpus.unit());
      metrics.write({{"step", step}, {"val_loss", val_loss}});
      summary["val_loss"] = val_loss;
    }
    const bool saved = !o.save.empty() &&
                       ((o.save_interval > 0 && step % o.save_interval == 0) || step == last_step);
    if (saved && !save_step(step)) return 1;
    if (const std::string reason = run.stop->agreed_reason(world); !reason.empty()) {
      progress.suspend();
      if (!o.save.empty() && !saved && !save_step(step)) return 1;
      run.log->info("stopping at step {} on {}: {}", step, reason,
                    o.save.empty() ? std::string("nothing saved (no --save)")
                                   : fmt::format("saved {}/step_{}", o.save, step));
      return kStoppedExitCode;
    }
    progress.update(step - first_step + 1, result.loss, tokens_per_s);
  }
  progress.suspend();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (first_step > last_step) {
    run.log->info("train: nothing to do, the checkpoint is at step {} and the run stops at {} ({})",
                  first_step - 1, last_step, last_step < o.steps ? "--stop-after" : "--steps");
  } else if (last_step < o.steps) {
    run.log->info("train stopped: steps {}..{} of {} in {:.1f} s", first_step, last_step, o.steps,
                  seconds);
  } else {
    run.log->info("train done: steps {}..{} in {:.1f} s", first_step, o.steps, seconds);
  }
  const std::vector<double> idle_by_stage = mean_by_stage(
      comm::all_gather_scalar(world, step_ms > 0 ? step_wait_s / (step_ms / 1e3) : 0.0),
      run.sizes.tp, run.sizes.pp);
  if (run.sizes.pp > 1) {
    run.log->info("idle share per pipeline stage (waiting on communication in the steps): {}",
                  percentages(idle_by_stage));
  }
  if (first_step <= last_step) {
    run.log->info("step phases (rank 0, mean): {}", phases.text());
    run.log->info("communication per step (rank 0, payload it hands to each group, mean): {}",
                  traffic.text());
  }
  const std::vector<double> rss_mib = comm::all_gather_scalar(world, peak_rss_mib());
  run.log->info("peak RSS {:.0f} MiB per rank at most (estimate {:.0f} MiB)",
                *std::max_element(rss_mib.begin(), rss_mib.end()),
                *std::max_element(estimate_mib.begin(), estimate_mib.end()));
  if (world.rank() == 0 && !o.common.json.empty()) {
    summary["peak_rss_mib_by_rank"] = rss_mib;
    summary["memory_estimate_mib_by_rank"] = estimate_mib;
    summary["idle_share_by_stage"] = idle_by_stage;
    summary["step_phases_ms"] = phases.mean_ms();
    summary["comm_mib_per_step"] = traffic.mean_mib();
    const auto steps = static_cast<double>(std::max<std::int64_t>(last_step - first_step + 1, 0));
    summary["seconds"] = seconds;
    summary["ms_per_step"] = steps > 0 ? step_ms / steps : 0.0;
    summary["tokens_per_s"] =
        step_ms > 0 ? static_cast<double>(o.global_batch * o.seq) * steps / (step_ms / 1e3) : 0.0;
    write_json(o.common.json, summary);
  }
  return 0;
}

}  // namespace mpitron::app
