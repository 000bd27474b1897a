// Starting a GPT training run's trainer from where its weights come from: a checkpoint it
// resumes (parameters and AdamW moments), another tool's GPT-2 weights, or a seeded
// initialisation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "comm/topology.h"
#include "nn/checkpoint/gpt2_weights.h"
#include "nn/train/gpt_checkpoint.h"
#include "nn/train/gpt_trainer.h"

namespace mpitron::nn {

/// Where a run's weights come from: the checkpoint it resumes when set, else the pretrained
/// weights when set, else gpt2_init(seed).
struct GptStart {
  std::optional<GptCheckpoint> checkpoint;  ///< full tensors, with AdamW's moments for AdamW
  std::optional<Gpt2Weights> pretrained;
  std::uint64_t seed = 0;
};

/// Builds this rank's trainer of `config` over `topology` with `options` from `start`: the
/// checkpoint's parameters and, under AdamW, its moments and step count (restore_optimizer);
/// else the pretrained weights; else gpt2_init(seed). `start`'s full tensors and the caching
/// allocator's free blocks of the master weights are released once the stage holds its slices.
/// Collective over the world. Throws what GptTrainer's constructor and restore_optimizer throw.
std::unique_ptr<GptTrainer> start_gpt_trainer(const GptConfig& config, GptStart start,
                                              const comm::ParallelTopology& topology,
                                              const GptTrainOptions& options);

}  // namespace mpitron::nn
