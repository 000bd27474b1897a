// The distributed optimizer's gradient buffer (ZeRO stage 1): shards that tile every parameter,
// a reduce-scatter that leaves the mean in each rank's shard, the all-gather of parameters and of
// sharded state, and a sharded AdamW step that equals the unsharded one. Rank-valued data in
// float64, so every expected value is exact.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "comm/agreement.h"
#include "nn/optim/adamw.h"
#include "nn/parallel/data_parallel.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::Tensor;

// Sizes that cut across every bucket and block boundary; w2 gets a bucket of its own.
Parameters odd_parameters() {
  Parameters parameters;
  for (const std::int64_t n : {7, 5, 13, 3}) {
    parameters.push_back({fmt::format("w{}", parameters.size()),
                          Tensor::zeros({n}, autograd::DType::f64).set_requires_grad()});
  }
  return parameters;
}

const GradientSharding kSharding{true, {"w2"}};
constexpr std::size_t kBucketElements = 8;

// With messages of at most 2 elements, each block's reduction is cut into several MPI_Ireduce
// messages.
class DistributedOptimizerMessages : public ::testing::TestWithParam<std::size_t> {};

TEST_P(DistributedOptimizerMessages, ShardsTileEveryParameterAndHoldTheMean) {
  comm::Communicator dp = test::world().split(0, test::world().rank(), "sharded");
  dp.set_max_message_elements(GetParam());
  const double n = dp.size();
  Parameters parameters = odd_parameters();
  for (Parameter& p : parameters) {
    std::vector<double> g(static_cast<std::size_t>(p.tensor.numel()));
    for (std::size_t j = 0; j < g.size(); ++j)
      g[j] = (dp.rank() + 1.0) * static_cast<double>(j + 1);
    p.tensor.set_grad(Tensor::from_vector(g, p.tensor.shape(), autograd::DType::f64));
  }
  DataParallelGradients gradients(parameters, dp, kBucketElements, kSharding);
  EXPECT_EQ(gradients.sharded(), dp.size() > 1);
  if (gradients.sharded()) {
    // w3 (3) | w2 (13, alone) | w1 (5) + w0 (7), each bucket padded to a multiple of dp.
    const auto padded = [&](std::size_t count) {
      const auto size = static_cast<std::size_t>(dp.size());
      return (count + size - 1) / size * size;
    };
    ASSERT_EQ(gradients.bucket_count(), 3u);
    EXPECT_EQ(gradients.bucket_elements(0), padded(3));
    EXPECT_EQ(gradients.bucket_elements(1), padded(13));
    EXPECT_EQ(gradients.bucket_elements(2), padded(12));
  }
  gradients.finish();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const ElementRange range = gradients.owned()[i];
    const std::vector<double> begins =
        comm::all_gather_scalar(dp, static_cast<double>(range.begin));
    const std::vector<double> ends = comm::all_gather_scalar(dp, static_cast<double>(range.end));
    double covered = 0.0;
    for (int r = 0; r < dp.size(); ++r) {
      covered += ends[r] - begins[r];
      if (r > 0 && ends[r] > begins[r]) {
        EXPECT_GE(begins[r], ends[r - 1]) << "rank " << r;  // rank order, no overlap
      }
    }
    EXPECT_EQ(covered, static_cast<double>(parameters[i].tensor.numel())) << parameters[i].name;
    const std::vector<double> g = parameters[i].tensor.grad().to_vector();
    for (std::int64_t j = range.begin; j < range.end; ++j)
      EXPECT_EQ(g[static_cast<std::size_t>(j)], (n + 1) / 2 * static_cast<double>(j + 1));
  }
}

INSTANTIATE_TEST_SUITE_P(Limits, DistributedOptimizerMessages,
                         ::testing::Values(std::size_t{2}, std::size_t{1} << 30));

TEST(DistributedOptimizer, AllGathersParametersAndShardedState) {
  const comm::Communicator& dp = test::world();
  Parameters parameters = odd_parameters();
  DataParallelGradients gradients(parameters, dp, kBucketElements, kSharding);
  std::vector<Tensor> shards;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    // Each rank writes j + 0.5 into the elements it owns and -1 elsewhere; the all-gather must
    // replace every -1 with the owner's value.
    const ElementRange range = gradients.owned()[i];
    Tensor& p = parameters[i].tensor;
    std::vector<double> values(static_cast<std::size_t>(p.numel()), -1.0), shard;
    for (std::int64_t j = range.begin; j < range.end; ++j) {
      values[static_cast<std::size_t>(j)] = static_cast<double>(j) + 0.5;
      shard.push_back(10.0 * static_cast<double>(j));
    }
    kernels::copy(Tensor::from_vector(values, p.shape(), p.dtype()).buffer(), p.buffer());
    shards.push_back(Tensor::from_vector(shard, {range.size()}, p.dtype()));
  }
  gradients.all_gather_parameters();
  const std::vector<Tensor> full = gradients.all_gather_shards(shards);
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const std::vector<double> p = parameters[i].tensor.to_vector();
    const std::vector<double> f = full[i].to_vector();
    ASSERT_EQ(full[i].shape(), parameters[i].tensor.shape());
    for (std::size_t j = 0; j < p.size(); ++j) {
      EXPECT_EQ(p[j], static_cast<double>(j) + 0.5) << parameters[i].name << "[" << j << "]";
      EXPECT_EQ(f[j], 10.0 * static_cast<double>(j)) << parameters[i].name << "[" << j << "]";
    }
  }
  EXPECT_THROW(gradients.all_gather_shards({shards.front()}), std::invalid_argument);
}

// AdamW over the owned shards, then the all-gather, gives every replica the parameters that
// unsharded AdamW computes from the averaged gradient (the same element-wise update, so the
// same bits), over two steps with weight decay on a matrix.
TEST(DistributedOptimizer, ShardedAdamWStepEqualsTheUnshardedStep) {
  const comm::Communicator& dp = test::world();
  const double n = dp.size();
  const auto init = [](std::int64_t rows) {
    std::vector<double> v(static_cast<std::size_t>(rows * 3));
    for (std::size_t j = 0; j < v.size(); ++j)
      v[j] = 0.1 * static_cast<double>(j % 5) - 0.2;
    return Tensor::from_vector(v, {rows, 3}, autograd::DType::f64).set_requires_grad();
  };
  Parameters sharded = {{"a", init(3)}, {"b", init(5)}};
  Parameters dense = {{"a", init(3)}, {"b", init(5)}};
  DataParallelGradients gradients(sharded, dp, kBucketElements, kSharding);
  const AdamWOptions options{0.9, 0.99, 1e-8, 0.1};
  AdamW sharded_adamw(sharded, 1e-2, options,
                      gradients.sharded() ? gradients.owned() : std::vector<ElementRange>{});
  AdamW dense_adamw(dense, 1e-2, options);
  for (int step = 1; step <= 2; ++step) {
    gradients.zero();
    for (std::size_t i = 0; i < sharded.size(); ++i) {
      std::vector<double> g(static_cast<std::size_t>(sharded[i].tensor.numel())), mean(g.size());
      for (std::size_t j = 0; j < g.size(); ++j) {
        g[j] = (dp.rank() + 1.0) * static_cast<double>(j + step) / 8.0;
        mean[j] = (n + 1) / 2 * static_cast<double>(j + step) / 8.0;
      }
      const Shape& shape = sharded[i].tensor.shape();
      kernels::copy(Tensor::from_vector(g, shape, autograd::DType::f64).buffer(),
                    sharded[i].tensor.grad().buffer());
      dense[i].tensor.set_grad(Tensor::from_vector(mean, shape, autograd::DType::f64));
    }
    gradients.finish();
    sharded_adamw.step();
    gradients.all_gather_parameters();
    dense_adamw.step();
    for (std::size_t i = 0; i < sharded.size(); ++i)
      EXPECT_EQ(sharded[i].tensor.to_vector(), dense[i].tensor.to_vector()) << "step " << step;
  }
}

}  // namespace
}  // namespace mpitron::nn
