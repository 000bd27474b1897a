#include "nn/pipeline.h"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "comm/point_to_point.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

namespace {

Shape micro_batch_shape(const PipelineShape& shape) {
  if (shape.batch_shape.empty() || shape.micro_batches < 1 ||
      shape.batch_shape[0] % shape.micro_batches != 0) {
    throw std::invalid_argument(
        fmt::format("pipeline: batch {} is not divisible into {} micro-batches",
                    autograd::to_string(shape.batch_shape), shape.micro_batches));
  }
  Shape micro = shape.batch_shape;
  micro[0] /= shape.micro_batches;
  return micro;
}

// Micro-batch i of a [batch, ...] tensor.
Tensor micro_batch(const Tensor& t, int i, std::int64_t size) {
  autograd::NoGradGuard no_grad;
  return autograd::narrow(t, 0, i * size, size);
}

Tensor receive(const comm::Communicator& pp, int from, const Shape& shape,
               const PipelineShape& spec) {
  Tensor t = Tensor::empty(shape, spec.dtype, spec.device);
  comm::recv(pp, t.buffer(), shape, from);
  return t;
}

void send(const comm::Communicator& pp, int to, const Tensor& t) {
  comm::send(pp, t.buffer(), t.shape(), to);
}

// Forward of every micro-batch on this stage; returns (inputs, outputs) per micro-batch.
std::pair<std::vector<Tensor>, std::vector<Tensor>> forward_all(
    const comm::ParallelTopology& topology, const PipelineShape& spec, const StageForward& forward,
    const Tensor& input, bool track_input_grad) {
  const Shape micro = micro_batch_shape(spec);
  const comm::Communicator& pp = topology.pp_comm();
  std::vector<Tensor> inputs, outputs;
  for (int i = 0; i < spec.micro_batches; ++i) {
    Tensor x = topology.is_first_stage() ? micro_batch(input, i, micro[0])
                                         : receive(pp, topology.pp_rank() - 1, micro, spec);
    if (!topology.is_first_stage() && track_input_grad) x.set_requires_grad();
    Tensor y = forward(x);
    if (!topology.is_last_stage()) send(pp, topology.pp_rank() + 1, y);
    inputs.push_back(x);
    outputs.push_back(y);
  }
  return {inputs, outputs};
}

}  // namespace

PipelineResult pipeline_train_step(const comm::ParallelTopology& topology,
                                   const PipelineShape& spec, const StageForward& forward,
                                   const Tensor& input, const Tensor& target) {
  auto [inputs, outputs] = forward_all(topology, spec, forward, input, true);
  const comm::Communicator& pp = topology.pp_comm();
  const Shape micro = micro_batch_shape(spec);
  const double weight =
      fault_active(Fault::micro_batch_loss_weight_1) ? 1.0 : 1.0 / spec.micro_batches;
  Tensor loss_total;
  for (int i = spec.micro_batches - 1; i >= 0; --i) {
    if (topology.is_last_stage()) {
      Tensor loss =
          autograd::scale(autograd::mse_loss(outputs[i], micro_batch(target, i, micro[0])), weight);
      loss.backward();
      loss_total = loss_total.defined() ? autograd::add(loss_total, loss.detach()) : loss.detach();
    } else {
      outputs[i].backward(receive(pp, topology.pp_rank() + 1, micro, spec));
    }
    if (!topology.is_first_stage()) {
      Tensor grad = inputs[i].grad();
      if (!grad.defined() || fault_active(Fault::pp_gradient_not_sent)) {
        grad = Tensor::zeros(micro, spec.dtype, spec.device);
      }
      send(pp, topology.pp_rank() - 1, grad);
    }
  }
  if (!topology.is_last_stage()) return {};
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> detached;
  for (const Tensor& y : outputs)
    detached.push_back(y.detach());
  return {autograd::concat(detached, 0), loss_total};
}

Tensor pipeline_inference(const comm::ParallelTopology& topology, const PipelineShape& spec,
                          const StageForward& forward, const Tensor& input) {
  autograd::NoGradGuard no_grad;
  auto [inputs, outputs] = forward_all(topology, spec, forward, input, false);
  return topology.is_last_stage() ? autograd::concat(outputs, 0) : Tensor();
}

}  // namespace mpitron::nn
