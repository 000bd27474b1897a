#include "app/validate.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "app/validate_attention.h"
#include "app/validate_checks.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "nn/fault_injection.h"

namespace mpitron::app {

CLI::App& add_validate_command(CLI::App& app, ValidateOptions& options) {
  CLI::App& command = *app.add_subcommand(
      "validate", "Check tensor, pipeline, data and combined parallelism against dense models");
  add_common_options(command, options.common);
  ModelSizes& s = options.sizes;
  command.add_option("--hidden", s.hidden, "Hidden size")->capture_default_str();
  command.add_option("--intermediate", s.intermediate, "MLP intermediate size")
      ->capture_default_str();
  command.add_option("--batch", s.batch, "Batch size")->capture_default_str();
  command.add_option("--seq", s.seq, "Sequence length")->capture_default_str();
  command.add_option("--layers", s.layers, "MLP layers in the pipeline checks")
      ->capture_default_str();
  command.add_option("--micro-batches", s.micro_batches, "Pipeline micro-batches per step")
      ->capture_default_str();
  command.add_option("--rtol", options.tolerance.rtol, "Relative tolerance")->capture_default_str();
  command.add_option("--atol", options.tolerance.atol, "Absolute tolerance")->capture_default_str();
  command.add_option("--inject-fault", options.fault, "Test only: break one parallel rule")
      ->group("");
  return command;
}

namespace {

void check_tolerance(const Tolerance& t) {
  if (!(t.rtol >= 0.0 && t.atol >= 0.0 && std::isfinite(t.rtol) && std::isfinite(t.atol))) {
    throw comm::ConfigError(
        fmt::format("--rtol and --atol must be finite and >= 0, got {} and {}", t.rtol, t.atol));
  }
}

std::string describe(const ValidateOptions& o, const nlohmann::json& config) {
  return fmt::format("validate {} rtol={} atol={} fault={}", config.dump(), o.tolerance.rtol,
                     o.tolerance.atol, o.fault);
}

}  // namespace

int run_validate(const ValidateOptions& options, comm::Communicator world) {
  const auto start = std::chrono::steady_clock::now();
  ParallelSizes sizes;
  kernels::Device device{};
  std::shared_ptr<spdlog::logger> log;
  comm::agree_on_configuration(world, [&] {
    sizes = resolve_parallel_sizes(options.common, world.size());
    check_divisibility(options.sizes, sizes.tp, sizes.pp);
    check_tolerance(options.tolerance);
    device = resolve_device(options.common.device);
    inject_fault(options.fault);
    log = prepare_run(options.common, world);
    return describe(options,
                    config_json(options.sizes, sizes, device, options.common.seed, world.size()));
  });
  const comm::ParallelTopology topology(world, sizes.tp, sizes.pp, sizes.dp);
  log->debug("rank {} of {}: (t, p, d) = ({}, {}, {}); {}", world.rank(), world.size(),
             topology.tp_rank(), topology.pp_rank(), topology.dp_rank(),
             config_json(options.sizes, sizes, device, options.common.seed, world.size()).dump());
  log->info("world {} = tp {} x pp {} x dp {}, device {}", world.size(), sizes.tp, sizes.pp,
            sizes.dp, kernels::to_string(device));

  const ValidateContext ctx{topology,          options.sizes, device, options.common.seed,
                            options.tolerance, *log};
  std::vector<CheckResult> results;
  for (const auto& check : {check_tensor_parallel, check_tensor_parallel_attention,
                            check_pipeline_parallel, check_data_parallel, check_combined}) {
    for (const LocalCheck& local : check(ctx)) {
      results.push_back(agree(world, local.name, local.comparison));
      log->info(format_result(results.back()));
    }
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
    write_json(
        options.common.json,
        {{"config", config_json(options.sizes, sizes, device, options.common.seed, world.size())},
         {"checks", checks},
         {"passed", passed},
         {"seconds", seconds}});
  }
  return passed ? 0 : 1;
}

}  // namespace mpitron::app
