// Loading a training checkpoint for `eval`, `generate` and `export`, inside the start-up
// agreement so that a missing or damaged checkpoint ends every rank with one line.
#pragma once

#include <memory>
#include <string>

#include <spdlog/logger.h>

#include "app/common/options.h"
#include "nn/train/gpt_checkpoint.h"

namespace mpitron::app {

/// What a checkpoint-reading subcommand has after its start-up agreement.
struct LoadedRun {
  ParallelSizes sizes;
  kernels::Device device{};
  nn::GptCheckpoint checkpoint;
  nn::GptConfig config;  ///< the checkpoint's model, its vocabulary padded for this run's tp
  std::shared_ptr<spdlog::logger> log;
};

/// The start-up agreement of a subcommand that reads the newest step of checkpoint folder
/// `load`: resolves the topology and device, loads the checkpoint's parameters (not its
/// optimizer state), checks the model sizes against (tp, pp) and runs `extra_checks` (this
/// rank's own option checks, given the checkpoint and the sizes; they throw comm::ConfigError,
/// and return the subcommand's own settings as text, which every rank must share: a launch that
/// gives ranks different --seq or --prompt is then refused at start-up, not at the first
/// mismatched transfer). `what` names the subcommand in the agreed description. Throws
/// comm::ConfigError (on every rank) when anything fails.
LoadedRun load_checkpoint_agreed(
    const std::string& what, const CommonOptions& common, const std::string& load,
    comm::Communicator& world,
    const std::function<std::string(const nn::GptCheckpoint&, const ParallelSizes&)>& extra_checks);

}  // namespace mpitron::app
