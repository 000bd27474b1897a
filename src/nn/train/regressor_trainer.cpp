#include "nn/train/regressor_trainer.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "autograd/ops.h"
#include "comm/agreement.h"
#include "comm/collectives.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

namespace {

const std::vector<LinearWeights>& checked(const std::vector<LinearWeights>& layers,
                                          const Dataset& data) {
  if (layers.empty() || layers.front().weight.size(1) != data.features ||
      layers.back().weight.size(0) != data.targets) {
    throw std::invalid_argument(
        fmt::format("RegressorTrainer: the model does not map {} features to {} targets",
                    data.features, data.targets));
  }
  return layers;
}

}  // namespace

RegressorTrainer::RegressorTrainer(const std::vector<LinearWeights>& initial, const Dataset& data,
                                   const comm::Communicator& dp, const TrainerOptions& options)
    : data_(data),
      options_(options),
      model_(checked(initial, data)),
      sampler_(data.samples, dp.size(), dp.rank(), options.shuffle_seed, options.shuffle,
               options.drop_last),
      sgd_(model_.parameters(), options.lr, options.momentum),
      gradients_(sgd_.parameters(), dp),
      last_replica_(dp.rank() == dp.size() - 1) {
  if (options.batch_size < 1) {
    throw std::invalid_argument(
        fmt::format("RegressorTrainer: batch size {} < 1", options.batch_size));
  }
}

std::int64_t RegressorTrainer::steps_per_epoch() const {
  return (sampler_.samples_per_replica() + options_.batch_size - 1) / options_.batch_size;
}

std::vector<double> RegressorTrainer::train_epoch(
    std::int64_t epoch, const std::function<void(std::int64_t, double)>& on_step) {
  std::vector<double> losses;
  for (const auto& indices : make_batches(sampler_.indices(epoch), options_.batch_size)) {
    const Batch batch = gather_batch(data_, indices, options_.dtype, options_.device);
    gradients_.zero();
    const Tensor loss = autograd::mse_loss(model_.forward(batch.inputs), batch.outputs);
    loss.backward();
    gradients_.finish();
    sgd_.step();
    losses.push_back(loss.item());
    if (on_step) on_step(static_cast<std::int64_t>(losses.size()) - 1, losses.back());
  }
  if (fault_active(Fault::replica_drift) && epoch == 0 && last_replica_) {
    Tensor first = model_.parameters().front().tensor;  // a handle sharing the parameter
    kernels::axpy(1.0, Tensor::full(first.shape(), 1e-3, first.dtype(), first.device()).buffer(),
                  first.buffer());
  }
  return losses;
}

ReplicaDifference replica_difference(const Parameters& parameters, const comm::Communicator& dp) {
  ReplicaDifference result;
  for (const Parameter& p : parameters) {
    Tensor reference = p.tensor.clone();
    comm::broadcast(dp, reference.buffer(), 0);
    const std::vector<double> mine = p.tensor.to_vector();
    const std::vector<double> theirs = reference.to_vector();
    for (std::size_t i = 0; i < mine.size(); ++i) {
      double difference = std::abs(mine[i] - theirs[i]);
      if (std::isnan(difference)) difference = std::numeric_limits<double>::infinity();
      if (difference > result.max_abs) {
        result.max_abs = difference;
        result.worst = p.name;
      }
    }
  }
  result.max_abs = comm::all_reduce_scalar(dp, result.max_abs, comm::ReduceOp::max);
  return result;
}

}  // namespace mpitron::nn
