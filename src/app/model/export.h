// `mpitron export`: one dense safetensors file with the nanoGPT / GPT-2 names, for PyTorch.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "app/options.h"

namespace mpitron::app {

struct ExportOptions {
  CommonOptions common;
  std::string load;
  std::string out;
};

/// Adds the `export` subcommand and its flags to `app`.
CLI::App& add_export_command(CLI::App& app, ExportOptions& options);

/// World rank 0 rebuilds the full parameters of the newest step of --load (any saved topology)
/// and writes them to --out under the state-dict names of tools/torch_peer_gpt.py
/// (c_attn with q, k, v stacked; float32), atomically. Throws comm::ConfigError (agreed) for a
/// missing or damaged checkpoint; std::runtime_error when --out cannot be written.
int run_export(const ExportOptions& options, comm::Communicator world);

}  // namespace mpitron::app
