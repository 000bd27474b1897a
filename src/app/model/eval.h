// `mpitron eval`: the mean cross-entropy of a trained checkpoint over a text file.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "app/options.h"

namespace mpitron::app {

struct EvalOptions {
  CommonOptions common;
  std::string load;                 ///< checkpoint folder (its newest complete step)
  std::string data;                 ///< any file, read as bytes
  std::optional<std::int64_t> seq;  ///< window length; not given: the checkpoint's block size
};

/// Adds the `eval` subcommand and its flags to `app`.
CLI::App& add_eval_command(CLI::App& app, EvalOptions& options);

/// Prints (rank 0) the mean cross-entropy in nats per byte and bits per byte over the
/// non-overlapping windows of --data: inputs bytes[i seq, (i+1) seq), targets shifted by one,
/// every window whose targets fit in the file (torch_peer_gpt.py --eval computes the same), on
/// any topology; --json writes {"loss", "bits_per_byte", "windows", ...}. Throws
/// comm::ConfigError (agreed) for a missing/damaged checkpoint, unreadable data, a file shorter
/// than one window, or --seq outside [1, block size] (the checkpoint's position table).
int run_eval(const EvalOptions& options, comm::Communicator world);

}  // namespace mpitron::app
