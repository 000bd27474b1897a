#include "nn/parallel/pipeline.h"

#include <fmt/format.h>

#include <stdexcept>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "comm/point_to_point.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

namespace {

void check_micro_batches(const PipelineSpec& spec) {
  if (spec.micro_batches < 1) {
    throw std::invalid_argument(fmt::format(
        "pipeline: the micro-batch count must be at least 1, got {}", spec.micro_batches));
  }
}

// Which way a transfer goes: activations to stage + 1, their gradients to stage - 1.
enum class Direction { forward = 0, backward = 1 };

Direction direction_of(const PipelineAction& action) {
  return action.type == PipelineAction::Type::forward ? Direction::forward : Direction::backward;
}

// The transfer tag of micro-batch i's activation or gradient. Both stages compute it alike; tags
// repeat every (kMaxTransferTag + 1) / 2 micro-batches, which is safe since a stage receives from
// one neighbour in the order that neighbour sends.
int transfer_tag(Direction direction, int micro_batch) {
  constexpr int kMicroBatchTags = (comm::kMaxTransferTag + 1) / 2;
  return 2 * (micro_batch % kMicroBatchTags) + static_cast<int>(direction);
}

// This stage's transfers with its neighbours on the PP communicator. One receive may be started
// ahead (`expect`) so its data can arrive while the stage computes; `receive` finishes it. Sends
// are started and kept, with the tensor they read, until they complete.
class StageLink {
 public:
  StageLink(const comm::ParallelTopology& topology, const PipelineSpec& spec)
      : pp_(topology.pp_comm()), stage_(topology.pp_rank()), spec_(spec) {}

  // Starts receiving micro-batch `micro_batch`'s input activation (forward, from stage - 1) or
  // output gradient (backward, from stage + 1). At most one receive is in flight.
  void expect(Direction direction, int micro_batch) {
    if (ahead_.started) {
      throw std::logic_error(fmt::format(
          "pipeline: stage {} started receiving micro-batch {} while micro-batch {} is in flight",
          stage_, micro_batch, ahead_.micro_batch));
    }
    ahead_.started = true;
    ahead_.direction = direction;
    ahead_.micro_batch = micro_batch;
    ahead_.tensor = Tensor::empty(spec_.activation_shape, spec_.dtype, spec_.device);
    ahead_.request = comm::irecv(pp_, ahead_.tensor.buffer(), spec_.activation_shape,
                                 source(direction), transfer_tag(direction, micro_batch));
  }

  // The activation or gradient of `micro_batch`, once it is here (started now unless `expect`
  // started it).
  Tensor receive(Direction direction, int micro_batch) {
    if (!ahead_.started || ahead_.direction != direction || ahead_.micro_batch != micro_batch) {
      expect(direction, micro_batch);
    }
    ahead_.request.wait();
    ahead_.started = false;
    return std::move(ahead_.tensor);
  }

  void send(Direction direction, const Tensor& t, int micro_batch) {
    if (t.shape() != spec_.activation_shape || t.dtype() != spec_.dtype ||
        t.device() != spec_.device) {
      throw std::invalid_argument(fmt::format(
          "pipeline: stage {} produced {} {} on {} for micro-batch {}, but the stages exchange "
          "{} {} on {}",
          stage_, autograd::to_string(t.shape()), kernels::to_string(t.dtype()),
          kernels::to_string(t.device()), micro_batch, autograd::to_string(spec_.activation_shape),
          kernels::to_string(spec_.dtype), kernels::to_string(spec_.device)));
    }
    std::erase_if(pending_, [](Pending& p) { return p.request.test(); });
    Pending& sent = pending_.emplace_back();
    sent.tensor = t.detach();  // keeps the storage, not the autograd graph
    const int peer = direction == Direction::forward ? stage_ + 1 : stage_ - 1;
    sent.request = comm::isend(pp_, sent.tensor.buffer(), spec_.activation_shape, peer,
                               transfer_tag(direction, micro_batch));
    ahead_.request.test();  // a receive whose header has arrived posts its payload
  }

  void finish() {
    for (Pending& p : pending_)
      p.request.wait();
    pending_.clear();
  }

 private:
  int source(Direction direction) const {
    return direction == Direction::forward ? stage_ - 1 : stage_ + 1;
  }

  struct Pending {
    Tensor tensor;
    comm::SendRequest request;  // declared last: finished before the tensor is released
  };
  struct Incoming {
    bool started = false;  // until `receive` took it (the request may complete before)
    Direction direction = Direction::forward;
    int micro_batch = -1;
    Tensor tensor;
    comm::RecvRequest request;  // declared last: finished before the tensor is released
  };
  const comm::Communicator& pp_;
  int stage_;
  const PipelineSpec& spec_;
  std::vector<Pending> pending_;
  Incoming ahead_;
};

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

// The executor's spec for the MSE model, and the stage input of micro-batch i: the received
// activation, or on the first stage micro-batch i of `input` [batch, ...].
struct MseStages {
  PipelineSpec spec;
  const comm::ParallelTopology& topology;
  const StageForward& forward;
  const Tensor& input;

  MseStages(const comm::ParallelTopology& topology, const PipelineShape& shape,
            const StageForward& forward, const Tensor& input)
      : spec{micro_batch_shape(shape), shape.micro_batches, shape.schedule, shape.dtype,
             shape.device},
        topology(topology),
        forward(forward),
        input(input) {}

  // Micro-batch i of `t` [batch, ...]: rows are contiguous, so a view, not a copy.
  Tensor micro_batch(const Tensor& t, int i) const {
    return t.flat_view(i * autograd::numel_of(spec.activation_shape), spec.activation_shape);
  }

  Tensor stage_output(int i, const Tensor& received) const {
    return forward(topology.is_first_stage() ? micro_batch(input, i) : received);
  }
};

// The gradient this stage sends upstream for `input`: zeros when backward did not reach it.
Tensor input_gradient(const Tensor& input, const PipelineSpec& spec) {
  Tensor grad = input.grad();
  if (!grad.defined() || fault_active(Fault::pp_gradient_not_sent)) {
    grad = Tensor::zeros(spec.activation_shape, spec.dtype, spec.device);
  }
  return grad;
}

}  // namespace

std::vector<Tensor> run_pipeline_step(const comm::ParallelTopology& topology,
                                      const PipelineSpec& spec, const PipelineStage& stage) {
  check_micro_batches(spec);
  const int p = topology.pp_rank();
  const auto table = pipeline_schedule(spec.schedule, topology.pp(), p, spec.micro_batches);
  const auto m = static_cast<std::size_t>(spec.micro_batches);
  StageLink link(topology, spec);
  std::vector<Tensor> inputs(m), outputs(m), losses(topology.is_last_stage() ? m : 0);
  std::size_t ahead = 0;  // the next action that receives, at or after the current one
  for (std::size_t a = 0; a < table.size(); ++a) {
    const PipelineAction& action = table[a];
    const auto i = static_cast<std::size_t>(action.micro_batch);
    const Direction direction = direction_of(action);
    Tensor received = action.recv ? link.receive(direction, action.micro_batch) : Tensor();
    if (ahead <= a) {  // start the next receive before this action computes
      for (ahead = a + 1; ahead < table.size() && !table[ahead].recv;)
        ++ahead;
      if (ahead < table.size()) {
        link.expect(direction_of(table[ahead]), table[ahead].micro_batch);
      }
    }
    if (action.type == PipelineAction::Type::forward) {
      if (action.recv) inputs[i] = received.set_requires_grad();
      outputs[i] = stage.forward(action.micro_batch, inputs[i]);
      if (action.send) link.send(direction, outputs[i], action.micro_batch);
      continue;
    }
    if (action.recv) {
      if (outputs[i].requires_grad()) outputs[i].backward(received);
    } else {
      losses[i] = outputs[i].detach();
      if (outputs[i].requires_grad()) outputs[i].backward();
    }
    if (action.send) link.send(direction, input_gradient(inputs[i], spec), action.micro_batch);
    inputs[i] = Tensor();
    outputs[i] = Tensor();
  }
  link.finish();
  return losses;
}

std::vector<Tensor> run_pipeline_forward(const comm::ParallelTopology& topology,
                                         const PipelineSpec& spec, const PipelineStage& stage) {
  check_micro_batches(spec);
  autograd::NoGradGuard no_grad;
  StageLink link(topology, spec);
  std::vector<Tensor> outputs;
  for (int i = 0; i < spec.micro_batches; ++i) {
    const bool receives = !topology.is_first_stage();
    const Tensor input = receives ? link.receive(Direction::forward, i) : Tensor();
    if (receives && i + 1 < spec.micro_batches) link.expect(Direction::forward, i + 1);
    Tensor output = stage.forward(i, input);
    if (topology.is_last_stage()) {
      outputs.push_back(std::move(output));
    } else {
      link.send(Direction::forward, output, i);
    }
  }
  link.finish();
  return outputs;
}

PipelineResult pipeline_train_step(const comm::ParallelTopology& topology,
                                   const PipelineShape& shape, const StageForward& forward,
                                   const Tensor& input, const Tensor& target) {
  const MseStages stages(topology, shape, forward, input);
  const double weight =
      fault_active(Fault::micro_batch_loss_weight_1) ? 1.0 : 1.0 / shape.micro_batches;
  std::vector<Tensor> outputs(static_cast<std::size_t>(shape.micro_batches));
  const PipelineStage stage{[&](int i, const Tensor& received) {
    Tensor y = stages.stage_output(i, received);
    if (!topology.is_last_stage()) return y;
    outputs[static_cast<std::size_t>(i)] = y.detach();
    return autograd::scale(autograd::mse_loss(y, stages.micro_batch(target, i)), weight);
  }};
  const std::vector<Tensor> losses = run_pipeline_step(topology, stages.spec, stage);
  if (!topology.is_last_stage()) return {};
  autograd::NoGradGuard no_grad;
  Tensor loss = losses.back();
  for (auto l = losses.rbegin() + 1; l != losses.rend(); ++l)
    loss = autograd::add(loss, *l);
  return {autograd::concat(outputs, 0), loss};
}

Tensor pipeline_inference(const comm::ParallelTopology& topology, const PipelineShape& shape,
                          const StageForward& forward, const Tensor& input) {
  const MseStages stages(topology, shape, forward, input);
  const PipelineStage stage{
      [&](int i, const Tensor& received) { return stages.stage_output(i, received); }};
  const std::vector<Tensor> outputs = run_pipeline_forward(topology, stages.spec, stage);
  return topology.is_last_stage() ? autograd::concat(outputs, 0) : Tensor();
}

}  // namespace mpitron::nn
