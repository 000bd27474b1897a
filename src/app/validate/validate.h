// `mpitron validate`: the reference job. Runs the TP, PP, DP and combined checks against dense
// references and reports PASS/FAIL per check, agreed over all ranks.
#pragma once

#include <CLI/CLI.hpp>

#include "app/common/options.h"
#include "app/validate/context.h"

namespace mpitron::app {

struct ValidateOptions {
  CommonOptions common;
  ModelSizes sizes;
  Tolerance tolerance;
  /// Micro-batch counts the PP and COMBINED checks run with; empty (the default) means
  /// default_micro_batch_runs(batch, pp).
  std::vector<int> micro_batches;
  std::string fault = "none";
};

/// Adds the `validate` subcommand and its flags to `app`.
CLI::App& add_validate_command(CLI::App& app, ValidateOptions& options);

/// Runs the job on every rank of `world`. Returns 0 when every check passed on every rank, 1
/// otherwise. Throws comm::ConfigError for bad sizes or topologies (on every rank alike).
int run_validate(const ValidateOptions& options, comm::Communicator world);

}  // namespace mpitron::app
