// The training step of a GPT over 4-D parallelism: micro-batches through the pipeline schedule
// (gradients accumulating, each micro-batch loss weighted 1/micro-batches), finalize_gradients
// (embedding group, the average over the data-and-context group), global-norm clipping, the
// optimizer update. A micro-batch's loss is the sum of its token losses over the count of its
// targets that are not kernels::kIgnoreTarget (a micro-batch with none counts 0). Under context
// parallelism (cp > 1) each rank cuts its zigzag shard out of the whole sequences it is given
// and divides its shard's sum by that whole count / cp: cp times its share of the mean, so
// averaging the gradients over the dp x cp ranks gives the gradient of the global batch's mean
// loss, and a shard whose targets are all ignored adds 0 (never NaN). A float32 step under
// bfloat16 GEMM operands (kernels::GemmOperands::bfloat16, train --bf16) sends bfloat16 between
// the pipeline stages (PipelineSpec::bf16_wire). `mpitron train`, `validate` and the tests all
// run this one step.
#pragma once

#include <memory>
#include <vector>

#include "autograd/weight_operands.h"
#include "comm/topology.h"
#include "nn/data/token_corpus.h"
#include "nn/models/gpt.h"
#include "nn/optim/adamw.h"
#include "nn/parallel/data_parallel.h"
#include "nn/parallel/schedule.h"

namespace mpitron::nn {

enum class OptimizerKind { adamw, sgd };

struct GptTrainOptions {
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int virtual_stages = 1;  ///< model chunks per pipeline stage (interleaved 1F1B with >= 2)
  OptimizerKind optimizer = OptimizerKind::adamw;
  double lr = 1e-3;  ///< the optimizer's initial rate; each step passes its own
  AdamWOptions adamw;
  double grad_clip = 1.0;  ///< global-norm clipping threshold; <= 0 disables clipping
  bool recompute = false;  ///< recompute each block's activations in backward (GptStage)
  /// ZeRO stage 1 (Megatron-LM's --use-distributed-optimizer): each DP replica reduce-scatters
  /// the gradients, keeps AdamW's moments for and updates only its shard of the parameters,
  /// and all-gathers the parameters after the update (GradientSharding). The same numbers as
  /// without it, up to the order of the sums; no effect at dp 1.
  bool distributed_optimizer = false;
  /// split the activations between TP regions along the sequence over TP (GptStage; seq must be
  /// divisible by tp)
  bool sequence_parallel = false;
  /// how the context-parallel ranks exchange keys and values (GptStage; used when the
  /// topology's cp > 1)
  CpComm cp_comm = CpComm::ring;
  /// false: the ring waits for each key/value transfer before computing (the overlap's
  /// measurement, bench gpt --no-cp-prefetch)
  bool cp_prefetch = true;
  /// reduce the DP gradients in bfloat16 (Megatron-LM's --grad-reduce-in-bf16; float32
  /// gradients only): comm::Wire::bf16 in DataParallelGradients
  bool grad_reduce_in_bf16 = false;
  /// train --bf16's parameters: the optimizer keeps float32 masters and after each step rounds
  /// them to bfloat16 into the parameters (Optimizer::keep_float32_masters), which the
  /// distributed optimizer then all-gathers as bfloat16 (comm::Wire::bf16). float32 only.
  bool bf16 = false;
  DType dtype = DType::f32;
  Device device = Device::cpu;
};

/// Where one step's wall time went on this rank, in seconds (steady clock); the phases run one
/// after another and add up to the step. Megatron-LM's timers report the same split.
struct StepPhases {
  /// the micro-batches through the pipeline schedule: forward, backward, the stage-to-stage
  /// transfers and the data-parallel reductions the backward overlaps
  double forward_backward = 0.0;
  /// finalize_gradients: the wait for the last data-parallel reductions, the tensor-parallel
  /// sums of replicated parameters' gradients, the tied embedding's sum; and the loss's sum
  double gradient_reduction = 0.0;
  double gradient_norm = 0.0;  ///< the global norm: sums of squares and their all-reduce
  double optimizer = 0.0;      ///< clipping and the optimizer's update
  /// the distributed optimizer's parameter all-gather (0 without it)
  double parameter_all_gather = 0.0;
};

/// What one step reports; loss and grad_norm are the same on every rank.
struct StepResult {
  double loss = 0.0;       ///< mean cross-entropy over the global batch (nats per token)
  double grad_norm = 0.0;  ///< global gradient norm before clipping
  StepPhases phases;       ///< this rank's time per phase
};

/// This rank's part of a GPT training run.
class GptTrainer {
 public:
  /// Builds this rank's stage from `init` and the optimizer over its parameters. Throws
  /// std::invalid_argument for sizes that do not fit the topology or bad optimizer settings.
  GptTrainer(const GptConfig& config, const MasterInit& init,
             const comm::ParallelTopology& topology, const GptTrainOptions& options);

  /// Forward and backward of this replica's micro-batches (each with inputs and targets
  /// [micro_batch, seq], in order; every stage of a replica passes the same ones) by the
  /// pipeline schedule, then finalize_gradients and the global norm: the parameters' gradients
  /// are those of the global batch's mean loss (cleared first). Every rank of a replica, the cp
  /// ranks included, passes the whole sequences; under context parallelism each keeps its zigzag
  /// shard. Throws std::invalid_argument when the micro-batches differ in shape, or (one line)
  /// when seq does not split into 2 cp zigzag chunks. Collective over the whole world.
  StepResult forward_backward(const std::vector<TokenBatch>& micro_batches);

  /// forward_backward, clipping to the global norm, then the optimizer update at learning rate
  /// `lr` (and, with the distributed optimizer, the all-gather of the parameters). The (clipped)
  /// gradients stay readable until the next step; with the distributed optimizer only the
  /// elements this rank owns (gradients().owned()) hold the global batch's gradient.
  StepResult step(const std::vector<TokenBatch>& micro_batches, double lr);

  /// Mean cross-entropy over every replica's `windows` (each inputs and targets [1, seq]; the
  /// count may differ between replicas and be 0), without gradients: one window per
  /// micro-batch through the pipeline, then summed over DP; under context parallelism each cp
  /// rank scores its zigzag shard and the shards' means are averaged, which is the window's
  /// mean. Returns the same value on every rank (NaN when no replica has a window). Collective
  /// over the whole world.
  double evaluate(const std::vector<TokenBatch>& windows);

  GptStage& stage() { return stage_; }
  Optimizer& optimizer() { return *optimizer_; }
  /// The flat gradient buffer: its layout, and under the distributed optimizer what each rank
  /// owns and the all-gather of sharded state (checkpoints gather AdamW's moments with it).
  DataParallelGradients& gradients() { return gradients_; }
  const Parameters& parameters() const { return parameters_; }
  /// The float32 weights the optimizer updates, one per parameter, whole (the parameter's
  /// shape): under `bf16` the masters (the distributed optimizer's shards all-gathered), else
  /// the parameters themselves. What checkpoints save. Collective over DP under `bf16` with the
  /// distributed optimizer at dp > 1.
  std::vector<Tensor> master_weights();

 private:
  // The pipeline's run over this rank's shards of `batches` (training when `train`), returning
  // the sum of the last stage's micro-batch losses on every stage of the replica (0 without
  // micro-batches).
  double run_pipeline(const std::vector<TokenBatch>& batches, bool train);
  // `batches` after checking their shapes agree; under context parallelism this rank's zigzag
  // shards of them.
  std::vector<TokenBatch> shards_of(const std::vector<TokenBatch>& batches) const;

  const comm::ParallelTopology& topology_;
  GptTrainOptions options_;
  GptStage stage_;
  Parameters parameters_;
  DataParallelGradients gradients_;  // before the optimizer: it may move the parameters
  std::unique_ptr<Optimizer> optimizer_;
  // Under --bf16, the weights' bfloat16 copies, allocated once and rounded again each step and
  // evaluation.
  autograd::Bf16WeightCopies weight_copies_;
};

}  // namespace mpitron::nn
