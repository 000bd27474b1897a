// Loading a model for `eval`, `generate` and `export`: a training checkpoint (--load) or another
// tool's weights (--init-from), inside the start-up agreement so that a missing or damaged file
// ends every rank with one line.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <spdlog/logger.h>

#include "app/common/options.h"
#include "nn/checkpoint/gpt2_weights.h"
#include "nn/train/gpt_checkpoint.h"

namespace mpitron::app {

/// Where a model-reading subcommand's weights come from: exactly one of `load` and `init_from`.
struct ModelSource {
  std::string load;        ///< --load: a checkpoint folder (its newest complete step)
  std::string init_from;   ///< --init-from: a file or folder load_init_from reads
  std::int64_t heads = 0;  ///< --heads: a safetensors GPT-2 file's head count; 0: not given
  std::string gelu;        ///< --gelu: a GPT-2 file's MLP activation (erf or tanh); empty: tanh
};

/// Registers --load, --init-from, --heads and --gelu on `command` (`eval` and `generate`); which of
/// them is given is checked by load_model_agreed.
void add_model_source_options(CLI::App& command, ModelSource& source);

/// What a model-reading subcommand has after its start-up agreement.
struct LoadedRun {
  ParallelSizes sizes;
  kernels::Device device{};
  nn::GptCheckpoint checkpoint;  ///< --load's step (parameters only); empty with --init-from
  std::optional<nn::Gpt2Weights> pretrained;  ///< --init-from's weights
  nn::GptConfig config;  ///< the model, its vocabulary padded for this run's tp
  /// What log lines name the weights by: "<load> step <step>", or the --init-from path.
  std::string label;
  std::shared_ptr<spdlog::logger> log;
};

/// A MasterInit of `run`'s weights (nn::checkpoint_init or nn::pretrained_init), in `dtype` on
/// run.device; `run` must outlive it.
nn::MasterInit model_init(const LoadedRun& run, kernels::DType dtype);

/// The start-up agreement of a subcommand that reads a model: resolves the topology and device;
/// reads the newest step of checkpoint folder `source.load` (its parameters, not its optimizer
/// state) or the weights of `source.init_from` (load_init_from: the sizes from the file,
/// `source.heads` the head count of a safetensors GPT-2 file), checks the model sizes against
/// (tp, pp) and runs `extra_checks` (this rank's own option checks, given the model's config and
/// the sizes; they throw comm::ConfigError, and return the subcommand's own settings
/// as text, which every rank must share: a launch that gives ranks different --seq or --prompt
/// is then refused at start-up, not at the first mismatched transfer). `what` names the
/// subcommand in the agreed description. Throws comm::ConfigError (on every rank) when anything
/// fails: neither of --load and --init-from ("give --load DIR or --init-from FILE_OR_FOLDER") or
/// both ("..., not both"), --heads with --load, a missing or damaged checkpoint or file.
LoadedRun load_model_agreed(
    const std::string& what, const CommonOptions& common, const ModelSource& source,
    comm::Communicator& world,
    const std::function<std::string(const nn::GptConfig&, const ParallelSizes&)>& extra_checks);

/// Warns in `run`'s log (one line, on `world`'s rank 0 only) when --load's checkpoint was trained
/// with --bf16 (its meta.json's "bf16") and the subcommand `what` runs without `bf16` (its --bf16):
/// it then computes the checkpoint's float32 masters in float32, not what the run computed.
void warn_if_trained_with_bf16(const LoadedRun& run, bool bf16, const std::string& what,
                               const comm::Communicator& world);

}  // namespace mpitron::app
