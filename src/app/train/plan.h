// The plan of a `mpitron train` run: everything its ranks know and agree on before the first
// step, built from the flags in one pass (sizes, topology, model, optimizer and schedule, data,
// the weights it starts from, outputs, stop signals and the settings a checkpoint records), so
// that the run then only hands it to nn.
#pragma once

#include <spdlog/spdlog.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/common/options.h"
#include "app/common/progress.h"
#include "app/train/metrics.h"
#include "app/train/settings.h"
#include "app/train/stop.h"
#include "comm/communicator.h"
#include "nn/checkpoint/folder_lock.h"
#include "nn/data/token_corpus.h"
#include "nn/optim/lr_schedule.h"
#include "nn/train/gpt_start.h"
#include "nn/train/gpt_trainer.h"

namespace mpitron::app {

/// What every rank of a training run knows before its first step.
struct TrainPlan {
  std::unique_ptr<StopWatch> stop;  ///< watching since the plan's start (loading takes minutes)
  ParallelSizes sizes;
  kernels::Device device{};
  nn::GptConfig config;
  nn::GptTrainOptions train;
  nn::LrSchedule lr_schedule;
  nn::DataOrder data_order = nn::DataOrder::random;
  std::optional<nn::TokenCorpus> corpus;
  nn::GptStart start;           ///< the --load step, or --init-from's weights, or the seed
  std::int64_t first_step = 1;  ///< the --load step + 1, or 1
  std::string start_line;       ///< "resuming from ..." / "initialised from ...", or empty
  ProgressMode progress = ProgressMode::off;  ///< `auto` already resolved
  std::shared_ptr<spdlog::logger> log;
  nlohmann::json description;  ///< the run's configuration (the metrics' config line, agreed)
  /// The run's settings a checkpoint records beside the model in meta.json (and a resumed run
  /// compares with its own): seed, dtype, optimizer, adamw {beta1, beta2, eps}, lr_schedule
  /// {lr, min_lr, warmup_steps, total_steps, style}, sampler {global_batch}, data (the corpus's
  /// source), mpitron_version, run_id (this run's; empty but on world rank 0, which writes
  /// meta.json) and, on the CPU, cpu_gemm (the GEMM provider that runs the dtype's products,
  /// eigen for mpitron's in float64; under --bf16 the bfloat16 GEMM's path, avx512bf16 or
  /// convert-at-pack fp32: a resume with another warns, its bits differ). The saver
  /// adds the positions of a step (lr_schedule.next_step, sampler.next_step).
  nlohmann::json settings;
  std::unique_ptr<nn::FolderLock> save_lock;  ///< --save's folder, held by world rank 0
  /// The other run's steps that --overwrite-checkpoints removed from --save (world rank 0)
  std::optional<std::string> overwritten;
  std::optional<MetricsFile> metrics;  ///< --metrics, written by world rank 0
};

/// Builds the plan of `options` on every rank of `world` and agrees it once: checks the flags
/// against the world, watches the stop signals, loads the data, the --init-from weights (whose
/// file gives the model sizes: load_init_from; dropped when --load resumes) and the --load
/// checkpoint, claims the outputs (--save's folder lock and leftovers, the --metrics file) and
/// prints the start-up warnings. Throws comm::ConfigError on every rank alike for sizes that do
/// not divide, non-finite or non-positive rates or clip, unknown names, unreadable, empty or
/// too short data, an --init-from file that is damaged or disagrees with a size flag, a
/// checkpoint that is missing, damaged or of other model sizes, or outputs that cannot be
/// written.
TrainPlan plan_train(const TrainOptions& options, comm::Communicator& world);

}  // namespace mpitron::app
