// The sequence-parallel mappings (Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2)
// against closed forms, on every rank of a TP group spanning the world: activations
// [batch, seq, hidden] split along seq, rank r holding rows [r seq/tp, (r+1) seq/tp).
#include <gtest/gtest.h>

#include <stdexcept>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/layers/tp_mappings.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::Tensor;

constexpr std::int64_t kBatch = 2, kRows = 3, kHidden = 4;

// index(b, s, h) of a [kBatch, seq, kHidden] tensor.
std::size_t at(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t seq) {
  return static_cast<std::size_t>((b * seq + s) * kHidden + h);
}

TEST(SequenceParallel, GatherConcatenatesRowsAndReduceScattersTheGradient) {
  const comm::Communicator& tp = test::world();
  const int n = tp.size();
  const std::int64_t seq = kRows * n;
  Tensor shard = Tensor::full({kBatch, kRows, kHidden}, tp.rank()).set_requires_grad();
  const Tensor full = gather_from_sequence_parallel_region(shard, tp);
  ASSERT_EQ(full.shape(), (autograd::Shape{kBatch, seq, kHidden}));
  const std::vector<double> values = full.to_vector();
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::int64_t s = 0; s < seq; ++s)
      EXPECT_EQ(values[at(b, s, 0, seq)], s / kRows);
  // Rank r weighs w by (r + 1): this rank's rows of w summed over ranks, n(n+1)/2 w.
  const Tensor w = autograd::reshape(autograd::arange(kBatch * seq * kHidden), full.shape());
  autograd::sum(autograd::scale(autograd::mul(full, w), tp.rank() + 1.0)).backward();
  const std::vector<double> grad = shard.grad().to_vector();
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::int64_t s = 0; s < kRows; ++s)
      for (std::int64_t h = 0; h < kHidden; ++h)
        EXPECT_EQ(grad[at(b, s, h, kRows)],
                  n * (n + 1) / 2.0 * static_cast<double>(at(b, tp.rank() * kRows + s, h, seq)));
}

TEST(SequenceParallel, ReduceScatterSumsThisRanksRowsAndGathersTheGradient) {
  const comm::Communicator& tp = test::world();
  const int n = tp.size();
  const std::int64_t seq = kRows * n;
  const Tensor index =
      autograd::reshape(autograd::arange(kBatch * seq * kHidden), {kBatch, seq, kHidden});
  Tensor partial = autograd::scale(index, tp.rank() + 1.0).detach().set_requires_grad();
  const Tensor rows = reduce_scatter_to_sequence_parallel_region(partial, tp);
  ASSERT_EQ(rows.shape(), (autograd::Shape{kBatch, kRows, kHidden}));
  const std::vector<double> values = rows.to_vector();
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::int64_t s = 0; s < kRows; ++s)
      for (std::int64_t h = 0; h < kHidden; ++h)
        EXPECT_EQ(values[at(b, s, h, kRows)],
                  n * (n + 1) / 2.0 * static_cast<double>(at(b, tp.rank() * kRows + s, h, seq)));
  // Rank r's output gradient is r + 1 everywhere: row s of the input gradient comes from rank
  // s / kRows.
  autograd::sum(autograd::scale(rows, tp.rank() + 1.0)).backward();
  const std::vector<double> grad = partial.grad().to_vector();
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::int64_t s = 0; s < seq; ++s)
      EXPECT_EQ(grad[at(b, s, 0, seq)], s / kRows + 1.0);
}

TEST(SequenceParallel, ScatterKeepsThisRanksRowsAndGathersTheGradient) {
  const comm::Communicator& tp = test::world();
  const int n = tp.size();
  const std::int64_t seq = kRows * n;
  Tensor full = autograd::reshape(autograd::arange(kBatch * seq * kHidden), {kBatch, seq, kHidden})
                    .detach()
                    .set_requires_grad();
  const Tensor rows = scatter_to_sequence_parallel_region(full, tp);
  ASSERT_EQ(rows.shape(), (autograd::Shape{kBatch, kRows, kHidden}));
  const std::vector<double> values = rows.to_vector();
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::int64_t s = 0; s < kRows; ++s)
      EXPECT_EQ(values[at(b, s, 1, kRows)], at(b, tp.rank() * kRows + s, 1, seq));
  autograd::sum(autograd::scale(rows, tp.rank() + 1.0)).backward();
  const std::vector<double> grad = full.grad().to_vector();
  for (std::int64_t b = 0; b < kBatch; ++b)
    for (std::int64_t s = 0; s < seq; ++s)
      EXPECT_EQ(grad[at(b, s, 2, seq)], s / kRows + 1.0);
}

TEST(SequenceParallel, RejectsASequenceNotDivisibleByTp) {
  const comm::Communicator& tp = test::world();
  if (tp.size() == 1) GTEST_SKIP() << "every sequence divides over one rank";
  const Tensor x = Tensor::zeros({kBatch, tp.size() + 1, kHidden});
  EXPECT_THROW(reduce_scatter_to_sequence_parallel_region(x, tp), std::invalid_argument);
  EXPECT_THROW(scatter_to_sequence_parallel_region(x, tp), std::invalid_argument);
  EXPECT_THROW(gather_from_sequence_parallel_region(Tensor::zeros({kBatch, kHidden}), tp),
               std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::nn
