#include "nn/train/gpt_start.h"

#include "kernels/allocator.h"
#include "nn/models/gpt_pretrained.h"

namespace mpitron::nn {

std::unique_ptr<GptTrainer> start_gpt_trainer(const GptConfig& config, GptStart start,
                                              const comm::ParallelTopology& topology,
                                              const GptTrainOptions& options) {
  const MasterInit init =
      start.checkpoint   ? checkpoint_init(*start.checkpoint, options.dtype, options.device)
      : start.pretrained ? pretrained_init(*start.pretrained, options.dtype, options.device)
                         : gpt2_init(start.seed, config.layers, options.dtype, options.device);
  auto trainer = std::make_unique<GptTrainer>(config, init, topology, options);
  if (start.checkpoint && options.optimizer == OptimizerKind::adamw) {
    restore_optimizer(*trainer, *start.checkpoint, topology);
  }
  start = {};
  kernels::release_cached_blocks();  // the master weights' blocks: the steps never reuse them
  return trainer;
}

}  // namespace mpitron::nn
