#include "nn/train/gpt_trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <limits>
#include <stdexcept>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/weight_operands.h"
#include "comm/collectives.h"
#include "kernels/ops.h"
#include "nn/data/zigzag.h"
#include "nn/fault_injection.h"
#include "nn/optim/sgd.h"
#include "nn/parallel/gradients.h"
#include "nn/parallel/pipeline.h"

namespace mpitron::nn {

namespace {

// Seconds since construction or the last lap.
class PhaseClock {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return seconds;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// SGD keeps no state, so it updates every element (the all-gather then overwrites those another
// replica owns); AdamW keeps moments for its shard only.
std::unique_ptr<Optimizer> make_optimizer(const Parameters& parameters,
                                          const GptTrainOptions& options,
                                          const DataParallelGradients& gradients) {
  if (options.optimizer == OptimizerKind::sgd) {
    return std::make_unique<Sgd>(parameters, options.lr);
  }
  return std::make_unique<AdamW>(
      parameters, options.lr, options.adamw,
      gradients.sharded() ? gradients.owned() : std::vector<ElementRange>{});
}

GradientSharding sharding_of(const GptTrainOptions& options,
                             const comm::ParallelTopology& topology) {
  GradientSharding sharding;
  sharding.enabled = options.distributed_optimizer;
  if (topology.pp() > 1) sharding.own_bucket.push_back(kTiedEmbedding);
  return sharding;
}

// Whether the stages exchange bfloat16 activations and gradients (PipelineSpec::bf16_wire): in a
// float32 run under bfloat16 GEMM operands (train --bf16).
bool bf16_pipeline_wire(DType dtype) {
  return dtype == DType::f32 && kernels::gemm_operands() == kernels::GemmOperands::bfloat16;
}

// In place: values[i] summed over `comm`.
void sum_over(const comm::Communicator& comm, std::vector<double>& values) {
  kernels::Buffer buffer(values.size(), kernels::DType::f64, kernels::Device::cpu);
  std::copy(values.begin(), values.end(), buffer.data_as<double>());
  comm::all_reduce(comm, buffer, comm::ReduceOp::sum);
  std::copy_n(buffer.data_as<double>(), values.size(), values.begin());
}

}  // namespace

GptTrainer::GptTrainer(const GptConfig& config, const MasterInit& init,
                       const comm::ParallelTopology& topology, const GptTrainOptions& options)
    : topology_(topology),
      options_(options),
      stage_(config, init, topology, options.sequence_parallel, options.virtual_stages,
             options.cp_comm, options.cp_prefetch),
      parameters_(stage_.parameters()),
      gradients_(parameters_, topology.dp_cp_comm(), DataParallelGradients::kDefaultBucketElements,
                 sharding_of(options, topology),
                 options.grad_reduce_in_bf16 ? comm::Wire::bf16 : comm::Wire::native),
      optimizer_(make_optimizer(parameters_, options, gradients_)) {
  stage_.set_recompute(options.recompute);
  if (options.bf16) {
    optimizer_->keep_float32_masters(gradients_.owned());
    refuse_infinite_bf16_parameters(parameters_, topology.world());
  }
}

std::vector<TokenBatch> GptTrainer::shards_of(const std::vector<TokenBatch>& batches) const {
  if (batches.empty()) return batches;
  const std::int64_t rows = batches.front().inputs.size(0);
  const std::int64_t seq = batches.front().inputs.size(1);
  for (const TokenBatch& b : batches) {
    if (b.inputs.shape() != autograd::Shape{rows, seq} || b.targets.shape() != b.inputs.shape()) {
      throw std::invalid_argument(
          fmt::format("GPT step: micro-batch inputs {} / targets {} are not [{}, {}]",
                      autograd::to_string(b.inputs.shape()), autograd::to_string(b.targets.shape()),
                      rows, seq));
    }
  }
  if (topology_.cp() == 1) return batches;
  std::vector<TokenBatch> shards;
  shards.reserve(batches.size());
  for (const TokenBatch& b : batches)
    shards.push_back(zigzag_token_batch(b, topology_.cp(), topology_.cp_rank()).tokens);
  return shards;
}

double GptTrainer::run_pipeline(const std::vector<TokenBatch>& whole, bool train) {
  const std::vector<TokenBatch> batches = shards_of(whole);
  // Each micro-batch's loss is its token sum over the whole micro-batch's counted targets; a cp
  // rank's share of that sum is scaled by cp, so that the average over dp x cp is the mean.
  std::vector<double> divisors;
  for (const TokenBatch& b : whole) {
    const double count =
        autograd::cross_entropy_divisor("GPT step", b.targets, stage_.config().vocab, 0.0);
    divisors.push_back(fault_active(Fault::cp_loss_local_mean) ? 0.0 : count / topology_.cp());
  }
  const auto count = static_cast<int>(batches.size());
  std::vector<double> loss = {0.0};
  if (count > 0) {
    const std::int64_t rows = batches.front().inputs.size(0);
    const std::int64_t seq = batches.front().inputs.size(1);
    const double weight = train ? 1.0 / count : 1.0;
    const int last_chunk = stage_.virtual_stages() - 1;
    PipelineStage stage{[&](int i, int chunk, const Tensor& input) {
      const TokenBatch& b = batches[static_cast<std::size_t>(i)];
      const Tensor x = stage_.forward(stage_.is_first() && chunk == 0 ? b.inputs : input, chunk);
      return stage_.is_last() && chunk == last_chunk
                 ? autograd::scale(stage_.loss(x, b.targets, divisors[static_cast<std::size_t>(i)]),
                                   weight)
                 : x;
    }};
    const PipelineSpec spec{stage_.activation_shape(rows, seq),
                            count,
                            options_.schedule,
                            options_.dtype,
                            options_.device,
                            stage_.virtual_stages(),
                            bf16_pipeline_wire(options_.dtype)};
    const std::vector<Tensor> losses = train ? run_pipeline_step(topology_, spec, stage)
                                             : run_pipeline_forward(topology_, spec, stage);
    for (const Tensor& l : losses)
      loss[0] += l.item();
  }
  if (!stage_.is_last()) loss[0] = 0.0;
  sum_over(topology_.pp_comm(), loss);
  return loss[0];
}

StepResult GptTrainer::forward_backward(const std::vector<TokenBatch>& micro_batches) {
  StepResult result;
  PhaseClock clock;
  gradients_.zero();
  gradients_.set_backward_passes(static_cast<int>(micro_batches.size()));
  std::vector<double> loss;
  {
    const autograd::Bf16WeightScope scope(weight_copies_);  // the optimizer runs after it closes
    loss = {run_pipeline(micro_batches, /*train=*/true)};
  }
  result.phases.forward_backward = clock.lap();
  sum_over(topology_.dp_cp_comm(), loss);
  result.loss = loss[0] / (topology_.dp() * topology_.cp());
  finalize_gradients(parameters_, topology_, gradients_, stage_.config().tied_embeddings);
  result.phases.gradient_reduction = clock.lap();
  result.grad_norm = global_gradient_norm(parameters_, topology_,
                                          gradients_.sharded() ? &gradients_.owned() : nullptr);
  result.phases.gradient_norm = clock.lap();
  return result;
}

StepResult GptTrainer::step(const std::vector<TokenBatch>& micro_batches, double lr) {
  StepResult result = forward_backward(micro_batches);
  PhaseClock clock;
  clip_gradients(parameters_, result.grad_norm, options_.grad_clip,
                 gradients_.sharded() ? &gradients_.owned() : nullptr);
  optimizer_->set_lr(lr);
  optimizer_->step(&weight_copies_);
  result.phases.optimizer = clock.lap();
  gradients_.all_gather_parameters(options_.bf16 ? comm::Wire::bf16 : comm::Wire::native);
  result.phases.parameter_all_gather = clock.lap();
  return result;
}

std::vector<Tensor> GptTrainer::master_weights() {
  if (optimizer_->has_masters()) return gradients_.all_gather_shards(optimizer_->masters());
  std::vector<Tensor> weights;
  for (const Parameter& p : parameters_)
    weights.push_back(p.tensor);
  return weights;
}

double GptTrainer::evaluate(const std::vector<TokenBatch>& windows) {
  autograd::NoGradGuard no_grad;
  const autograd::Bf16WeightScope scope(weight_copies_);
  std::vector<double> totals = {run_pipeline(windows, /*train=*/false),
                                static_cast<double>(windows.size())};
  sum_over(topology_.dp_cp_comm(), totals);  // every cp rank counts its replica's windows
  return totals[1] > 0 ? totals[0] / totals[1] : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace mpitron::nn
