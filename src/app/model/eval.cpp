#include "app/model/eval.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/help.h"
#include "app/model/checkpoint_loading.h"
#include "comm/errors.h"
#include "comm/topology.h"
#include "nn/train/gpt_trainer.h"
#include "nn/wording.h"

namespace mpitron::app {

CLI::App& add_eval_command(CLI::App& app, EvalOptions& o) {
  CLI::App& c = *app.add_subcommand(
      "eval", "Mean cross-entropy (nats and bits per byte) of a checkpoint over a text file");
  add_common_options(c, o.common);
  c.add_option("--load", o.load, "Checkpoint folder (its newest complete step)")->required();
  c.add_option("--data", o.data, "Text to evaluate, any file read as bytes")->required();
  c.add_option("--seq", o.seq, "Window length (default: the checkpoint's block size)");
  add_example(
      c, "mpirun -np 2 mpitron eval --tp 2 --load ckpt --data /usr/share/common-licenses/GPL-3");
  return c;
}

int run_eval(const EvalOptions& o, comm::Communicator world) {
  std::optional<nn::ByteCorpus> corpus;
  std::int64_t seq = 0;
  LoadedRun run = load_checkpoint_agreed(
      "eval", o.common, o.load, world, [&](const nn::GptCheckpoint& ckpt, const ParallelSizes&) {
        seq = o.seq.value_or(ckpt.config.block_size);
        if (seq < 1 || seq > ckpt.config.block_size) {
          throw comm::ConfigError(
              fmt::format("--seq must be in [1, {}] (the checkpoint's block size), got {}",
                          ckpt.config.block_size, seq));
        }
        try {
          corpus = nn::ByteCorpus::from_file(o.data);
        } catch (const std::exception& e) {
          throw comm::ConfigError(e.what());
        }
        if (static_cast<std::int64_t>(corpus->bytes().size()) < seq + 1) {
          throw comm::ConfigError(fmt::format(
              "{}: {}, shorter than one window of seq + 1 = {}", o.data,
              nn::counted(static_cast<std::int64_t>(corpus->bytes().size()), "byte"), seq + 1));
        }
        return fmt::format("seq={} data_bytes={} data_fnv={:016x}", seq, corpus->bytes().size(),
                           corpus->fingerprint());
      });
  const comm::ParallelTopology topology(world, run.sizes.tp, run.sizes.pp, run.sizes.dp);
  nn::GptTrainOptions options;
  options.device = run.device;
  nn::GptTrainer model(run.config, nn::checkpoint_init(run.checkpoint, options.dtype, run.device),
                       topology, options);
  std::vector<nn::TokenBatch> windows;
  const auto length = static_cast<std::int64_t>(corpus->bytes().size());
  for (const std::int64_t start :
       nn::evaluation_starts(length, seq, 0, run.sizes.dp, topology.dp_rank())) {
    windows.push_back(nn::make_token_batch(corpus->bytes(), {start}, seq, run.device));
  }
  const double loss = model.evaluate(windows);
  const std::int64_t count = (length - 1) / seq;
  run.log->info(
      "eval: {} step {} on {} ({} of {}): loss {:.6f} nats per byte, {:.6f} bits per byte", o.load,
      run.checkpoint.step, o.data, nn::counted(count, "window"), nn::counted(seq, "byte"), loss,
      loss / std::log(2.0));
  if (!o.common.json.empty() && world.rank() == 0) {
    write_json(o.common.json, {{"loss", loss},
                               {"bits_per_byte", loss / std::log(2.0)},
                               {"windows", count},
                               {"seq", seq},
                               {"step", run.checkpoint.step},
                               {"data", o.data}});
  }
  return 0;
}

}  // namespace mpitron::app
