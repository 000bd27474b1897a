// The `mpitron` executable: one subcommand per job. Ranks come from the MPI launcher (mpirun,
// srun, mpiexec); run `mpitron --help` for the subcommands.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/bench/comm.h"
#include "app/bench/gemm.h"
#include "app/bench/gpt.h"
#include "app/bench/schedule.h"
#include "app/bench/step.h"
#include "app/common/gemm_agreement.h"
#include "app/common/help.h"
#include "app/common/options.h"
#include "app/common/version.h"
#include "app/data/tokenize.h"
#include "app/model/eval.h"
#include "app/model/export.h"
#include "app/model/generate.h"
#include "app/train/train.h"
#include "app/train/train_dp.h"
#include "app/validate/attention.h"
#include "app/validate/validate.h"
#include "comm/algorithm_table.h"
#include "comm/configuration.h"
#include "comm/environment.h"
#include "comm/errors.h"
#include "comm/guard.h"
#include "comm/init_watchdog.h"
#include "comm/launch.h"

namespace {

// The value of the last `--init-timeout V` or `--init-timeout=V` in argv, as the parser keeps the
// last of a repeated option (read before MPI starts; the subcommands also list the flag, so the
// parser accepts it later).
std::optional<std::string> init_timeout_flag(int argc, char** argv) {
  constexpr std::string_view kFlag = "--init-timeout";
  std::optional<std::string> value;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == kFlag && i + 1 < argc) {
      value = argv[++i];
    } else if (arg.starts_with(kFlag) && arg.size() > kFlag.size() && arg[kFlag.size()] == '=') {
      value = std::string(arg.substr(kFlag.size() + 1));
    }
  }
  return value;
}

// The name of the subcommand that `extras` (the arguments the parser left, as typed) were given
// before, when the first of them is an option `command` (the subcommand parsed last) takes:
// "mpitron --tp 2 train" gives train's --tp to mpitron itself, "mpitron bench --bf16 gpt" gpt's
// --bf16 to bench. Empty otherwise.
std::string given_before_subcommand(const CLI::App& app, const CLI::App& command,
                                    const std::vector<std::string>& extras, int argc, char** argv) {
  if (&command == &app || extras.empty() || !extras.front().starts_with("--")) return {};
  const std::string& first = extras.front();
  const std::string option = first.substr(0, first.find('='));
  if (command.get_option_no_throw(option) == nullptr) return {};
  const std::string& subcommand = command.get_name();
  for (int i = 1; i < argc && subcommand != argv[i]; ++i) {
    if (first == argv[i]) return subcommand;
  }
  return {};
}

// The parse error to report: a first argument that is neither a flag nor a subcommand is named as
// a mistyped subcommand (CLI11 would only say that a subcommand is required).
std::string parse_error_text(const CLI::App& app, const CLI::ParseError& error, int argc,
                             char** argv) {
  if (argc > 1 && argv[1][0] != '-') {
    const std::string first = argv[1];
    const auto named = [&](const CLI::App* command) { return command->check_name(first); };
    if (app.get_subcommands(named).empty())
      return "unknown subcommand '" + first + "' (run mpitron --help)";
  }
  // CLI11 checks required options before extras: an unknown flag of eval or generate would be
  // reported as a missing --load.
  const bool extras =
      dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr ||
      (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr && !app.remaining(true).empty());
  if (extras) {
    // CLI11 lists the extras last first ("not expected: 2 --tp"); name them as typed, and the
    // subcommand they were given to.
    const std::vector<std::string> remaining = app.remaining(true);
    std::string extras, command = "mpitron";
    for (const std::string& arg : remaining)
      extras += " " + arg;
    const CLI::App* at = &app;
    while (!at->get_subcommands().empty()) {
      at = at->get_subcommands().front();
      command += " " + at->get_name();
    }
    if (const std::string before = given_before_subcommand(app, *at, remaining, argc, argv);
        !before.empty()) {
      return extras.substr(1) + " was given before '" + before +
             "': options go after the subcommand (" + command + extras + " ...)";
    }
    return command + " does not take" + extras + " (see " + command + " --help)";
  }
  const std::string what = error.what();
  if (what.ends_with(" missing") && what.find(": 1 required ") != std::string::npos)
    return what.substr(0, what.find(':')) + " needs a value (see --help)";
  return what + " (see --help)";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mpitron: tensor-, pipeline- and data-parallel training checked against dense models"};
  app.set_version_flag("--version", mpitron::app::version_text);
  app.formatter(mpitron::app::help_formatter());
  app.footer(mpitron::app::common_flags_help() +
             "\nExample:\n  mpirun -np 4 mpitron validate --tp 2 --pp 2 --dp 1");
  app.require_subcommand(1);
  // An option given twice keeps its last value, as with Python's argparse (torchrun,
  // Megatron-LM): a launch script's defaults can be overridden by appending flags.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  mpitron::app::ValidateOptions validate;
  CLI::App& validate_command = mpitron::app::add_validate_command(app, validate);
  mpitron::app::BenchOptions bench;
  CLI::App& bench_command = mpitron::app::add_bench_command(app, bench);
  mpitron::app::TrainOptions train;
  CLI::App& train_command = mpitron::app::add_train_command(app, train);
  mpitron::app::EvalOptions eval;
  CLI::App& eval_command = mpitron::app::add_eval_command(app, eval);
  mpitron::app::GenerateOptions generate;
  CLI::App& generate_command = mpitron::app::add_generate_command(app, generate);
  mpitron::app::ExportOptions export_options;
  CLI::App& export_command = mpitron::app::add_export_command(app, export_options);
  mpitron::app::BenchCommOptions bench_comm;
  CLI::App& bench_comm_command = mpitron::app::add_bench_comm_command(bench_command, bench_comm);
  mpitron::app::BenchGemmOptions bench_gemm;
  CLI::App& bench_gemm_command = mpitron::app::add_bench_gemm_command(bench_command, bench_gemm);
  mpitron::app::BenchGptOptions bench_gpt;
  CLI::App& bench_gpt_command = mpitron::app::add_bench_gpt_command(bench_command, bench_gpt);
  mpitron::app::BenchScheduleOptions bench_schedule;
  CLI::App& bench_schedule_command =
      mpitron::app::add_bench_schedule_command(bench_command, bench_schedule);
  mpitron::app::TrainDpOptions train_dp;
  CLI::App& train_dp_command = mpitron::app::add_train_dp_command(app, train_dp);
  mpitron::app::AttentionOptions attention;
  CLI::App& attention_command = mpitron::app::add_attention_command(app, attention);
  mpitron::app::TokenizeOptions tokenize;
  CLI::App& tokenize_command = mpitron::app::add_tokenize_command(app, tokenize);

  // What only prints starts no MPI (a singleton MPI_Init forks Open MPI's runtime daemon): the
  // parser needs none, and the launcher's variables say which rank prints.
  const mpitron::comm::EnvironmentMap launcher = mpitron::comm::launcher_environment();
  std::string parse_error;
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help or --version: printed once, by rank 0
    return mpitron::comm::launcher_rank(launcher) == 0 ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    parse_error = parse_error_text(app, e, argc, argv);
  }
  if (parse_error.empty() && bench_comm_command)
    parse_error = mpitron::app::bench_step_options_given(bench_command, "comm");
  if (parse_error.empty() && bench_gemm_command)
    parse_error = mpitron::app::bench_step_options_given(bench_command, "gemm");
  if (parse_error.empty() && bench_gpt_command)
    parse_error = mpitron::app::bench_step_options_given(bench_command, "gpt");
  if (parse_error.empty() && bench_schedule_command) {
    parse_error = mpitron::app::bench_step_options_given(bench_command, "schedule");
    if (parse_error.empty()) parse_error = mpitron::app::bench_schedule_error(bench_schedule);
    if (parse_error.empty()) {  // pure computation: printed by rank 0 without MPI, as --help
      if (mpitron::comm::launcher_rank(launcher) == 0) {
        std::fputs(mpitron::app::bench_schedule_report(bench_schedule).c_str(), stdout);
      }
      return 0;
    }
  }
  if (!parse_error.empty() && mpitron::comm::launched_alone(launcher)) {
    // A world of one has no rank to agree with: the line run_guarded would print, without MPI.
    // Among several ranks the arguments may differ per rank, so the error is agreed below.
    std::fprintf(
        stderr, "%s\n",
        mpitron::comm::error_line(mpitron::comm::launcher_rank(launcher), parse_error).c_str());
    return mpitron::comm::kConfigErrorExitCode;
  }

  double init_timeout = 0.0;
  try {
    init_timeout = mpitron::comm::resolve_init_timeout(init_timeout_flag(argc, argv),
                                                       mpitron::comm::init_environment());
  } catch (const mpitron::comm::ConfigError& e) {  // before MPI: every process says it alone
    std::fprintf(stderr, "mpitron: error: %s\n", e.what());
    return mpitron::comm::kConfigErrorExitCode;
  }
  mpitron::comm::Environment environment(argc, argv, init_timeout);
  mpitron::comm::Communicator world = environment.world();
  return mpitron::comm::run_guarded(world, [&] {
    mpitron::comm::check_launch_consistency(world);
    if (!parse_error.empty()) {
      // Agreed like any bad option, so arguments that fail on only some ranks (different
      // arguments per rank) end every rank with one line instead of leaving the others waiting.
      mpitron::comm::agree_on_configuration(
          world, [&]() -> std::string { throw mpitron::comm::ConfigError(parse_error); });
    }
    // Rank 0's algorithm table, for every rank: the ranks of a communicator must take the same
    // algorithms.
    const mpitron::app::CommTableSource table = mpitron::app::comm_table_source(app);
    const std::string note =
        mpitron::comm::agree_on_algorithm_table(world, table.path, table.from_variable);
    if (!note.empty() && world.rank() == 0)
      std::fprintf(stderr, "rank 0: note: %s\n", note.c_str());
    // Rank 0's `--gemm auto` provider, for every rank: replicas must compute the same bits.
    // Commands without a GEMM (bench comm, tokenize, export) measure nothing.
    const mpitron::app::CommonOptions* gemm_user = validate_command     ? &validate.common
                                                   : bench_gemm_command ? &bench_gemm.common
                                                   : bench_gpt_command  ? &bench_gpt.common
                                                   : bench_comm_command ? nullptr
                                                   : bench_command      ? &bench.common
                                                   : train_command      ? &train.common
                                                   : eval_command       ? &eval.common
                                                   : generate_command   ? &generate.common
                                                   : train_dp_command   ? &train_dp.common
                                                   : attention_command  ? &attention.common
                                                                        : nullptr;
    mpitron::app::agree_auto_gemm_provider(
        world, gemm_user != nullptr && mpitron::app::wants_auto_gemm(
                                           *gemm_user, static_cast<bool>(bench_gemm_command)));
    if (validate_command) return mpitron::app::run_validate(validate, world);
    if (bench_comm_command) return mpitron::app::run_bench_comm(bench_comm, world);
    if (bench_gemm_command) return mpitron::app::run_bench_gemm(bench_gemm, world);
    if (bench_gpt_command) return mpitron::app::run_bench_gpt(bench_gpt, world);
    if (bench_command) return mpitron::app::run_bench(bench, world);
    if (train_command) return mpitron::app::run_train(train, world);
    if (eval_command) return mpitron::app::run_eval(eval, world);
    if (generate_command) return mpitron::app::run_generate(generate, world);
    if (export_command) return mpitron::app::run_export(export_options, world);
    if (train_dp_command) return mpitron::app::run_train_dp(train_dp, world);
    if (attention_command) return mpitron::app::run_attention(attention, world);
    if (tokenize_command) return mpitron::app::run_tokenize(tokenize, world);
    return 1;
  });
}
