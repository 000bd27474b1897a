#include "app/model/checkpoint_loading.h"

#include <fmt/format.h>

#include "comm/configuration.h"
#include "comm/errors.h"

namespace mpitron::app {

LoadedRun load_checkpoint_agreed(
    const std::string& what, const CommonOptions& common, const std::string& load,
    comm::Communicator& world,
    const std::function<std::string(const nn::GptCheckpoint&, const ParallelSizes&)>&
        extra_checks) {
  LoadedRun run;
  comm::agree_on_configuration(world, [&] {
    run.sizes = resolve_parallel_sizes(common, world.size());
    run.device = resolve_device(common.device);
    if (load.empty()) throw comm::ConfigError("--load DIR is required");
    try {
      run.checkpoint = nn::load_gpt_checkpoint(load, /*with_moments=*/false);
    } catch (const std::exception& e) {
      throw comm::ConfigError(e.what());
    }
    run.config = run.checkpoint.config;
    run.config.padded_vocab = nn::padded_vocab_size(run.config.vocab, run.sizes.tp);
    if (const auto error = nn::gpt_size_error(run.config, run.sizes.tp, run.sizes.pp)) {
      throw comm::ConfigError(*error);
    }
    const std::string settings = extra_checks(run.checkpoint, run.sizes);
    run.log = prepare_run(common, world);
    if (world.rank() == 0) {
      for (const std::string& why : run.checkpoint.skipped)
        run.log->warn("warning: --load {}: skipped a newer step that does not load: {}", load, why);
    }
    return fmt::format("mpitron {} {} tp={} pp={} dp={} load={} step={} {}", MPITRON_VERSION, what,
                       run.sizes.tp, run.sizes.pp, run.sizes.dp, load, run.checkpoint.step,
                       settings);
  });
  return run;
}

}  // namespace mpitron::app
