#include "app/validate/validate.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "app/common/context_parallel_options.h"
#include "app/common/help.h"
#include "app/validate/attention_checks.h"
#include "app/validate/comm_checks.h"
#include "app/validate/cp_checks.h"
#include "app/validate/gpt_checks.h"
#include "app/validate/kernel_checks.h"
#include "app/validate/mlp_checks.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"

namespace mpitron::app {

CLI::App& add_validate_command(CLI::App& app, ValidateOptions& options) {
  CLI::App& command = *app.add_subcommand(
      "validate",
      "Check tensor, pipeline, data, context and combined parallelism against dense models");
  add_common_options(command, options.common);
  add_context_parallel_options(command, options.common);
  ModelSizes& s = options.sizes;
  add_size_option(command, "--hidden", s.hidden, "Hidden size");
  add_size_option(command, "--intermediate", s.intermediate, "MLP intermediate size");
  add_size_option(command, "--batch", s.batch, "Batch size");
  add_size_option(command, "--seq", s.seq, "Sequence length");
  add_size_option(command, "--layers", s.layers, "MLP layers in the pipeline checks");
  command
      .add_option("--micro-batches", options.micro_batches,
                  "Pipeline micro-batch counts the PP and COMBINED checks run with, e.g. 1 4 "
                  "(default: 1 and max(2, pp) rounded up to a divisor of --batch)")
      ->check(size_at_most_max());
  command.add_option("--rtol", options.tolerance.rtol, "Relative tolerance")->capture_default_str();
  command.add_option("--atol", options.tolerance.atol, "Absolute tolerance")->capture_default_str();
  command
      .add_option("--max-rel-error", options.tolerance.max_rel_error,
                  "Largest max|actual - expected| / max|expected| of any compared tensor")
      ->capture_default_str();
  command.add_option("--inject-fault", options.fault, "Test only: break one parallel rule")
      ->group("");
  add_example(command, "mpirun -np 4 mpitron validate --tp 2 --pp 2 --dp 1");
  return command;
}

namespace {

void check_tolerance(const Tolerance& t) {
  if (!(t.rtol >= 0.0 && t.atol >= 0.0 && std::isfinite(t.rtol) && std::isfinite(t.atol))) {
    throw comm::ConfigError(
        fmt::format("--rtol and --atol must be finite and >= 0, got {} and {}", t.rtol, t.atol));
  }
  if (!(t.max_rel_error >= 0.0 && std::isfinite(t.max_rel_error))) {
    throw comm::ConfigError(
        fmt::format("--max-rel-error must be finite and >= 0, got {}", t.max_rel_error));
  }
}

std::string describe(const ValidateOptions& o, const nlohmann::json& config) {
  return fmt::format("validate {} rtol={} atol={} max_rel_error={} fault={}", config.dump(),
                     o.tolerance.rtol, o.tolerance.atol, o.tolerance.max_rel_error, o.fault);
}

}  // namespace

int run_validate(const ValidateOptions& options, comm::Communicator world) {
  const auto start = std::chrono::steady_clock::now();
  ParallelSizes sizes;
  std::vector<int> micro_batch_runs;
  nlohmann::json config;
  kernels::Device device{};
  std::shared_ptr<spdlog::logger> log;
  comm::agree_on_configuration(world, [&] {
    sizes = resolve_parallel_sizes(options.common, world.size());
    micro_batch_runs = options.micro_batches.empty()
                           ? default_micro_batch_runs(options.sizes.batch, sizes.pp)
                           : options.micro_batches;
    for (const int m : micro_batch_runs) {
      ModelSizes run = options.sizes;
      run.micro_batches = m;
      check_divisibility(run, sizes.tp, sizes.pp);
    }
    if (kValidateVocab % sizes.tp != 0) {
      throw comm::ConfigError(fmt::format(
          "the GPT checks' vocab {} is not divisible by tp {} (give a tp that divides it)",
          kValidateVocab, sizes.tp));
    }
    // The sequence-parallel GPT checks split each cp shard further over TP.
    check_context_parallel_sequence(options.sizes.seq, sizes, /*sequence_parallel=*/true);
    check_tolerance(options.tolerance);
    device = resolve_device(options.common.device);
    inject_fault(options.fault);
    log = prepare_run(options.common, world);
    config = config_json(options.sizes, sizes, device, options.common.seed, world.size());
    config["micro_batches"] = micro_batch_runs;
    config["cp_comm"] = options.common.cp_comm;
    return describe(options, config);
  });
  const comm::ParallelTopology topology(world, sizes.tp, sizes.pp, sizes.dp, sizes.cp);
  log->debug("rank {} of {}: (t, c, p, d) = ({}, {}, {}, {}); {}", world.rank(), world.size(),
             topology.tp_rank(), topology.cp_rank(), topology.pp_rank(), topology.dp_rank(),
             config.dump());
  log->info("world {} = tp {} x {}pp {} x dp {}, device {}", world.size(), sizes.tp,
            sizes.cp > 1 ? fmt::format("cp {} ({}) x ", sizes.cp, options.common.cp_comm) : "",
            sizes.pp, sizes.dp, device_text(device, kernels::DType::f32));

  MasterDraws masters;
  DenseGptReferences dense_gpt;
  ValidateContext ctx{topology,          options.sizes, device, options.common.seed,
                      options.tolerance, *log};
  ctx.cp_comm = cp_comm_of(options.common);
  ctx.masters = &masters;
  ctx.dense_gpt = &dense_gpt;
  std::vector<CheckResult> results;
  const auto report = [&](const std::vector<LocalCheck>& checks) {
    for (const CheckResult& result : agree(world, checks)) {
      results.push_back(result);
      log->info(format_result(result));
    }
  };
  // Each pipelined check once per micro-batch count, and with more than one micro-batch once
  // per schedule (with one, every schedule is the same sequence).
  const auto per_micro_batch_run = [&](auto check) {
    for (const int m : micro_batch_runs) {
      for (const nn::ScheduleKind schedule :
           {nn::ScheduleKind::afab, nn::ScheduleKind::one_f_one_b}) {
        if (m == 1 && schedule != nn::ScheduleKind::afab) continue;
        ValidateContext run = ctx;
        run.sizes.micro_batches = m;
        run.schedule = schedule;
        report(check(run));
      }
    }
  };
  report(check_kernels(ctx));
  report(check_communication(ctx));
  report(check_tensor_parallel(ctx));
  report(check_tensor_parallel_attention(ctx));
  report(check_context_parallel(ctx));
  report(check_transformer_block(ctx));
  report(check_vocab_parallel(ctx));
  per_micro_batch_run(check_pipeline_parallel);
  report(check_data_parallel(ctx));
  per_micro_batch_run(check_combined);
  per_micro_batch_run(check_gpt);
  per_micro_batch_run(check_gpt_sequence_parallel);
  report(check_distributed_optimizer(ctx));
  per_micro_batch_run(check_gpt_ignored_targets);
  per_micro_batch_run(check_gpt_llama);
  {
    ValidateContext run = ctx;
    run.sizes.micro_batches = micro_batch_runs.back();
    run.schedule = nn::ScheduleKind::one_f_one_b;
    report(check_gpt_bf16(run));
  }
  // Interleaved 1F1B with 2 virtual stages, where the layout allows it (pp >= 2, layers
  // divisible by 2 pp, micro-batches a multiple of pp).
  for (const int m : micro_batch_runs) {
    if (!nn::pipeline_layout_error(sizes.pp, 2, m).empty() ||
        options.sizes.layers % (2 * sizes.pp) != 0) {
      continue;
    }
    ValidateContext run = ctx;
    run.sizes.micro_batches = m;
    run.schedule = nn::ScheduleKind::one_f_one_b;
    run.virtual_stages = 2;
    report(check_gpt(run));
  }
  const bool passed =
      std::all_of(results.begin(), results.end(), [](const CheckResult& r) { return r.passed; });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log->info("{} ({} checks, {:.2f} s)",
            passed ? "all parallel validations passed" : "one or more parallel validations FAILED",
            results.size(), seconds);

  if (!options.common.json.empty() && world.rank() == 0) {
    nlohmann::json checks = nlohmann::json::array();
    for (const CheckResult& r : results)
      checks.push_back(to_json(r));
    write_json(options.common.json,
               {{"config", config}, {"checks", checks}, {"passed", passed}, {"seconds", seconds}});
  }
  return passed ? 0 : 1;
}

}  // namespace mpitron::app
