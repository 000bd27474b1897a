// Data-parallel training of the regressor: each replica reads its DistributedSampler share of
// the dataset, computes the MSE gradient of its batch, averages gradients over the DP group with
// one all-reduce per step (GradientAverager) and applies the same SGD update, so the replicas
// stay identical. Plus the debug check that they are.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/data/dataset.h"
#include "nn/data/distributed_sampler.h"
#include "nn/models/regressor.h"
#include "nn/optim/sgd.h"
#include "nn/parallel/data_parallel.h"

namespace mpitron::nn {

/// Hyper-parameters of a data-parallel run.
struct TrainerOptions {
  std::int64_t batch_size = 32;  ///< samples per replica per step
  double lr = 0.01;
  double momentum = 0.0;
  std::uint64_t shuffle_seed = 0;  ///< epoch e shuffles with shuffle_seed + e
  bool shuffle = true;
  bool drop_last = false;  ///< the sampler's drop_last
  DType dtype = DType::f32;
  Device device = Device::cpu;
};

/// One replica of a data-parallel run over the `dp` communicator.
///
/// Every replica gets the same number of indices per epoch (DistributedSampler), hence the same
/// number of steps and the same batch size at every step, so no replica leaves the loop while
/// others wait in the all-reduce, and the average of the replicas' mean losses equals the mean
/// loss of the union of their batches (its gradient is what every replica applies).
class RegressorTrainer {
 public:
  /// `data` must outlive the trainer. Throws std::invalid_argument for bad options (see
  /// DistributedSampler, Sgd) or when the model's input width differs from data.features.
  RegressorTrainer(const std::vector<LinearWeights>& initial, const Dataset& data,
                   const comm::Communicator& dp, const TrainerOptions& options);

  /// Runs epoch `epoch` (0-based): for every batch, forward, MSE loss, backward, gradient
  /// average over dp, SGD step (then, under Fault::replica_drift after epoch 0, the last replica
  /// perturbs its first parameter by 1e-3). Returns this replica's loss of each step
  /// ([steps_per_epoch()]). Collective over dp.
  /// `on_step`, when given, is called after every step with the step's index in the epoch
  /// (0-based) and this replica's loss (for progress reports).
  std::vector<double> train_epoch(
      std::int64_t epoch,
      const std::function<void(std::int64_t step, double loss)>& on_step = nullptr);

  /// Steps per epoch, the same on every replica: ceil(samples_per_replica / batch_size).
  std::int64_t steps_per_epoch() const;

  /// Samples every replica reads per epoch (DistributedSampler::samples_per_replica: padded
  /// with repeats, or cut by drop_last, to the same count on every replica).
  std::int64_t samples_per_replica() const { return sampler_.samples_per_replica(); }

  const Regressor& model() const { return model_; }

 private:
  const Dataset& data_;
  TrainerOptions options_;
  Regressor model_;
  DistributedSampler sampler_;
  Sgd sgd_;
  DataParallelGradients gradients_;
  bool last_replica_;
};

/// How far the replicas' parameters are from DP rank 0's.
struct ReplicaDifference {
  double max_abs = 0.0;  ///< max over ranks and elements of |param - rank 0's param|
  std::string worst;     ///< name of this rank's parameter with the largest difference, or ""
};

/// Debug check that the replicas are in sync: broadcasts every parameter from dp rank 0 and
/// compares it element-wise with the local copy; the largest difference is agreed over dp (MAX
/// all-reduce). NaN counts as an infinite difference. Collective over dp.
ReplicaDifference replica_difference(const Parameters& parameters, const comm::Communicator& dp);

}  // namespace mpitron::nn
