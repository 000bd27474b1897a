// The GPipe pipeline schedule over a PP group spanning the world, against the dense stack.
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "comm/topology.h"
#include "nn/mlp.h"
#include "nn/pipeline.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::DType;
using autograd::Tensor;

std::vector<Mlp> layers(const std::vector<MlpWeights>& weights, std::size_t first,
                        std::size_t count) {
  return {weights.begin() + first, weights.begin() + first + count};
}

Tensor run(const std::vector<Mlp>& stack, Tensor x) {
  for (const Mlp& layer : stack)
    x = layer.forward(x);
  return x;
}

class Pipeline : public ::testing::TestWithParam<int> {};

// Float64: the pipeline does the same operations as the dense stack, only split across ranks and
// micro-batches, so results agree to rounding (1e-12).
TEST_P(Pipeline, TrainStepMatchesTheDenseStack) {
  const int micro_batches = GetParam();
  const comm::ParallelTopology topology(test_world(), 1, test_world().size(), 1);
  const std::size_t per_stage = 2, total = per_stage * static_cast<std::size_t>(topology.pp());
  std::vector<MlpWeights> weights;
  for (std::size_t i = 0; i < total; ++i) {
    weights.push_back(make_mlp_weights(6, 10, 100 + i, 200 + i, DType::f64, autograd::Device::cpu));
  }
  const std::size_t first = per_stage * static_cast<std::size_t>(topology.pp_rank());
  const auto stage = layers(weights, first, per_stage);
  const auto dense = layers(weights, 0, total);
  const Tensor input = autograd::randn({4, 3, 6}, 1, 1.0, DType::f64);
  const Tensor target = autograd::randn({4, 3, 6}, 2, 1.0, DType::f64);
  const PipelineShape shape{{4, 3, 6}, micro_batches, DType::f64, autograd::Device::cpu};
  const auto forward = [&stage](const Tensor& x) { return run(stage, x); };

  const PipelineResult result = pipeline_train_step(topology, shape, forward, input, target);
  const Tensor inference = pipeline_inference(topology, shape, forward, input);
  const Tensor expected = run(dense, input);
  const Tensor expected_loss = autograd::mse_loss(expected, target);
  expected_loss.backward();

  if (topology.is_last_stage()) {
    expect_close(result.output, expected.detach(), 1e-12);
    expect_close(inference, expected.detach(), 1e-12);
    expect_close(result.loss, expected_loss.detach(), 1e-12);
  } else {
    EXPECT_FALSE(result.output.defined());
    EXPECT_FALSE(inference.defined());
  }
  for (std::size_t i = 0; i < per_stage; ++i) {
    const Parameters mine = stage[i].parameters(), reference = dense[first + i].parameters();
    for (std::size_t j = 0; j < mine.size(); ++j) {
      SCOPED_TRACE(mine[j].name);
      expect_close(mine[j].tensor.grad(), reference[j].tensor.grad(), 1e-12);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MicroBatches, Pipeline, ::testing::Values(1, 2, 4));

TEST(PipelineShapes, IndivisibleMicroBatchesAreRejected) {
  const comm::ParallelTopology topology(test_world(), 1, test_world().size(), 1);
  const PipelineShape shape{{4, 3, 6}, 3, DType::f64, autograd::Device::cpu};
  EXPECT_THROW(
      pipeline_inference(
          topology, shape, [](const Tensor& x) { return x; }, Tensor::zeros({4, 3, 6}, DType::f64)),
      std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::nn
