// The distributed sampler against PyTorch's DistributedSampler (expected lists printed by
// torch.utils.data.DistributedSampler(range(n), num_replicas, rank, shuffle=False, drop_last)
// with torch 1.13), shuffle properties, batching, and the dataset helpers. One process: no MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "autograd/random.h"
#include "nn/data/dataset.h"
#include "nn/data/distributed_sampler.h"

namespace mpitron::nn {
namespace {

using Indices = std::vector<std::int64_t>;

TEST(DistributedSampler, PadsFromTheStartLikeTorch) {
  const Indices expected[] = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  for (int rank = 0; rank < 3; ++rank) {
    const DistributedSampler sampler(10, 3, rank, 0, /*shuffle=*/false);
    EXPECT_EQ(sampler.samples_per_replica(), 4);
    EXPECT_EQ(sampler.indices(0), expected[rank]) << "rank " << rank;
  }
  // More padding than samples: torch repeats the list, rank 4 of 5 over 2 samples gets [0].
  EXPECT_EQ(DistributedSampler(2, 5, 4, 0, false).indices(0), Indices{0});
}

TEST(DistributedSampler, DropLastCutsTheTailLikeTorch) {
  const Indices expected[] = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
  for (int rank = 0; rank < 3; ++rank) {
    const DistributedSampler sampler(10, 3, rank, 0, false, /*drop_last=*/true);
    EXPECT_EQ(sampler.samples_per_replica(), 3);
    EXPECT_EQ(sampler.indices(0), expected[rank]) << "rank " << rank;
  }
}

TEST(DistributedSampler, ShuffledRanksPartitionThePaddedPermutation) {
  const std::int64_t n = 11;
  const int replicas = 4;  // 12 slots: one padded index
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    const Indices order = DistributedSampler(n, replicas, 0, 7).permutation(epoch);
    Indices sorted = order;
    std::sort(sorted.begin(), sorted.end());
    Indices identity(static_cast<std::size_t>(n));
    std::iota(identity.begin(), identity.end(), 0);
    ASSERT_EQ(sorted, identity) << "not a permutation";
    for (int rank = 0; rank < replicas; ++rank) {
      const DistributedSampler sampler(n, replicas, rank, 7);
      EXPECT_EQ(sampler.permutation(epoch), order) << "ranks must share the permutation";
      const Indices mine = sampler.indices(epoch);
      ASSERT_EQ(mine.size(), 3u);
      for (std::size_t k = 0; k < mine.size(); ++k) {
        const std::size_t position = rank + k * replicas;
        EXPECT_EQ(mine[k], order[position % n]);
      }
    }
  }
}

TEST(DistributedSampler, EpochsAndSeedsGiveDifferentPermutations) {
  const DistributedSampler a(50, 2, 0, 1), b(50, 2, 1, 1), c(50, 2, 0, 2);
  EXPECT_EQ(a.permutation(3), b.permutation(3));
  EXPECT_NE(a.permutation(0), a.permutation(1));
  // Seed s, epoch e shuffles with s + e: seed 1 epoch 1 equals seed 2 epoch 0.
  EXPECT_EQ(a.permutation(1), c.permutation(0));
  EXPECT_NE(a.permutation(0), c.permutation(0));
}

// Each of the n! orders is equally likely under Fisher-Yates, so element j lands at position p
// with probability 1/n. Over 6000 shuffles of 4 elements each count is Binomial(6000, 1/4):
// mean 1500, sd 33.5; 200 is 6 sd, so a correct shuffle fails with probability < 1e-8, while
// the classic bug j < i (Sattolo's algorithm never leaves an element in place: count 0 on the
// diagonal) or a shuffle that forgets the epoch (counts 6000 and 0) is far outside.
TEST(DistributedSampler, ShuffleIsUniformOverPositions) {
  const int n = 4, epochs = 6000;
  const DistributedSampler sampler(n, 1, 0, 12345);
  int counts[4][4] = {};
  for (int e = 0; e < epochs; ++e) {
    const Indices order = sampler.permutation(e);
    for (int p = 0; p < n; ++p)
      ++counts[p][order[static_cast<std::size_t>(p)]];
  }
  for (int p = 0; p < n; ++p) {
    for (int j = 0; j < n; ++j)
      EXPECT_NEAR(counts[p][j], epochs / n, 200) << p << ", " << j;
  }
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(0, 1, 0, 0), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, 0, 0, 0), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, 2, 2, 0), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(3, 4, 0, 0, true, /*drop_last=*/true), std::invalid_argument);
}

TEST(MakeBatches, KeepsTheRemainderAsALastSmallerBatch) {
  const auto batches = make_batches({9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, 4);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (Indices{9, 8, 7, 6}));
  EXPECT_EQ(batches[2], (Indices{1, 0}));
  EXPECT_THROW(make_batches({1}, 0), std::invalid_argument);
}

TEST(Dataset, SyntheticTargetsAreTheTeacherPlusSmallNoise) {
  const std::int64_t n = 2000, f = 3, t = 2;
  const Dataset data = make_synthetic_dataset(n, f, t, 5);
  ASSERT_EQ(data.inputs.size(), static_cast<std::size_t>(n * f));
  ASSERT_EQ(data.outputs.size(), static_cast<std::size_t>(n * t));
  EXPECT_EQ(make_synthetic_dataset(n, f, t, 5).outputs, data.outputs);
  EXPECT_NE(make_synthetic_dataset(n, f, t, 6).outputs, data.outputs);
  // Residual y - x A with the documented teacher A ~ N(0, 1/f) (seed + 1), naive loops.
  const std::vector<double> teacher =
      autograd::randn({f, t}, 6, 1.0 / std::sqrt(3.0), autograd::DType::f64).to_vector();
  double squares = 0.0;
  for (std::int64_t s = 0; s < n; ++s) {
    for (std::int64_t j = 0; j < t; ++j) {
      double residual = data.outputs[s * t + j];
      for (std::int64_t i = 0; i < f; ++i)
        residual -= data.inputs[s * f + i] * teacher[i * t + j];
      squares += residual * residual;
    }
  }
  // Noise sd 0.1: the mean square of 4000 N(0, 0.01) draws is 0.01 with sd 0.01 sqrt(2/4000)
  // = 2.2e-4; 1.5e-3 is ~7 sd, while a wrong teacher scale leaves a residual of order 0.1.
  EXPECT_NEAR(squares / (n * t), 0.01, 1.5e-3);
  EXPECT_THROW(make_synthetic_dataset(0, 1, 1, 0), std::invalid_argument);
}

TEST(GatherBatch, PicksRowsInOrderWithRepeats) {
  const Dataset data{3, 2, 1, {0, 1, 10, 11, 20, 21}, {5, 6, 7}};
  const Batch batch = gather_batch(data, {2, 0, 2}, autograd::DType::f64, autograd::Device::cpu);
  EXPECT_EQ(batch.inputs.shape(), (autograd::Shape{3, 2}));
  EXPECT_EQ(batch.inputs.to_vector(), (std::vector<double>{20, 21, 0, 1, 20, 21}));
  EXPECT_EQ(batch.outputs.to_vector(), (std::vector<double>{7, 5, 7}));
  EXPECT_THROW(gather_batch(data, {3}, autograd::DType::f64, autograd::Device::cpu),
               std::out_of_range);
  EXPECT_THROW(gather_batch(data, {}, autograd::DType::f64, autograd::Device::cpu),
               std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::nn
