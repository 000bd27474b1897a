#include "app/bench/gpt.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <vector>

#include "app/bench/comm_ops.h"
#include "app/common/context_parallel_options.h"
#include "app/common/help.h"
#include "app/common/model_sizes.h"
#include "app/common/options.h"
#include "app/report/idle_share.h"
#include "app/report/memory.h"
#include "comm/agreement.h"
#include "comm/collectives.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "comm/wait.h"
#include "kernels/allocator.h"
#include "kernels/ops.h"
#include "nn/layers/context_parallel_attention.h"
#include "nn/train/gpt_trainer.h"
#include "nn/train/memory_estimate.h"
#include "nn/wording.h"

namespace mpitron::app {

CLI::App& add_bench_gpt_command(CLI::App& bench, BenchGptOptions& options) {
  CLI::App& command = *bench.add_subcommand(
      "gpt", "Time the GPT training step at any (tp, cp, pp, dp): memory, CP balance and waits");
  add_common_options(command, options.common);
  add_context_parallel_options(command, options.common);
  add_switch(command, "--no-cp-prefetch", options.no_cp_prefetch,
             "The ring waits for each key/value transfer before computing");
  command.add_option("--arch", options.arch, "Decoder family: gpt2 or llama")
      ->check(CLI::IsMember({"gpt2", "llama"}))
      ->capture_default_str();
  const auto size = [&command](const std::string& flag, auto& value, const std::string& help,
                               std::int64_t minimum = 1) {
    add_size_option(command, flag, value, help)->check(integer_in(minimum, kMaxSize));
  };
  size("--layers", options.layers, "Transformer blocks");
  size("--hidden", options.hidden, "Hidden size");
  size("--heads", options.heads, "Attention heads");
  size("--kv-heads", options.kv_heads, "llama: key/value heads (0: --heads)", 0);
  size("--vocab", options.vocab, "Vocabulary size");
  size("--seq", options.seq, "Tokens per sequence (split over the cp ranks)");
  size("--micro-batch", options.micro_batch, "Sequences per micro-batch");
  size("--micro-batches", options.micro_batches, "Micro-batches per step and replica");
  size("--steps", options.steps, "Timed steps");
  size("--warmup", options.warmup, "Untimed warm-up steps", 0);
  add_switch(command, "--recompute", options.recompute,
             "Keep only each block's input and recompute its activations in backward");
  add_switch(command, "--sequence-parallel", options.sequence_parallel,
             "train --sequence-parallel's step: activations outside the TP regions split "
             "along seq over the tp ranks");
  add_switch(command, "--bf16", options.bf16,
             "train --bf16's step: bfloat16 GEMMs and parameters, float32 masters");
  add_switch(command, "--beside-float32", options.beside_float32,
             "With --bf16: then time a float32 trainer of the same model, its steps "
             "alternating with the bf16 ones, and print the bf16 / float32 ratio");
  add_example(command, "mpirun -np 2 mpitron bench gpt --cp 2 --seq 8192 --layers 2 --hidden 128");
  return command;
}

namespace {

// The model the flags describe, its vocabulary padded for tp.
nn::GptConfig bench_gpt_config(const BenchGptOptions& o, int tp) {
  nn::GptConfig config{o.vocab, o.seq, o.layers, o.hidden, o.heads};
  config.arch = nn::arch_from_string(o.arch);
  config.kv_heads = o.kv_heads;
  config.padded_vocab = nn::padded_vocab_size(o.vocab, tp);
  return config;
}

// The checks of bench gpt's flags, each one line.
void check_bench_gpt_flags(const BenchGptOptions& o, const nn::GptConfig& config,
                           const ParallelSizes& sizes) {
  if (o.kv_heads != 0 && o.arch != "llama") {
    throw comm::ConfigError("--kv-heads is a llama flag: add --arch llama");
  }
  if (o.beside_float32 && !o.bf16) {
    throw comm::ConfigError("--beside-float32 times --bf16's step beside float32's: add --bf16");
  }
  if (const auto error = nn::gpt_size_error(config, sizes.tp, sizes.pp)) {
    throw comm::ConfigError(*error);
  }
  check_context_parallel_sequence(o.seq, sizes, o.sequence_parallel);
  check_tensor_elements(
      {{"--micro-batch x --seq x --vocab", {o.micro_batch, o.seq, config.vocab_rows()}},
       {"--micro-batch x --seq x 4 --hidden", {o.micro_batch, o.seq, config.ffn_size()}}});
}

// This replica's micro-batches: random tokens in [0, vocab) from `seed`.
std::vector<nn::TokenBatch> bench_gpt_batches(const BenchGptOptions& o, std::uint64_t seed,
                                              kernels::Device device) {
  const std::int64_t sequences = o.micro_batch * o.micro_batches;
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<std::uint32_t> token(0, static_cast<std::uint32_t>(o.vocab - 1));
  std::vector<std::uint32_t> tokens(static_cast<std::size_t>(sequences * (o.seq + 1)));
  for (std::uint32_t& t : tokens)
    t = token(generator);
  std::vector<nn::TokenBatch> batches;
  for (std::int64_t m = 0; m < o.micro_batches; ++m) {
    std::vector<std::int64_t> starts;
    for (std::int64_t i = 0; i < o.micro_batch; ++i)
      starts.push_back((m * o.micro_batch + i) * (o.seq + 1));
    batches.push_back(nn::make_token_batch(tokens, starts, o.seq, device));
  }
  return batches;
}

// The largest max/min of `compute_s` within a cp group, the same on every rank; nothing at cp 1.
std::optional<double> bench_gpt_balance(const comm::ParallelTopology& topology,
                                        const comm::Communicator& world, double compute_s) {
  if (topology.cp() == 1) return std::nullopt;
  const std::vector<double> group = comm::all_gather_scalar(topology.cp_comm(), compute_s);
  const auto [low, high] = std::minmax_element(group.begin(), group.end());
  const std::vector<double> ratios = comm::all_gather_scalar(world, *high / *low);
  return *std::max_element(ratios.begin(), ratios.end());
}

// "1.234, 1.210" for the values at `digits` decimals.
std::string bench_gpt_numbers(const std::vector<double>& values, int digits) {
  std::string text;
  for (const double v : values)
    text += fmt::format("{}{:.{}f}", text.empty() ? "" : ", ", v, digits);
  return text;
}

double bench_gpt_largest(const std::vector<double>& values) {
  return *std::max_element(values.begin(), values.end());
}

// Milliseconds of one step of `trainer` under `operands`, between barriers: every rank's clock
// spans the slowest rank's step.
double bench_gpt_timed_step(nn::GptTrainer& trainer, const std::vector<nn::TokenBatch>& batches,
                            double lr, kernels::GemmOperands operands,
                            const comm::Communicator& world, kernels::Device device) {
  const kernels::GemmOperandsScope scope(operands);
  comm::barrier(world);
  const auto start = std::chrono::steady_clock::now();
  trainer.step(batches, lr);
  kernels::synchronize(device);
  comm::barrier(world);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// --beside-float32: the step times (ms) of --steps pairs, the --bf16 trainer's and those of a
// float32 trainer of the same model and initialization, alternating, after untimed steps: the
// float32 trainer's --warmup (at least one), then one pair.
struct SideBySide {
  std::vector<double> bf16_ms, float32_ms;
};

SideBySide bench_gpt_beside_float32(const BenchGptOptions& o, const nn::GptConfig& config,
                                    const comm::ParallelTopology& topology,
                                    nn::GptTrainOptions train, nn::GptTrainer& bf16_trainer,
                                    const std::vector<nn::TokenBatch>& batches,
                                    const comm::Communicator& world) {
  std::optional<nn::GptTrainer> float32_trainer;
  nn::GptTrainOptions float32_train = train;
  float32_train.bf16 = false;
  {
    const kernels::GemmOperandsScope operands(kernels::GemmOperands::float32);
    float32_trainer.emplace(config,
                            nn::gpt2_init(o.common.seed, config.layers, train.dtype, train.device),
                            topology, float32_train);
    for (int i = 0; i < std::max(o.warmup, 1); ++i)
      float32_trainer->step(batches, train.lr);
  }
  SideBySide times;
  // One step of either trainer, its time appended to `into` when given.
  const auto step = [&](bool bf16, std::vector<double>* into) {
    const double ms = bench_gpt_timed_step(
        bf16 ? bf16_trainer : *float32_trainer, batches, train.lr,
        bf16 ? kernels::GemmOperands::bfloat16 : kernels::GemmOperands::float32, world,
        train.device);
    if (into != nullptr) into->push_back(ms);
  };
  // One untimed pair first: a step right after the other trainer's start-up, or after two steps
  // of the other, ran up to twice its later ones.
  step(true, nullptr);
  step(false, nullptr);
  for (int i = 0; i < o.steps; ++i) {
    const bool bf16_first = i % 2 == 0;
    step(bf16_first, bf16_first ? &times.bf16_ms : &times.float32_ms);
    step(!bf16_first, bf16_first ? &times.float32_ms : &times.bf16_ms);
  }
  return times;
}

// The line --beside-float32 adds, and the pairs' ratios' median.
std::string bench_gpt_side_by_side_line(const SideBySide& times, double& ratio_median) {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < times.bf16_ms.size(); ++i)
    ratios.push_back(times.bf16_ms[i] / times.float32_ms[i]);
  ratio_median = median(ratios);
  const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
  return fmt::format(
      "bench gpt: beside float32, {} alternating pairs: bf16 {:.1f} ms/step median ({:.1f} "
      "fastest), float32 {:.1f} ({:.1f}); bf16 / float32 {:.3f} (median of the pairs; {:.3f} to "
      "{:.3f})\n",
      ratios.size(), median(times.bf16_ms),
      *std::min_element(times.bf16_ms.begin(), times.bf16_ms.end()), median(times.float32_ms),
      *std::min_element(times.float32_ms.begin(), times.float32_ms.end()), ratio_median, *low,
      *high);
}

}  // namespace

int run_bench_gpt(const BenchGptOptions& o, comm::Communicator world) {
  ParallelSizes sizes;
  nn::GptConfig config;
  kernels::Device device{};
  comm::agree_on_configuration(world, [&] {
    sizes = resolve_parallel_sizes(o.common, world.size());
    config = bench_gpt_config(o, sizes.tp);
    check_bench_gpt_flags(o, config, sizes);
    device = resolve_device(o.common.device);
    prepare_run(o.common, world);
    return fmt::format(
        "bench gpt {} tp={} cp={} pp={} dp={} seq={} micro_batch={} "
        "micro_batches={} steps={} warmup={} recompute={} sequence_parallel={} bf16={} "
        "beside_float32={} cp_comm={} prefetch={} seed={}",
        o.arch, sizes.tp, sizes.cp, sizes.pp, sizes.dp, o.seq, o.micro_batch, o.micro_batches,
        o.steps, o.warmup, o.recompute, o.sequence_parallel, o.bf16, o.beside_float32,
        o.common.cp_comm, !o.no_cp_prefetch, o.common.seed);
  });
  const kernels::GemmOperandsScope operands(o.bf16 ? kernels::GemmOperands::bfloat16
                                                   : kernels::GemmOperands::float32);
  const comm::ParallelTopology topology(world, sizes.tp, sizes.pp, sizes.dp, sizes.cp);
  nn::GptTrainOptions train;
  train.recompute = o.recompute;
  train.sequence_parallel = o.sequence_parallel && sizes.tp > 1;
  train.bf16 = o.bf16;
  train.cp_comm = cp_comm_of(o.common);
  train.cp_prefetch = !o.no_cp_prefetch;
  train.device = device;
  const std::uint64_t seed = o.common.seed;
  nn::GptTrainer trainer(config, nn::gpt2_init(seed, config.layers, train.dtype, device), topology,
                         train);
  const std::vector<nn::TokenBatch> batches =
      bench_gpt_batches(o, seed + 1000 + static_cast<std::uint64_t>(topology.dp_rank()), device);
  // AdamW's two states per parameter (and --bf16's masters), from a seed, not sharded.
  const nn::MemoryEstimateInput sizes_for_estimate{
      .config = config,
      .rank_parameters = nn::parameter_count(trainer.parameters()),
      .seq = o.seq,
      .micro_batch = o.micro_batch,
      .micro_batches = o.micro_batches,
      .tp = sizes.tp,
      .pp = sizes.pp,
      .stage = topology.pp_rank(),
      .schedule = train.schedule,
      .recompute = o.recompute,
      .sequence_parallel = train.sequence_parallel,
      .cp = sizes.cp,
      .bf16 = o.bf16};
  const nn::MemoryEstimate predicted = nn::estimate_gpt_memory(sizes_for_estimate);
  const std::vector<double> estimate =
      comm::all_gather_scalar(world, mib(static_cast<double>(predicted.peak())));
  const std::vector<double> estimate_activations =
      comm::all_gather_scalar(world, mib(static_cast<double>(predicted.activations)));

  for (int i = 0; i < o.warmup; ++i)
    trainer.step(batches, train.lr);
  kernels::synchronize(device);
  comm::barrier(world);
  nn::cp_attention_times() = {};
  const double wait_before = comm::wait_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i)
    trainer.step(batches, train.lr);
  kernels::synchronize(device);
  comm::barrier(world);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const nn::CpAttentionTimes cp = nn::cp_attention_times();
  const std::vector<double> compute = comm::all_gather_scalar(world, cp.compute_s / o.steps);
  const std::vector<double> cp_wait = comm::all_gather_scalar(world, cp.wait_s / o.steps);
  const std::vector<double> wait_share =
      comm::all_gather_scalar(world, (comm::wait_seconds() - wait_before) / seconds);
  const std::vector<double> cp_wait_share = comm::all_gather_scalar(world, cp.wait_s / seconds);
  const std::optional<double> balance = bench_gpt_balance(topology, world, cp.compute_s);
  const std::vector<double> rss = comm::all_gather_scalar(world, peak_rss_mib());
  const kernels::AllocatorStats pool = kernels::allocator_stats(device);
  const std::vector<double> in_use =
      comm::all_gather_scalar(world, mib(static_cast<double>(pool.peak_in_use_bytes)));
  const std::vector<double> held =
      comm::all_gather_scalar(world, mib(static_cast<double>(pool.peak_held_bytes)));
  const std::optional<SideBySide> side_by_side =
      o.beside_float32 ? std::optional(bench_gpt_beside_float32(o, config, topology, train, trainer,
                                                                batches, world))
                       : std::nullopt;
  if (world.rank() != 0) return 0;

  const double ms_per_step = 1e3 * seconds / o.steps;
  const double tokens =
      static_cast<double>(sizes.dp) * static_cast<double>(o.micro_batches * o.micro_batch * o.seq);
  const double tokens_per_s = tokens / (ms_per_step / 1e3);
  fmt::print(
      "bench gpt: world {} = tp {} x cp {} x pp {} x dp {}, {} | {} layers {} hidden {} heads {} "
      "vocab {} seq {}, {} of {}{}{}{}; cp-comm {}{}\n"
      "bench gpt: {:.1f} ms/step, {:.0f} tokens/s\n"
      "bench gpt: peak RSS {:.0f} MiB/rank (max), by rank: {}; estimate {:.0f} MiB (max), by "
      "rank: {}, of which activations {}\n"
      "bench gpt: {} memory peak {:.0f} MiB in use, {:.0f} MiB with the allocator's cache (max "
      "over ranks)\n"
      "bench gpt: attention compute s/step by rank: {}; max/min over the cp ranks {}\n"
      "bench gpt: cp key/value wait s/step by rank: {}\n"
      "bench gpt: share of the step waiting on communication by rank: {}; in the cp key/value "
      "waits: {}\n",
      world.size(), sizes.tp, sizes.cp, sizes.pp, sizes.dp,
      device_text(device, kernels::DType::f32), o.arch, o.layers, o.hidden, o.heads, o.vocab, o.seq,
      nn::counted(o.micro_batches, "micro-batch", "micro-batches"),
      nn::counted(o.micro_batch, "sequence"), o.recompute ? ", recomputing activations" : "",
      train.sequence_parallel ? ", sequence parallel" : "", o.bf16 ? ", bf16" : "",
      o.common.cp_comm, o.no_cp_prefetch ? " without prefetch" : "", ms_per_step, tokens_per_s,
      bench_gpt_largest(rss), bench_gpt_numbers(rss, 0), bench_gpt_largest(estimate),
      bench_gpt_numbers(estimate, 0), bench_gpt_numbers(estimate_activations, 0),
      kernels::to_string(device), bench_gpt_largest(in_use), bench_gpt_largest(held),
      bench_gpt_numbers(compute, 3), balance ? fmt::format("{:.3f}", *balance) : "n/a at cp 1",
      bench_gpt_numbers(cp_wait, 3), percentages(wait_share), percentages(cp_wait_share));
  double ratio_median = 0.0;
  if (side_by_side) fmt::print("{}", bench_gpt_side_by_side_line(*side_by_side, ratio_median));
  if (!o.common.json.empty()) {
    write_json(
        o.common.json,
        {{"tool", "mpitron"},
         {"bench", "gpt"},
         {"config",
          {{"world_size", world.size()},
           {"tp", sizes.tp},
           {"cp", sizes.cp},
           {"pp", sizes.pp},
           {"dp", sizes.dp},
           {"device", kernels::to_string(device)},
           {"threads", device == kernels::Device::cpu ? kernels::cpu_threads() : 1},
           {"arch", o.arch},
           {"layers", o.layers},
           {"hidden", o.hidden},
           {"heads", o.heads},
           {"kv_heads", config.kv_head_count()},
           {"vocab", o.vocab},
           {"seq", o.seq},
           {"micro_batch", o.micro_batch},
           {"micro_batches", o.micro_batches},
           {"steps", o.steps},
           {"warmup", o.warmup},
           {"seed", seed}}},
         {"cp_comm", o.common.cp_comm},
         {"cp_prefetch", !o.no_cp_prefetch},
         {"recompute", o.recompute},
         {"sequence_parallel", train.sequence_parallel},
         {"bf16", o.bf16},
         {"ms_per_step", ms_per_step},
         {"tokens_per_s", tokens_per_s},
         {"peak_rss_mib_by_rank", rss},
         {"memory_estimate_mib_by_rank", estimate},
         {"memory_estimate_activations_mib_by_rank", estimate_activations},
         {"allocator_peak_in_use_mib_by_rank", in_use},
         {"allocator_peak_held_mib_by_rank", held},
         {"attention_compute_s_by_rank", compute},
         {"cp_wait_s_by_rank", cp_wait},
         {"cp_balance", balance ? nlohmann::json(*balance) : nlohmann::json()},
         {"comm_wait_share_by_rank", wait_share},
         {"cp_wait_share_by_rank", cp_wait_share},
         {"beside_float32", side_by_side ? nlohmann::json{{"bf16_ms", side_by_side->bf16_ms},
                                                          {"float32_ms", side_by_side->float32_ms},
                                                          {"ratio_median", ratio_median}}
                                         : nlohmann::json()}},
        /*append=*/true);
  }
  return 0;
}

}  // namespace mpitron::app
