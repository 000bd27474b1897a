// Pipeline parallelism: the layers of a model are split into stages over the PP communicator;
// activations [batch, ...] flow forward from stage p to p + 1 and their gradients (same shape)
// flow back. Schedule: GPipe (Huang et al., arXiv:1811.06965) — all micro-batches forward, then
// all backward in reverse order, gradients accumulating in the parameters; with one micro-batch
// it is the plain synchronous forward/backward split.
#pragma once

#include <functional>

#include "autograd/tensor.h"
#include "comm/topology.h"

namespace mpitron::nn {

using autograd::Shape;
using autograd::Tensor;

/// What one stage computes: its layers applied to an activation [micro_batch, ...], returning an
/// activation of the same shape (as a transformer block stack does).
using StageForward = std::function<Tensor(const Tensor&)>;

/// Sizes of the activations exchanged between stages.
struct PipelineShape {
  Shape batch_shape;      ///< the whole batch's activation, e.g. [batch, seq, hidden]
  int micro_batches = 1;  ///< batch_shape[0] is split into this many equal micro-batches
  autograd::DType dtype = autograd::DType::f32;
  autograd::Device device = autograd::Device::cpu;
};

/// Results of a training step; defined on the last stage only.
struct PipelineResult {
  /// The model output for the whole batch [batch, ...] (micro-batch outputs concatenated).
  Tensor output;
  /// MSE loss of the whole batch (mean of the equal-size micro-batch losses), a scalar.
  Tensor loss;
};

/// One training step of the stage this rank is (topology.pp_rank()): forward of every
/// micro-batch, MSE loss against `target` on the last stage, backward. `input` [batch, ...] is
/// read on the first stage and `target` on the last (ignored elsewhere). Parameter gradients
/// accumulate into the stage's parameters; the caller then averages them over DP.
/// Throws std::invalid_argument when batch is not divisible by micro_batches; a peer that sends
/// a different shape raises the comm shape-mismatch error.
PipelineResult pipeline_train_step(const comm::ParallelTopology& topology,
                                   const PipelineShape& shape, const StageForward& forward,
                                   const Tensor& input, const Tensor& target);

/// Inference through the pipeline without recording gradients; returns the output [batch, ...]
/// on the last stage and an undefined tensor on the others.
Tensor pipeline_inference(const comm::ParallelTopology& topology, const PipelineShape& shape,
                          const StageForward& forward, const Tensor& input);

}  // namespace mpitron::nn
