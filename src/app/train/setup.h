// Setting up a `mpitron train` run: its flags, their checks, and everything the ranks agree on
// before the first step (sizes, topology, device, optimizer settings, data, the checkpoint to
// resume from).
#pragma once

#include <spdlog/spdlog.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/common/options.h"
#include "app/common/progress.h"
#include "app/train/settings.h"
#include "comm/communicator.h"
#include "nn/checkpoint/folder_lock.h"
#include "nn/checkpoint/gpt2_weights.h"
#include "nn/data/token_corpus.h"
#include "nn/optim/lr_schedule.h"
#include "nn/train/gpt_checkpoint.h"
#include "nn/train/gpt_trainer.h"

namespace mpitron::app {

/// What every rank of a training run knows before its first step.
struct TrainRun {
  ParallelSizes sizes;
  kernels::Device device{};
  nn::GptConfig config;
  nn::GptTrainOptions train;
  nn::LrSchedule lr_schedule;
  nn::DataOrder data_order = nn::DataOrder::random;
  std::optional<nn::TokenCorpus> corpus;
  std::optional<nn::GptCheckpoint> checkpoint;  ///< the --load step, until it is applied
  std::optional<nn::Gpt2Weights> pretrained;    ///< --init-from's weights, until applied
  std::uint64_t seed = 0;                       ///< --seed, or the checkpoint's
  ProgressMode progress = ProgressMode::off;    ///< `auto` already resolved
  std::shared_ptr<spdlog::logger> log;
  std::string description;  ///< the run's settings as a JSON object (the metrics' config line)
  std::string run_id;       ///< this run's id, recorded in every step it saves (world rank 0)
  std::unique_ptr<nn::FolderLock> save_lock;  ///< --save's folder, held by world rank 0
};

/// The run's settings a checkpoint records beside the model in meta.json (and a resumed run
/// compares with its own): seed, dtype, optimizer, adamw {beta1, beta2, eps}, lr_schedule {lr,
/// min_lr, warmup_steps, total_steps, style}, sampler {global_batch}, data (the corpus's source),
/// mpitron_version, run_id (this run's; empty but on world rank 0, which writes meta.json) and, on
/// the CPU, cpu_gemm (the GEMM provider that runs the dtype's products, eigen for mpitron's in
/// float64: a resume with another warns, its bits differ). The
/// positions of a saved step (lr_schedule.next_step, sampler.next_step) are added by the saver.
nlohmann::json run_settings(const TrainOptions& options, const TrainRun& run);

/// Checks `options` against the world and loads the data, the --init-from weights (whose file
/// gives the model sizes: load_init_from; dropped when --load resumes) and the --load
/// checkpoint, agreed over all ranks: throws comm::ConfigError on every rank alike for sizes
/// that do not divide, non-finite or non-positive rates or clip, unknown names, unreadable,
/// empty or too short data, an --init-from file that is damaged or disagrees with a size flag,
/// or a checkpoint that is missing, damaged or of other model sizes.
TrainRun configure_train(const TrainOptions& options, comm::Communicator& world);

}  // namespace mpitron::app
