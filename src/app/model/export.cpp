#include "app/model/export.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "app/help.h"
#include "app/model/checkpoint_loading.h"
#include "comm/errors.h"
#include "nn/checkpoint/safetensors.h"
#include "nn/models/gpt_names.h"
#include "nn/wording.h"

namespace mpitron::app {

CLI::App& add_export_command(CLI::App& app, ExportOptions& o) {
  CLI::App& c = *app.add_subcommand(
      "export", "Write a checkpoint as one dense safetensors file with GPT-2 / nanoGPT names");
  add_common_options(c, o.common);
  c.add_option("--load", o.load, "Checkpoint folder (its newest complete step)")->required();
  c.add_option("--out", o.out, "The .safetensors file to write")->required();
  add_example(c, "mpitron export --load ckpt --out model.safetensors");
  return c;
}

int run_export(const ExportOptions& o, comm::Communicator world) {
  // The output must be a file in an existing, writable folder: found before any loading.
  const auto check_out = [&o](const nn::GptCheckpoint&, const ParallelSizes&) {
    const std::filesystem::path out(o.out);
    const std::filesystem::path folder = out.parent_path().empty() ? "." : out.parent_path();
    if (std::filesystem::is_directory(out)) {
      throw comm::ConfigError(fmt::format("--out {}: is a folder", o.out));
    }
    if (!std::filesystem::is_directory(folder) || access(folder.c_str(), W_OK) != 0) {
      throw comm::ConfigError(fmt::format(
          "--out {}: the folder {} does not exist or is not writable", o.out, folder.string()));
    }
    return "out=" + o.out;
  };
  const LoadedRun run = load_checkpoint_agreed("export", o.common, o.load, world, check_out);
  if (world.rank() == 0) {
    nn::write_safetensors(o.out, nn::gpt_export_tensors(run.checkpoint.full),
                          {{"format", "pt"}, {"source", o.load}});
    run.log->info("export: wrote {} ({}, hidden {}, step {})", o.out,
                  nn::counted(run.checkpoint.config.layers, "layer"), run.checkpoint.config.hidden,
                  run.checkpoint.step);
    if (!o.common.json.empty()) {
      write_json(o.common.json, {{"out", o.out},
                                 {"load", o.load},
                                 {"step", run.checkpoint.step},
                                 {"config", nn::to_json(run.checkpoint.config)}});
    }
  }
  return 0;
}

}  // namespace mpitron::app
