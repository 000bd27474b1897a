#include "app/validate/attention.h"
#include "app/common/help.h"
#include "app/common/model_sizes.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "comm/agreement.h"
#include "comm/collectives.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "comm/topology.h"
#include "nn/layers/attention.h"

namespace mpitron::app {

CLI::App& add_attention_command(CLI::App& app, AttentionOptions& options) {
  CLI::App& command = *app.add_subcommand(
      "attention", "Tensor-parallel multi-head attention inference, checked against dense");
  add_common_options(command, options.common);
  add_size_option(command, "--embed", options.embed, "Embedding size");
  add_size_option(command, "--heads", options.heads, "Attention heads");
  add_size_option(command, "--batch", options.batch, "Sequences per batch");
  add_size_option(command, "--seq", options.seq, "Sequence length");
  command
      .add_option("--init", options.init,
                  "Weights: seeded scaled normals, or the reference's arange + offset")
      ->check(CLI::IsMember({"normal", "arange"}))
      ->capture_default_str();
  add_size_option(command, "--iterations", options.iterations, "Timed forwards");
  command
      .add_option("--rtol", options.rtol,
                  "Pass when max |tp - dense| <= rtol * max |dense| (normwise)")
      ->capture_default_str();
  add_example(command, "mpirun -np 2 mpitron attention --tp 2 --embed 64 --heads 8");
  return command;
}

namespace {

// tp = --tp (default: the world over --dp), pp = 1, dp = the rest; then the attention size
// rules. Pure: every rank reaches the same verdict without communicating.
ParallelSizes check_sizes(const AttentionOptions& o, int world_size) {
  if (o.common.pp.value_or(1) != 1) throw comm::ConfigError("attention needs --pp 1");
  if (o.common.tp.value_or(1) < 1 || o.common.dp.value_or(1) < 1) {
    throw comm::ConfigError(fmt::format("--tp and --dp must be >= 1, got {} and {}",
                                        o.common.tp.value_or(1), o.common.dp.value_or(1)));
  }
  CommonOptions explicit_sizes = o.common;
  explicit_sizes.tp = o.common.tp.value_or(std::max(1, world_size / o.common.dp.value_or(1)));
  explicit_sizes.pp = 1;
  explicit_sizes.dp = o.common.dp.value_or(std::max(1, world_size / *explicit_sizes.tp));
  const ParallelSizes sizes = resolve_parallel_sizes(explicit_sizes, world_size);
  if (const auto error = nn::attention_size_error(o.embed, o.heads, sizes.tp)) {
    throw comm::ConfigError(*error);
  }
  if (o.batch < 1 || o.seq < 1 || o.iterations < 1) {
    throw comm::ConfigError(
        fmt::format("--batch, --seq and --iterations must be >= 1, got {}, "
                    "{} and {}",
                    o.batch, o.seq, o.iterations));
  }
  if (!(o.rtol >= 0.0) || !std::isfinite(o.rtol)) {
    throw comm::ConfigError(fmt::format("--rtol must be finite and >= 0, got {}", o.rtol));
  }
  // The dense reference's largest tensors: the activations, the qkv weight, the scores.
  check_tensor_elements({{"--batch x --seq x --embed", {o.batch, o.seq, o.embed}},
                         {"3 x --embed x --embed", {3, o.embed, o.embed}},
                         {"--batch x --heads x --seq x --seq", {o.batch, o.heads, o.seq, o.seq}}});
  return sizes;
}

std::string describe(const AttentionOptions& o, const ParallelSizes& p, kernels::Device device) {
  return fmt::format(
      "mpitron {} attention tp={} dp={} device={} embed={} heads={} batch={} seq={} init={} "
      "iterations={} rtol={} seed={}",
      MPITRON_VERSION, p.tp, p.dp, kernels::to_string(device), o.embed, o.heads, o.batch, o.seq,
      o.init, o.iterations, o.rtol, o.common.seed);
}

// max |a - b| and max |b| over every element (NaN gives infinity).
std::pair<double, double> max_difference(const autograd::Tensor& a, const autograd::Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double difference = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x[i] - y[i]);
    difference = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(difference, d);
    scale = std::max(scale, std::abs(y[i]));
  }
  return {difference, scale};
}

}  // namespace

int run_attention(const AttentionOptions& options, comm::Communicator world) {
  ParallelSizes sizes;
  kernels::Device device{};
  std::shared_ptr<spdlog::logger> log;
  comm::agree_on_configuration(world, [&] {
    sizes = check_sizes(options, world.size());
    device = resolve_device(options.common.device);
    log = prepare_run(options.common, world);
    return describe(options, sizes, device);
  });
  const comm::ParallelTopology topology(world, sizes.tp, 1, sizes.dp);
  log->debug(describe(options, sizes, device));

  autograd::NoGradGuard no_grad;
  const autograd::DType f32 = autograd::DType::f32;
  const nn::AttentionWeights weights =
      options.init == "arange" ? nn::make_attention_weights_arange(options.embed, f32, device)
                               : nn::make_attention_weights_normal(
                                     options.embed, options.common.seed + 1000, f32, device);
  const autograd::Shape shape{options.batch, options.seq, options.embed};
  autograd::Tensor x = world.rank() == 0
                           ? autograd::randn(shape, options.common.seed, 1.0, f32, device)
                           : autograd::Tensor::zeros(shape, f32, device);
  comm::broadcast(world, x.buffer(), 0);

  const nn::ParallelMultiHeadAttention parallel(weights, options.heads, topology.tp_comm());
  const autograd::Tensor output = parallel.forward(x);
  const autograd::Tensor dense = nn::MultiHeadAttention(weights, options.heads).forward(x);
  const auto [local_difference, local_scale] = max_difference(output, dense);
  const double difference = comm::all_reduce_scalar(world, local_difference, comm::ReduceOp::max);
  const double scale = comm::all_reduce_scalar(world, local_scale, comm::ReduceOp::max);
  const double relative = difference / std::max(scale, std::numeric_limits<double>::min());
  const double mean = autograd::mean(output).item();

  comm::barrier(world);
  const auto start = std::chrono::steady_clock::now();
  autograd::Tensor timed;
  for (int i = 0; i < options.iterations; ++i) {
    timed = parallel.forward(x);
  }
  autograd::mean(timed).item();  // waits for a CUDA device to finish
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  const double ms =
      comm::all_reduce_scalar(world, elapsed.count(), comm::ReduceOp::max) / options.iterations;

  const bool passed = relative <= options.rtol;
  log->info("attention tp={} dp={} embed={} heads={} input [{}, {}, {}] init={} device={}",
            sizes.tp, sizes.dp, options.embed, options.heads, options.batch, options.seq,
            options.embed, options.init, kernels::to_string(device));
  log->info("output mean {:.8g}", mean);
  log->info("{}  max |tp - dense| = {:.3e}, relative to max |dense| {:.3e} (rtol {:g})",
            passed ? "PASS" : "FAIL", difference, relative, options.rtol);
  log->info("time per forward {:.3f} ms (mean of {} forwards, slowest rank)", ms,
            options.iterations);
  if (!options.common.json.empty() && world.rank() == 0) {
    write_json(options.common.json, nlohmann::json{{"config", describe(options, sizes, device)},
                                                   {"output_mean", mean},
                                                   {"max_abs_difference", difference},
                                                   {"relative_difference", relative},
                                                   {"ms_per_forward", ms},
                                                   {"passed", passed}});
  }
  return passed ? 0 : 1;
}

}  // namespace mpitron::app
