#include "app/bench/step.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>

#include "app/common/help.h"
#include "app/common/options.h"
#include "app/common/progress.h"
#include "app/report/idle_share.h"
#include "app/report/memory.h"
#include "app/report/throughput.h"
#include "autograd/random.h"
#include "comm/agreement.h"
#include "comm/collectives.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "comm/wait.h"
#include "kernels/allocator.h"
#include "kernels/ops.h"
#include "nn/models/mlp_stack.h"
#include "nn/parallel/data_parallel.h"
#include "nn/parallel/pipeline.h"
#include "nn/wording.h"

namespace mpitron::app {

CLI::App& add_bench_command(CLI::App& app, BenchOptions& options) {
  CLI::App& command = *app.add_subcommand(
      "bench", "Time the combined TP+PP+DP MLP training step (ms/step, tokens/s, GFLOP/s)");
  add_common_options(command, options.common);
  add_model_size_options(command, options.sizes);
  add_size_option(command, "--steps", options.steps, "Timed steps");
  add_size_option(command, "--warmup", options.warmup, "Untimed warm-up steps");
  add_progress_option(command, options.progress, "lines");
  add_peak_option(command, options.peak_gflops);
  add_switch(command, "--recompute", options.recompute,
             "Keep only each layer's input and recompute its activations in backward");
  command
      .add_option("--dtype", options.dtype,
                  "float32, or bfloat16 (bfloat16 GEMM operands, float32 masters: train --bf16)")
      ->capture_default_str();
  add_example(
      command,
      "mpirun -np 4 mpitron bench --tp 2 --pp 2 --hidden 512 --intermediate 2048 --seq 128");
  return command;
}

namespace {

// Blocks the backends allocated so far, over every pool (device and host memory, cpu and cuda).
double backend_allocations() {
  std::uint64_t total = 0;
  for (kernels::Device device : {kernels::Device::cpu, kernels::Device::cuda}) {
    for (bool host : {false, true})
      total += kernels::allocator_stats(device, host).backend_allocations;
  }
  return static_cast<double>(total);
}

}  // namespace

int run_bench(const BenchOptions& options, comm::Communicator world) {
  ParallelSizes sizes;
  kernels::Device device{};
  comm::agree_on_configuration(world, [&] {
    sizes = resolve_parallel_sizes(options.common, world.size());
    check_divisibility(options.sizes, sizes.tp, sizes.pp);
    if (options.steps < 1 || options.warmup < 0) {
      throw comm::ConfigError(
          fmt::format("--steps must be >= 1 and --warmup >= 0, got --steps {} --warmup {}",
                      options.steps, options.warmup));
    }
    if (options.dtype != "float32" && options.dtype != "bfloat16") {
      throw comm::ConfigError(
          fmt::format("--dtype '{}' is not one of: float32, bfloat16", options.dtype));
    }
    device = resolve_device(options.common.device);
    prepare_run(options.common, world);
    return fmt::format(
        "bench {} steps={} warmup={} recompute={} dtype={}",
        config_json(options.sizes, sizes, device, options.common.seed, world.size()).dump(),
        options.steps, options.warmup, options.recompute, options.dtype);
  });
  kernels::set_gemm_operands(options.dtype == "bfloat16" ? kernels::GemmOperands::bfloat16
                                                         : kernels::GemmOperands::float32);
  const comm::ParallelTopology topology(world, sizes.tp, sizes.pp, sizes.dp);
  const ModelSizes& s = options.sizes;
  const std::uint64_t seed = options.common.seed;

  const std::int64_t per_stage = s.layers / topology.pp();
  const nn::MlpStack<nn::ParallelMlp> stage(
      {s.hidden, s.intermediate, seed + 600, seed + 700, autograd::DType::f32, device},
      topology.pp_rank() * per_stage, per_stage, topology.tp_comm());
  const nn::Parameters parameters = stage.parameters();
  const auto d = static_cast<std::uint64_t>(topology.dp_rank());
  const autograd::Shape shape{s.batch, s.seq, s.hidden};
  const autograd::Tensor input =
      autograd::randn(shape, seed + 1000 + d, 1.0, autograd::DType::f32, device);
  const autograd::Tensor target =
      autograd::randn(shape, seed + 2000 + d, 0.5, autograd::DType::f32, device);
  const nn::PipelineShape pipeline{shape, s.micro_batches, autograd::DType::f32, device};
  const auto forward = [&stage, &options](const autograd::Tensor& x) {
    return stage.forward(x, options.recompute);
  };
  nn::DataParallelGradients gradients(parameters, topology.dp_comm());
  gradients.set_backward_passes(s.micro_batches);
  kernels::release_cached_blocks();  // the master weights' blocks: the steps never reuse them
  const auto step = [&] {
    gradients.zero();
    nn::pipeline_train_step(topology, pipeline, forward, input, target);
    gradients.finish();
  };

  for (int i = 0; i < options.warmup; ++i)
    step();
  comm::barrier(world);
  const double tokens = static_cast<double>(sizes.dp * s.batch * s.seq);
  ProgressLine progress("bench", options.steps, "tokens/s", parse_progress_mode(options.progress),
                        world.rank() == 0);
  const double allocations_before = backend_allocations();
  const double wait_before = comm::wait_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < options.steps; ++i) {
    step();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress.update(i + 1, std::nullopt, tokens * (i + 1) / std::max(elapsed, 1e-9));
  }
  progress.suspend();
  kernels::synchronize(device);
  comm::barrier(world);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<double> allocations =
      comm::all_gather_scalar(world, (backend_allocations() - allocations_before) / options.steps);
  const std::vector<double> wait_share =
      comm::all_gather_scalar(world, (comm::wait_seconds() - wait_before) / seconds);
  const std::vector<double> rss = comm::all_gather_scalar(world, peak_rss_mib());
  const kernels::AllocatorStats pool = kernels::allocator_stats(device);
  const std::vector<double> in_use = comm::all_gather_scalar(world, mib(pool.peak_in_use_bytes));
  const std::vector<double> held = comm::all_gather_scalar(world, mib(pool.peak_held_bytes));
  if (world.rank() != 0) return 0;

  const double ms_per_step = 1e3 * seconds / options.steps;
  const double gflop =
      12.0 * static_cast<double>(s.hidden * s.intermediate * s.layers) * tokens / 1e9;
  const double peak = *std::max_element(rss.begin(), rss.end());
  const double achieved = gflop / (ms_per_step / 1e3);
  const std::optional<double> mfu =
      model_flops_utilisation(achieved, options.peak_gflops, world.size());
  // Ranks x threads: the CPU threads the step ran on (a CUDA rank counts as one).
  const int threads = device == kernels::Device::cpu ? kernels::cpu_threads() : 1;
  const double tokens_per_s = tokens / (ms_per_step / 1e3);
  const double per_thread = tokens_per_s / (world.size() * threads);
  fmt::print(
      "bench: world {} = tp {} x pp {} x dp {}, {} | hidden {} intermediate {} batch {} seq {} "
      "layers {} micro-batches {}{}{}\n"
      "bench: {:.1f} ms/step, {:.0f} tokens/s, {:.1f} GFLOP/s achieved ({:.3g} model "
      "GFLOP/step{}), "
      "peak RSS {:.0f} MiB/rank (max)\n"
      "bench: {:.0f} tokens/s per thread ({} x {})\n"
      "bench: {:.1f} allocations/step after warm-up (max over ranks); {} memory peak {:.0f} MiB "
      "in use, {:.0f} MiB with the allocator's cache (max over ranks)\n"
      "bench: share of the step waiting on communication per rank: {}\n"
      "bench: idle share per pipeline stage ({} schedule): {}\n",
      world.size(), sizes.tp, sizes.pp, sizes.dp, device_text(device, kernels::DType::f32),
      s.hidden, s.intermediate, s.batch, s.seq, s.layers, s.micro_batches,
      options.recompute ? ", recomputing activations" : "",
      options.dtype == "bfloat16" ? ", bfloat16 GEMM operands" : "", ms_per_step, tokens_per_s,
      achieved, gflop, mfu ? ", " + mfu_text(mfu) : std::string(), peak, per_thread,
      nn::counted(world.size(), "rank"), nn::counted(threads, "thread"),
      *std::max_element(allocations.begin(), allocations.end()), kernels::to_string(device),
      *std::max_element(in_use.begin(), in_use.end()), *std::max_element(held.begin(), held.end()),
      percentages(wait_share), nn::to_string(pipeline.schedule),
      percentages(mean_by_stage(wait_share, sizes.tp, sizes.pp)));
  if (!options.common.json.empty()) {
    nlohmann::json report{{"tool", "mpitron"},
                          {"config", config_json(s, sizes, device, seed, world.size())},
                          {"recompute", options.recompute},
                          {"dtype", options.dtype},
                          {"ms_per_step", ms_per_step},
                          {"tokens_per_s", tokens_per_s},
                          {"threads", threads},
                          {"tokens_per_s_per_thread", per_thread},
                          {"achieved_gflops", achieved},
                          {"model_gflop_per_step", gflop},
                          {"peak_rss_mib_by_rank", rss},
                          {"allocations_per_step_by_rank", allocations},
                          {"allocator_peak_in_use_mib_by_rank", in_use},
                          {"allocator_peak_held_mib_by_rank", held},
                          {"comm_wait_share_by_rank", wait_share},
                          {"idle_share_by_stage", mean_by_stage(wait_share, sizes.tp, sizes.pp)}};
    if (mfu) report["mfu"] = *mfu;
    write_json(options.common.json, report, /*append=*/true);
  }
  return 0;
}

}  // namespace mpitron::app
