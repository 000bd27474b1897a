#include "app/model/export.h"

#include <fmt/format.h>

#include <filesystem>

#include "app/common/help.h"
#include "app/common/writable_folder.h"
#include "app/model/checkpoint_loading.h"
#include "comm/errors.h"
#include "nn/checkpoint/llmc_file.h"
#include "nn/checkpoint/safetensors.h"
#include "nn/models/gpt_names.h"
#include "nn/models/gpt_pretrained.h"
#include "nn/wording.h"

namespace mpitron::app {

namespace {

/// Writes the checkpoint's parameters to `out` in `format` (ExportOptions::format); returns
/// the format's name for the log line.
const char* write_export(const std::string& format, const std::string& out,
                         const nn::GptCheckpoint& checkpoint, const std::string& load) {
  if (format == "llmc") {
    nn::write_llmc_file(out, nn::gpt2_weights_of(checkpoint.config, checkpoint.full));
    return "llm.c float32";
  }
  if (format == "hf") {
    nn::write_safetensors(out, nn::gpt_hf_export_tensors(checkpoint.full, checkpoint.config.vocab),
                          {{"format", "pt"}, {"source", load}});
    return "Hugging Face GPT-2 names";
  }
  nn::write_safetensors(out, nn::gpt_export_tensors(checkpoint.full),
                        {{"format", "pt"}, {"source", load}});
  return "nanoGPT names";
}

}  // namespace

CLI::App& add_export_command(CLI::App& app, ExportOptions& o) {
  CLI::App& c = *app.add_subcommand(
      "export", "Write a checkpoint as one dense file: GPT-2 safetensors or an llm.c model file");
  add_common_options(c, o.common);
  c.add_option("--load", o.load, "Checkpoint folder (its newest complete step)")->required();
  c.add_option("--out", o.out, "The file to write")->required();
  c.add_option("--format", o.format,
               "safetensors: nanoGPT names; hf: Hugging Face's GPT-2 names and layout; llmc: "
               "llm.c's model file (float32)")
      ->check(CLI::IsMember({"safetensors", "hf", "llmc"}))
      ->capture_default_str();
  add_example(c, "mpitron export --load ckpt --out model.safetensors");
  add_example(c, "mpitron export --load ckpt --format llmc --out gpt2.bin");
  return c;
}

int run_export(const ExportOptions& o, comm::Communicator world) {
  // The output must be a file in an existing, writable folder: found before any loading.
  const auto check_out = [&o](const nn::GptCheckpoint& checkpoint, const ParallelSizes&) {
    if (checkpoint.config.llama()) {
      throw comm::ConfigError(fmt::format(
          "--load {}: holds a llama model; export writes GPT-2's formats only (a Hugging Face "
          "Llama writer is not there yet)",
          o.load));
    }
    const std::filesystem::path out(o.out);
    const std::filesystem::path folder = out.parent_path().empty() ? "." : out.parent_path();
    if (!out.has_filename())
      throw comm::ConfigError(fmt::format("--out '{}': names no file", o.out));
    if (std::filesystem::is_directory(out)) {
      throw comm::ConfigError(fmt::format("--out {}: is a folder", o.out));
    }
    if (const std::string why = folder_write_error(folder); !why.empty()) {
      throw comm::ConfigError(fmt::format("--out {}: cannot write into the folder {}: {}", o.out,
                                          folder.string(), why));
    }
    return "out=" + o.out;
  };
  const LoadedRun run = load_checkpoint_agreed("export", o.common, o.load, world, check_out);
  if (world.rank() == 0) {
    const char* format = write_export(o.format, o.out, run.checkpoint, o.load);
    run.log->info("export: wrote {} ({}, {}, hidden {}, step {})", o.out, format,
                  nn::counted(run.checkpoint.config.layers, "layer"), run.checkpoint.config.hidden,
                  run.checkpoint.step);
    const nn::GptConfig& model = run.checkpoint.config;
    if (model.gelu != nn::GeluForm::tanh) {
      run.log->warn(
          "export: the model uses the {} GELU; GPT-2's files mean tanh, so train --init-from {} "
          "--gelu {} runs this model",
          nn::to_string(model.gelu), o.out, nn::to_string(model.gelu));
    }
    if (o.format == "safetensors" && model.vocab_rows() != model.vocab) {
      run.log->info(
          "export: wte holds the {} rows of the padded vocabulary {}: train --init-from {} "
          "--vocab {} reads it back",
          model.vocab_rows(), model.vocab, o.out, model.vocab);
    }
    if (!o.common.json.empty()) {
      write_json(o.common.json, {{"out", o.out},
                                 {"load", o.load},
                                 {"format", o.format},
                                 {"step", run.checkpoint.step},
                                 {"config", nn::to_json(run.checkpoint.config)}});
    }
  }
  return 0;
}

}  // namespace mpitron::app
