#include "nn/parallel/pipeline.h"

#include <fmt/format.h>

#include <stdexcept>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "comm/point_to_point.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

namespace {

// Which way a transfer goes: activations to the next virtual stage, their gradients back.
enum class Direction { forward = 0, backward = 1 };

Direction direction_of(const PipelineAction& action) {
  return action.type == PipelineAction::Type::forward ? Direction::forward : Direction::backward;
}

// This stage's transfers with its neighbours on the PP communicator. One receive may be started
// ahead (`expect`) so its data can arrive while the stage computes; `receive` finishes it. Sends
// are started and kept, with the tensor they read, until they complete.
class StageLink {
 public:
  StageLink(const comm::ParallelTopology& topology, const PipelineSpec& spec)
      : pp_(topology.pp_comm()), stage_(topology.pp_rank()), spec_(spec) {
    if (spec_.bf16_wire && spec_.dtype != autograd::DType::f32) {
      throw std::invalid_argument(
          fmt::format("pipeline: a bfloat16 wire carries float32 activations, not {}",
                      kernels::to_string(spec_.dtype)));
    }
  }

  // Starts receiving the input activation (a forward action) or the output gradient (a backward
  // action) of `action`. At most one receive is in flight.
  void expect(const PipelineAction& action) {
    if (ahead_.started) {
      throw std::logic_error(
          fmt::format("pipeline: stage {} started receiving for {} while {} is in flight", stage_,
                      to_string({action}), to_string({ahead_.action})));
    }
    ahead_.started = true;
    ahead_.action = action;
    ahead_.tensor = Tensor::empty(spec_.activation_shape, wire_dtype(), spec_.device);
    const PipelineTransfer from = transfer_of(action, /*receive=*/true, pp_.size(), stage_);
    ahead_.request = comm::irecv(pp_, ahead_.tensor.buffer(), spec_.activation_shape, from.peer,
                                 tag(action, from));
  }

  // The activation or gradient `action` receives, once it is here (started now unless `expect`
  // started it).
  Tensor receive(const PipelineAction& action) {
    if (!ahead_.started || !(ahead_.action == action)) expect(action);
    ahead_.request.wait();
    ahead_.started = false;
    if (!spec_.bf16_wire) return std::move(ahead_.tensor);
    Tensor wide = Tensor::empty(spec_.activation_shape, spec_.dtype, spec_.device);
    kernels::convert(ahead_.tensor.buffer(), wide.buffer());  // exact
    return wide;
  }

  // Sends `t`, the output activation (a forward action) or the input gradient (a backward
  // action) of `action`.
  void send(const PipelineAction& action, const Tensor& t) {
    if (t.shape() != spec_.activation_shape || t.dtype() != spec_.dtype ||
        t.device() != spec_.device) {
      throw std::invalid_argument(fmt::format(
          "pipeline: stage {} produced {} {} on {} for micro-batch {}, but the stages exchange "
          "{} {} on {}{}",
          stage_, autograd::to_string(t.shape()), kernels::to_string(t.dtype()),
          kernels::to_string(t.device()), action.micro_batch,
          autograd::to_string(spec_.activation_shape), kernels::to_string(spec_.dtype),
          kernels::to_string(spec_.device), spec_.bf16_wire ? " (sent as bfloat16)" : ""));
    }
    std::erase_if(pending_, [](Pending& p) { return p.request.test(); });
    Pending& sent = pending_.emplace_back();
    if (spec_.bf16_wire) {
      sent.tensor = Tensor::empty(t.shape(), wire_dtype(), t.device());
      kernels::convert(t.buffer(), sent.tensor.buffer());  // rounds to nearest even
    } else {
      sent.tensor = t.detach();  // keeps the storage, not the autograd graph
    }
    const PipelineTransfer to = transfer_of(action, /*receive=*/false, pp_.size(), stage_);
    sent.request =
        comm::isend(pp_, sent.tensor.buffer(), spec_.activation_shape, to.peer, tag(action, to));
    ahead_.request.test();  // a receive whose header has arrived posts its payload
  }

  void finish() {
    for (Pending& p : pending_)
      p.request.wait();
    pending_.clear();
  }

 private:
  // The tag of a transfer of `action`: both ends compute it alike from the boundary's upstream
  // chunk. Tags repeat every (kMaxTransferTag + 1) / 2 crossings, which is safe since a stage
  // receives from one neighbour in the order that neighbour sends.
  int tag(const PipelineAction& action, const PipelineTransfer& transfer) const {
    constexpr int kCrossingTags = (comm::kMaxTransferTag + 1) / 2;
    const int crossing = transfer.upstream_chunk * spec_.micro_batches + action.micro_batch;
    return 2 * (crossing % kCrossingTags) + static_cast<int>(direction_of(action));
  }

  // What travels: spec's dtype, or bfloat16 on a bfloat16 wire.
  autograd::DType wire_dtype() const {
    return spec_.bf16_wire ? autograd::DType::bf16 : spec_.dtype;
  }

  struct Pending {
    Tensor tensor;
    comm::SendRequest request;  // declared last: finished before the tensor is released
  };
  struct Incoming {
    bool started = false;  // until `receive` took it (the request may complete before)
    PipelineAction action{};
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

// Runs `table` (this stage's, of spec's layout) with `stage`; with `train`, backward actions run
// backward and each virtual stage's input is made to require its gradient. Returns the last
// virtual stage's forward outputs (detached) in micro-batch order on the last stage, else none.
std::vector<Tensor> execute(const comm::ParallelTopology& topology, const PipelineSpec& spec,
                            const PipelineStage& stage, const std::vector<PipelineAction>& table,
                            bool train) {
  const auto m = static_cast<std::size_t>(spec.micro_batches);
  StageLink link(topology, spec);
  // Per (chunk, micro-batch): the received input and the output, until the backward ran.
  std::vector<Tensor> inputs(m * static_cast<std::size_t>(spec.virtual_stages));
  std::vector<Tensor> outputs(inputs.size());
  std::vector<Tensor> results(topology.is_last_stage() ? m : 0);
  std::size_t ahead = 0;  // the next action that receives, at or after the current one
  for (std::size_t a = 0; a < table.size(); ++a) {
    const PipelineAction& action = table[a];
    const std::size_t i =
        static_cast<std::size_t>(action.chunk) * m + static_cast<std::size_t>(action.micro_batch);
    Tensor received = action.recv ? link.receive(action) : Tensor();
    if (ahead <= a) {  // start the next receive before this action computes
      for (ahead = a + 1; ahead < table.size() && !table[ahead].recv;)
        ++ahead;
      if (ahead < table.size()) link.expect(table[ahead]);
    }
    if (action.type == PipelineAction::Type::forward) {
      if (action.recv) inputs[i] = train ? received.set_requires_grad() : received;
      outputs[i] = stage.forward(action.micro_batch, action.chunk, inputs[i]);
      if (action.send) {
        link.send(action, outputs[i]);
      } else if (topology.is_last_stage()) {
        results[static_cast<std::size_t>(action.micro_batch)] = outputs[i].detach();
      }
      if (train) continue;
    } else {
      if (outputs[i].requires_grad()) {
        if (action.recv) {
          outputs[i].backward(received);
        } else {
          outputs[i].backward();
        }
      }
      if (action.send) link.send(action, input_gradient(inputs[i], spec));
    }
    inputs[i] = Tensor();
    outputs[i] = Tensor();
  }
  link.finish();
  return results;
}

}  // namespace

std::vector<Tensor> run_pipeline_step(const comm::ParallelTopology& topology,
                                      const PipelineSpec& spec, const PipelineStage& stage) {
  const auto table = pipeline_schedule(spec.schedule, topology.pp(), topology.pp_rank(),
                                       spec.micro_batches, spec.virtual_stages);
  return execute(topology, spec, stage, table, /*train=*/true);
}

std::vector<Tensor> run_pipeline_forward(const comm::ParallelTopology& topology,
                                         const PipelineSpec& spec, const PipelineStage& stage) {
  autograd::NoGradGuard no_grad;
  const auto table =
      forward_schedule(topology.pp(), topology.pp_rank(), spec.micro_batches, spec.virtual_stages);
  return execute(topology, spec, stage, table, /*train=*/false);
}

PipelineResult pipeline_train_step(const comm::ParallelTopology& topology,
                                   const PipelineShape& shape, const StageForward& forward,
                                   const Tensor& input, const Tensor& target) {
  const MseStages stages(topology, shape, forward, input);
  const double weight =
      fault_active(Fault::micro_batch_loss_weight_1) ? 1.0 : 1.0 / shape.micro_batches;
  std::vector<Tensor> outputs(static_cast<std::size_t>(shape.micro_batches));
  const PipelineStage stage{[&](int i, int /*chunk*/, const Tensor& received) {
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
  const PipelineStage stage{[&](int i, int /*chunk*/, const Tensor& received) {
    return stages.stage_output(i, received);
  }};
  const std::vector<Tensor> outputs = run_pipeline_forward(topology, stages.spec, stage);
  return topology.is_last_stage() ? autograd::concat(outputs, 0) : Tensor();
}

}  // namespace mpitron::nn
