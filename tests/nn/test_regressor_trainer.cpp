// Data-parallel training (DP group = the world): N replicas end where one process ends when its
// batches are the union of the replicas' batches; five SGD steps against PyTorch
// (tests/data/train_dp.json from tools/make_golden_attention_dp.py); the replica check.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "comm/agreement.h"
#include "kernels/ops.h"
#include "nn/train/regressor_trainer.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::DType;
using autograd::Tensor;

// A 1-process communicator of this rank alone, for the single-process reference run.
comm::Communicator self() {
  return test::world().split(test::world().rank(), 0, "self");
}

double average_over_world(double mine) {
  return comm::all_reduce_scalar(test::world(), mine, comm::ReduceOp::avg);
}

struct Run {
  std::int64_t hidden;
  double momentum;
};

// Why the N-rank and 1-rank runs must agree: rank r's batch i holds positions
// r + N (iB + j), j < B, of the epoch's permutation, so the union over the ranks is positions
// [iNB, (i+1)NB): the 1-rank batch i of size NB over the same permutation. This needs two
// properties of the dataset, which 96 samples with B = 5 have for N = 1, 2, 4:
// - samples divisible by N, so no index is padded in (a repeat would be seen twice by N ranks);
// - equal local batch sizes at every step (the sampler guarantees it: every rank has 96/N
//   indices, so the short last batches are 1, 3 and 4 on every rank), so the average of the
//   ranks' mean losses is the mean loss of the union and the averaged gradient is the 1-rank
//   gradient.
// The runs then differ only by float32 summation order (<= 96 terms, ~1e-6 relative per step);
// 1e-5 bounds the drift over 3 epochs of <= 20 steps at lr 0.05 with a margin, while one wrong
// or missing sample in a batch moves the parameters by ~1e-3.
class DataParallelVsOneRank : public ::testing::TestWithParam<Run> {};

TEST_P(DataParallelVsOneRank, EndsWithTheSameParameters) {
  const Dataset data = make_synthetic_dataset(96, 6, 2, 31);
  const auto initial = make_regressor_weights(6, GetParam().hidden, 2, 32, DType::f32, Device::cpu);
  TrainerOptions options;
  options.batch_size = 5;
  options.lr = 0.05;
  options.momentum = GetParam().momentum;
  options.shuffle_seed = 33;
  RegressorTrainer replicas(initial, data, test::world(), options);
  options.batch_size *= test::world().size();
  RegressorTrainer single(initial, data, self(), options);
  ASSERT_EQ(replicas.steps_per_epoch(), single.steps_per_epoch());
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<double> losses = replicas.train_epoch(epoch);
    const std::vector<double> reference = single.train_epoch(epoch);
    ASSERT_EQ(losses.size(), reference.size());
    for (std::size_t step = 0; step < losses.size(); ++step) {
      EXPECT_NEAR(average_over_world(losses[step]), reference[step], 1e-5 * (1 + reference[step]))
          << "epoch " << epoch << " step " << step;
    }
  }
  const Parameters mine = replicas.model().parameters(), expected = single.model().parameters();
  ASSERT_EQ(mine.size(), expected.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    SCOPED_TRACE(mine[i].name);
    test::expect_close(mine[i].tensor, expected[i].tensor, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DataParallelVsOneRank,
                         ::testing::Values(Run{0, 0.0}, Run{0, 0.9}, Run{8, 0.0}),
                         [](const auto& info) {
                           return std::string(info.param.hidden > 0 ? "mlp" : "linear") +
                                  (info.param.momentum > 0 ? "_momentum" : "");
                         });

TEST(RegressorTrainer, EveryRankRunsTheSameStepsWhenSamplesDoNotDivide) {
  const int n = test::world().size();
  const Dataset data = make_synthetic_dataset(4 * n + 1, 3, 1, 41);  // one padded index per rank
  TrainerOptions options;
  options.batch_size = 3;
  for (bool drop_last : {false, true}) {
    options.drop_last = drop_last;
    RegressorTrainer trainer(make_regressor_weights(3, 0, 1, 42, DType::f32, Device::cpu), data,
                             test::world(), options);
    // 5 (padded), or 4 (dropped; 5 on one rank) samples per rank in batches of 3: two steps.
    EXPECT_EQ(trainer.steps_per_epoch(), 2);
    EXPECT_EQ(trainer.train_epoch(0).size(), 2u);
  }
}

// PyTorch parity: batch i of torch's run is rows [8i, 8i + 8); without shuffling, rank r of N
// reads rows r, r + N, ..., so with batch 8/N per rank the replicas' batches make up exactly
// torch's. f64: rounding only (~1e-15 per step; 1e-12 used). f32: inputs and updates rounded to
// 2^-24 relative; over five steps of 10-term sums 1e-5 leaves a ~10x margin.
class TrainDpParity : public test::DeviceDtypeTest {};

TEST_P(TrainDpParity, FiveSgdStepsMatchTorch) {
  const test::GoldenFile golden("train_dp.json");
  const double tolerance = dtype() == DType::f64 ? 1e-12 : 1e-5;
  const Tensor x = golden.tensor("x"), y = golden.tensor("y");
  const Dataset data{x.size(0), x.size(1), y.size(1), x.to_vector(), y.to_vector()};
  for (const std::string run : {"plain", "momentum"}) {
    SCOPED_TRACE(run);
    TrainerOptions options;
    options.batch_size = static_cast<std::int64_t>(golden.scalar("batch")) / test::world().size();
    options.lr = golden.scalar("lr");
    options.momentum = golden.scalar(run + ".momentum");
    options.shuffle = false;
    options.dtype = dtype();
    options.device = device();
    RegressorTrainer trainer(
        {{golden.tensor("weight", dtype(), device()), golden.tensor("bias", dtype(), device())}},
        data, test::world(), options);
    const std::vector<double> losses = trainer.train_epoch(0);
    const std::vector<double> expected = golden.tensor(run + ".losses").to_vector();
    ASSERT_EQ(losses.size(), expected.size());
    for (std::size_t step = 0; step < losses.size(); ++step) {
      EXPECT_NEAR(average_over_world(losses[step]), expected[step], tolerance) << "step " << step;
    }
    const Parameters params = trainer.model().parameters();
    test::expect_close(params[0].tensor, golden.tensor(run + ".weight"), tolerance);
    test::expect_close(params[1].tensor, golden.tensor(run + ".bias"), tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, TrainDpParity, test::all_devices_and_dtypes(),
                         test::device_dtype_name);

TEST(ReplicaDifference, IsZeroInSyncAndSeesADriftOnTheLastRank) {
  const comm::Communicator& dp = test::world();
  Tensor a = Tensor::full({3}, 1.5).set_requires_grad();
  Tensor b = Tensor::full({2, 2}, -2.0).set_requires_grad();
  const Parameters params{{"a", a}, {"b", b}};
  EXPECT_EQ(replica_difference(params, dp).max_abs, 0.0);

  const bool drifts = dp.rank() == dp.size() - 1 && dp.size() > 1;
  if (drifts) kernels::axpy(1.0, Tensor::full({2, 2}, 0.25).buffer(), b.buffer());
  const ReplicaDifference diff = replica_difference(params, dp);
  EXPECT_EQ(diff.max_abs, dp.size() > 1 ? 0.25 : 0.0);  // agreed: every rank sees it
  EXPECT_EQ(diff.worst, drifts ? "b" : "");

  // A NaN on rank 0 reaches every rank through the broadcast; NaN - NaN is NaN as well.
  if (dp.rank() == 0) kernels::fill(a.buffer(), std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(replica_difference(params, dp).max_abs, std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace mpitron::nn
