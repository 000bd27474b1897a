// The `mpitron` executable: one subcommand per job. Ranks come from the MPI launcher (mpirun,
// srun, mpiexec); run `mpitron --help` for the subcommands.
#include <CLI/CLI.hpp>

#include "app/attention.h"
#include "app/bench_comm.h"
#include "app/bench_step.h"
#include "app/train_dp.h"
#include "app/validate.h"
#include "comm/configuration.h"
#include "comm/environment.h"
#include "comm/errors.h"
#include "comm/guard.h"
#include "comm/launch.h"

int main(int argc, char** argv) {
  CLI::App app{
      "mpitron: tensor-, pipeline- and data-parallel training checked against dense models"};
  app.set_version_flag("--version", MPITRON_VERSION);
  app.require_subcommand(1);
  mpitron::app::ValidateOptions validate;
  CLI::App& validate_command = mpitron::app::add_validate_command(app, validate);
  mpitron::app::BenchOptions bench;
  CLI::App& bench_command = mpitron::app::add_bench_command(app, bench);
  mpitron::app::BenchCommOptions bench_comm;
  CLI::App& bench_comm_command = mpitron::app::add_bench_comm_command(bench_command, bench_comm);
  mpitron::app::TrainDpOptions train_dp;
  CLI::App& train_dp_command = mpitron::app::add_train_dp_command(app, train_dp);
  mpitron::app::AttentionOptions attention;
  CLI::App& attention_command = mpitron::app::add_attention_command(app, attention);

  mpitron::comm::Environment environment(argc, argv);
  mpitron::comm::Communicator world = environment.world();
  std::string parse_error;
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help or --version: printed once, by rank 0
    return world.rank() == 0 ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    parse_error = e.what();
  }
  return mpitron::comm::run_guarded(world, [&] {
    mpitron::comm::check_launch_consistency(world);
    if (!parse_error.empty()) {
      // Agreed like any bad option, so arguments that fail on only some ranks (different
      // arguments per rank) end every rank with one line instead of leaving the others waiting.
      mpitron::comm::agree_on_configuration(world, [&]() -> std::string {
        throw mpitron::comm::ConfigError(parse_error + " (see --help)");
      });
    }
    if (validate_command) return mpitron::app::run_validate(validate, world);
    if (bench_comm_command) return mpitron::app::run_bench_comm(bench_comm, world);
    if (bench_command) return mpitron::app::run_bench(bench, world);
    if (train_dp_command) return mpitron::app::run_train_dp(train_dp, world);
    if (attention_command) return mpitron::app::run_attention(attention, world);
    return 1;
  });
}
