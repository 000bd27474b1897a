// The sequence-parallel mappings (Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2)
// against closed forms, on every rank of a TP group spanning the world: activations
// [batch, seq, hidden] split along seq, rank r holding rows [r seq/tp, (r+1) seq/tp).
#include <gtest/gtest.h>

#include <stdexcept>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "comm/traffic.h"
#include "kernels/bf16.h"
#include "kernels/ops.h"
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

// A float32 value that bfloat16 does not hold, different on each rank and row.
double unrounded(std::int64_t rank, std::size_t i) {
  return static_cast<double>(static_cast<float>(1.0 / 3.0 + 0.01 * static_cast<double>(i) +
                                                0.1 * static_cast<double>(rank)));
}

double bf16_rounded(double x) {
  return kernels::bf16_to_float(kernels::to_bf16(static_cast<float>(x)));
}

// With bfloat16 GEMM operands (train --bf16) the gathers whose result only GEMMs read travel as
// bfloat16: the gathered input of a column-parallel layer holds every rank's rows rounded to
// bfloat16, so a GEMM on it gives exactly the bits of the same GEMM on the unrounded rows; and
// the gradient gathered for a row-parallel layer is rounded alike. With float32 operands nothing
// is rounded. The traffic count shows the halved payload.
TEST(SequenceParallel, WithBfloat16OperandsTheGathersForGemmsCarryBfloat16) {
  const comm::Communicator& tp = test::world();
  const int n = tp.size();
  const std::int64_t seq = kRows * n;
  const std::size_t shard_numel = kBatch * kRows * kHidden;
  // Rank r's shard and, built locally, the whole unrounded [kBatch, seq, kHidden] input.
  const auto shard_of = [&](std::int64_t rank) {
    std::vector<double> values(shard_numel);
    for (std::size_t i = 0; i < shard_numel; ++i)
      values[i] = unrounded(rank, i);
    return Tensor::from_vector(values, {kBatch, kRows, kHidden});
  };
  std::vector<Tensor> shards;
  for (int r = 0; r < n; ++r)
    shards.push_back(shard_of(r));
  const Tensor dense = autograd::concat(shards, 1);
  const Tensor weight =
      autograd::reshape(autograd::scale(autograd::arange(5 * kHidden), 1.0 / 7.0), {5, kHidden});
  for (const auto operands : {kernels::GemmOperands::float32, kernels::GemmOperands::bfloat16}) {
    const bool bf16 = operands == kernels::GemmOperands::bfloat16;
    SCOPED_TRACE(bf16 ? "bfloat16 operands" : "float32 operands");
    const kernels::GemmOperandsScope scope(operands);
    Tensor shard = shard_of(tp.rank()).set_requires_grad();
    const comm::Traffic before = comm::traffic();
    const Tensor full = gather_from_sequence_parallel_region(shard, tp);
    // The payload counted for the gather: this rank's shard, 2 bytes an element in bfloat16.
    const std::uint64_t sent = comm::traffic_since(before, comm::traffic())[tp.name()];
    EXPECT_EQ(sent, n == 1 ? 0u : shard_numel * (bf16 ? 2u : 4u));
    const std::vector<double> got = full.to_vector(), want = dense.to_vector();
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i], bf16 && n > 1 ? bf16_rounded(want[i]) : want[i]) << "element " << i;
    EXPECT_EQ(autograd::linear(full, weight).to_vector(),
              autograd::linear(dense, weight).to_vector());

    Tensor partial = Tensor::zeros({kBatch, seq, kHidden}).set_requires_grad();
    const Tensor rows = reduce_scatter_to_sequence_parallel_region(partial, tp);
    autograd::sum(autograd::mul(rows, shard_of(tp.rank()))).backward();
    const std::vector<double> grad = partial.grad().to_vector();
    for (std::size_t i = 0; i < grad.size(); ++i)
      EXPECT_EQ(grad[i], bf16 && n > 1 ? bf16_rounded(want[i]) : want[i]) << "gradient " << i;
  }
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
