// `mpitron export`: one dense file of a checkpoint's parameters for other tools: safetensors
// with nanoGPT's or Hugging Face's GPT-2 names, or llm.c's model file; a Llama checkpoint as a
// Hugging Face Llama folder.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "app/common/options.h"

namespace mpitron::app {

struct ExportOptions {
  CommonOptions common;
  std::string load;
  std::string out;
  std::string format = "safetensors";  ///< safetensors (nanoGPT names), hf or llmc
  std::string dtype = "float32";       ///< the stored values: float32 or bfloat16
};

/// Adds the `export` subcommand and its flags to `app`.
CLI::App& add_export_command(CLI::App& app, ExportOptions& options);

/// World rank 0 rebuilds the full parameters of the newest step of --load (any saved topology)
/// and writes them to --out, atomically, in --format: safetensors under the state-dict names of
/// tools/torch_peer_gpt.py (c_attn with q, k, v stacked; nn::gpt_export_tensors), hf under
/// Hugging Face's GPT-2 names and Conv1D layout with wte cut to the vocab's rows
/// (nn::gpt_hf_export_tensors), or llmc as llm.c's float32 model file (nn::write_llmc_file,
/// wte with all its rows). A llama checkpoint takes --format hf only and --out names a folder:
/// nn::write_hf_llama's config.json and model.safetensors. --dtype bfloat16 stores every value
/// rounded to nearest even (BF16 safetensors, llm.c's version 5). Throws comm::ConfigError
/// (agreed) for a missing or damaged checkpoint or a llama checkpoint with another format;
/// std::runtime_error when --out cannot be written.
int run_export(const ExportOptions& options, comm::Communicator world);

}  // namespace mpitron::app
