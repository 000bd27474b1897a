#include "app/model/export.h"

#include <fmt/format.h>

#include <filesystem>

#include "app/common/help.h"
#include "app/common/writable_folder.h"
#include "app/model/checkpoint_loading.h"
#include "comm/errors.h"
#include "nn/checkpoint/hf_llama.h"
#include "nn/checkpoint/llmc_file.h"
#include "nn/checkpoint/safetensors.h"
#include "nn/models/gpt_names.h"
#include "nn/models/gpt_pretrained.h"
#include "nn/wording.h"

namespace mpitron::app {

namespace {

/// `tensors` with every float32 tensor rounded to bfloat16 when `bf16`.
std::vector<nn::NamedTensor> stored(std::vector<nn::NamedTensor> tensors, bool bf16) {
  if (!bf16) return tensors;
  for (nn::NamedTensor& t : tensors)
    t.value = nn::rounded_to_bf16(std::get<autograd::Tensor>(t.value));
  return tensors;
}

/// Writes the checkpoint's parameters to `out` in ExportOptions' format and dtype; returns the
/// format's name for the log line.
std::string write_export(const ExportOptions& o, const nn::GptCheckpoint& checkpoint) {
  const bool bf16 = o.dtype == "bfloat16";
  const nn::SafetensorsMetadata metadata = {{"format", "pt"}, {"source", o.load}};
  const std::string suffix = bf16 ? ", bfloat16" : "";
  if (checkpoint.config.llama()) {
    nn::write_hf_llama(o.out, {nn::hf_llama_config_of(checkpoint.config), checkpoint.full},
                       bf16 ? nn::StoredDType::bf16 : nn::StoredDType::f32, {{"source", o.load}});
    return fmt::format("Hugging Face Llama folder, {}", o.dtype);
  }
  if (o.format == "llmc") {
    nn::write_llmc_file(o.out, nn::gpt2_weights_of(checkpoint.config, checkpoint.full),
                        bf16 ? nn::LlmcPrecision::bfloat16 : nn::LlmcPrecision::float32);
    return fmt::format("llm.c {}", o.dtype);
  }
  if (o.format == "hf") {
    nn::write_safetensors(
        o.out, stored(nn::gpt_hf_export_tensors(checkpoint.full, checkpoint.config.vocab), bf16),
        metadata);
    return "Hugging Face GPT-2 names" + suffix;
  }
  nn::write_safetensors(o.out, stored(nn::gpt_export_tensors(checkpoint.full), bf16), metadata);
  return "nanoGPT names" + suffix;
}

}  // namespace

CLI::App& add_export_command(CLI::App& app, ExportOptions& o) {
  CLI::App& c = *app.add_subcommand(
      "export", "Write a checkpoint for other tools: GPT-2 files or a Hugging Face Llama folder");
  add_common_options(c, o.common);
  c.add_option("--load", o.load, "Checkpoint folder (its newest complete step)")->required();
  c.add_option("--out", o.out, "The file to write (llama: the folder)")->required();
  c.add_option(
       "--format", o.format,
       "safetensors: nanoGPT names; hf: Hugging Face's GPT-2 names and layout, or a llama "
       "checkpoint's Hugging Face Llama folder; llmc: llm.c's model file (version 3, or 5 with "
       "--dtype bfloat16)")
      ->check(CLI::IsMember({"safetensors", "hf", "llmc"}))
      ->capture_default_str();
  c.add_option("--dtype", o.dtype, "Stored values: float32, or bfloat16 (rounded to nearest even)")
      ->check(CLI::IsMember({"float32", "bfloat16"}))
      ->capture_default_str();
  add_example(c, "mpitron export --load ckpt --out model.safetensors");
  add_example(c, "mpitron export --load ckpt --format llmc --out gpt2.bin");
  add_example(c, "mpitron export --load llama_ckpt --format hf --dtype bfloat16 --out llama/");
  return c;
}

int run_export(const ExportOptions& o, comm::Communicator world) {
  // The output must be a file in an existing, writable folder: found before any loading.
  const auto check_out = [&o](const nn::GptConfig& config, const ParallelSizes&) {
    const bool llama = config.llama();
    if (llama && o.format != "hf") {
      throw comm::ConfigError(fmt::format(
          "--load {}: holds a llama model, which exports as a Hugging Face Llama folder only "
          "(--format hf), not --format {}",
          o.load, o.format));
    }
    // A llama export is a folder: --out itself, made when missing; its parent must be writable.
    const std::filesystem::path out = std::filesystem::path(o.out).lexically_normal();
    const std::filesystem::path target = llama && !out.has_filename() ? out.parent_path() : out;
    const std::filesystem::path folder = target.parent_path().empty() ? "." : target.parent_path();
    if (!target.has_filename())
      throw comm::ConfigError(fmt::format("--out '{}': names no file", o.out));
    if (!llama && std::filesystem::is_directory(out)) {
      throw comm::ConfigError(fmt::format("--out {}: is a folder", o.out));
    }
    if (llama && std::filesystem::exists(out) && !std::filesystem::is_directory(out)) {
      throw comm::ConfigError(fmt::format("--out {}: is a file, not a folder", o.out));
    }
    if (const std::string why = nn::hf_llama_write_refusal(out); llama && !why.empty()) {
      throw comm::ConfigError(fmt::format("--out {}: {}", o.out, why));
    }
    if (const std::string why = folder_write_error(folder); !why.empty()) {
      throw comm::ConfigError(fmt::format("--out {}: cannot write into the folder {}: {}", o.out,
                                          folder.string(), why));
    }
    return "out=" + o.out;
  };
  ModelSource source;
  source.load = o.load;
  const LoadedRun run = load_model_agreed("export", o.common, source, world, check_out);
  if (world.rank() == 0) {
    const std::string format = write_export(o, run.checkpoint);
    run.log->info("export: wrote {} ({}, {}, hidden {}, step {})", o.out, format,
                  nn::counted(run.checkpoint.config.layers, "layer"), run.checkpoint.config.hidden,
                  run.checkpoint.step);
    const nn::GptConfig& model = run.checkpoint.config;
    if (!model.llama() && model.gelu != nn::GeluForm::tanh) {
      run.log->warn(
          "export: the model uses the {} GELU; GPT-2's files mean tanh, so --init-from {} "
          "--gelu {} (train, eval, generate) runs this model",
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
                                 {"dtype", o.dtype},
                                 {"step", run.checkpoint.step},
                                 {"config", nn::to_json(run.checkpoint.config)}});
    }
  }
  return 0;
}

}  // namespace mpitron::app
