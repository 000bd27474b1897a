// Pipeline parallelism: the layers of a model are split into stages over the PP communicator;
// activations [micro_batch, ...] flow forward from stage p to p + 1 and their gradients (same
// shape) flow back. One executor runs any schedule table (schedule.h): before an action computes
// it starts the receive of the next action that receives (comm::irecv; at most one receive in
// flight, so at most one activation-sized buffer more than the schedule keeps), it waits for a
// receive (through the deadline routine) only at the action that needs the data, starts sends
// without waiting for the neighbour (comm::isend), and drops a micro-batch's activations as soon
// as its backward ran, so 1F1B keeps at most pp - stage micro-batches alive (Narayanan et al.
// 2021, arXiv:2104.04473). With virtual stages a stage runs each of its model chunks as the
// table says, and the last stage's last chunk sends to stage 0's next chunk (schedule.h). Transfer
// tags are 2 * (upstream chunk * micro_batches + micro-batch) + (0 activation, 1 gradient), modulo
// comm::kMaxTransferTag + 1.
#pragma once

#include <functional>
#include <vector>

#include "autograd/tensor.h"
#include "comm/topology.h"
#include "nn/parallel/schedule.h"

namespace mpitron::nn {

using autograd::Shape;
using autograd::Tensor;

/// What one pipeline stage computes.
struct PipelineStage {
  /// Forward of micro-batch `micro_batch` (in [0, micro_batches)) through this stage's model
  /// chunk `chunk` (in [0, virtual_stages); always 0 without interleaving). `input` is the
  /// activation [activation_shape] received from the virtual stage before (in a training step
  /// the executor has already called set_requires_grad on it), or an undefined Tensor on the
  /// first virtual stage (chunk 0 of stage 0), which reads its own data. Returns the activation
  /// [activation_shape] to send to the next virtual stage or, on the last one (chunk
  /// virtual_stages - 1 of the last stage), the micro-batch's scalar loss, already weighted by the
  /// caller (e.g. by 1/micro_batches); the executor calls backward() on it.
  std::function<Tensor(int micro_batch, int chunk, const Tensor& input)> forward;
};

/// What the stages exchange and in which order.
struct PipelineSpec {
  Shape activation_shape;  ///< one micro-batch's activation, e.g. [micro_batch, seq, hidden]
  int micro_batches = 1;   ///< micro-batches per step, >= 1 (may be fewer than the stages)
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  autograd::DType dtype = autograd::DType::f32;
  autograd::Device device = autograd::Device::cpu;
  int virtual_stages = 1;  ///< model chunks per stage (interleaved 1F1B with >= 2)
  /// float32 activations and gradients travel between stages as bfloat16: rounded to nearest,
  /// ties to even at the send (kernels::convert), widened exactly at the receive, so the stages
  /// compute on autograd::round_through_bf16 of what was sent; half the bytes (train --bf16,
  /// Megatron-LM's bfloat16 pipeline transfers). Only with dtype f32 (else the executor throws
  /// std::invalid_argument before any transfer).
  bool bf16_wire = false;
};

/// One training step's forward and backward of every micro-batch through every model chunk of
/// this rank's stage (topology.pp_rank()) in the order of pipeline_schedule(spec.schedule, pp,
/// stage, micro_batches, virtual_stages). Parameter gradients accumulate in the stage's
/// parameters (the caller reduces them over DP afterwards). A virtual stage whose input received
/// no gradient sends zeros upstream. Every send has completed when this returns. Returns, on the
/// last stage, every micro-batch's loss (detached) in micro-batch order; empty on the other
/// stages. Throws std::invalid_argument with pipeline_layout_error's message for a layout the
/// schedule cannot run (from pipeline_schedule), or when a forward that sends returns a tensor
/// other than [activation_shape] of spec's dtype and device, or for spec.bf16_wire with a dtype
/// other than f32; a peer that sends another shape or wire dtype raises the comm shape-mismatch
/// error (naming both shapes and dtypes).
std::vector<Tensor> run_pipeline_step(const comm::ParallelTopology& topology,
                                      const PipelineSpec& spec, const PipelineStage& stage);

/// Forward only, without recording gradients: every micro-batch through every chunk in the order
/// of forward_schedule (spec.schedule is not used; any micro-batch count >= 1). Returns the last
/// virtual stage's outputs per micro-batch in order on the last stage; empty on the other stages.
/// Same errors as run_pipeline_step.
std::vector<Tensor> run_pipeline_forward(const comm::ParallelTopology& topology,
                                         const PipelineSpec& spec, const PipelineStage& stage);

/// The MSE model of `mpitron validate` and `bench`: a stage's layers applied to an activation
/// [micro_batch, ...], returning an activation of the same shape (one model chunk per stage).
using StageForward = std::function<Tensor(const Tensor&)>;

/// Sizes of the activations exchanged between stages of the MSE model.
struct PipelineShape {
  Shape batch_shape;      ///< the whole batch's activation, e.g. [batch, seq, hidden]
  int micro_batches = 1;  ///< batch_shape[0] is split into this many equal micro-batches
  autograd::DType dtype = autograd::DType::f32;
  autograd::Device device = autograd::Device::cpu;
  ScheduleKind schedule = ScheduleKind::afab;
};

/// Results of a training step; defined on the last stage only.
struct PipelineResult {
  /// The model output for the whole batch [batch, ...] (micro-batch outputs concatenated).
  Tensor output;
  /// MSE loss of the whole batch (the sum of the micro-batch losses weighted 1/micro_batches,
  /// added from the last micro-batch to the first), a scalar.
  Tensor loss;
};

/// One training step of the MSE model through run_pipeline_step: `input` [batch, ...] is read on
/// the first stage and `target` on the last (ignored elsewhere); the last stage's loss of
/// micro-batch i is mse_loss(output_i, target_i) / micro_batches. Parameter gradients accumulate
/// into the stage's parameters; the caller then averages them over DP.
/// Throws std::invalid_argument when batch is not divisible by micro_batches; a peer that sends
/// a different shape raises the comm shape-mismatch error.
PipelineResult pipeline_train_step(const comm::ParallelTopology& topology,
                                   const PipelineShape& shape, const StageForward& forward,
                                   const Tensor& input, const Tensor& target);

/// Inference of the MSE model through run_pipeline_forward; returns the output [batch, ...] on
/// the last stage and an undefined tensor on the others.
Tensor pipeline_inference(const comm::ParallelTopology& topology, const PipelineShape& shape,
                          const StageForward& forward, const Tensor& input);

}  // namespace mpitron::nn
