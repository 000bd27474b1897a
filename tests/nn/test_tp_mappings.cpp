// The TP mappings and parallel linear layers against closed forms and dense layers, on every
// rank of a TP group spanning the world.
#include <gtest/gtest.h>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/layers/linear.h"
#include "nn/layers/mlp.h"
#include "nn/layers/tp_mappings.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::DType;
using autograd::Tensor;

TEST(TpMappings, CopyToTpSumsInputGradientsOverTheGroup) {
  const comm::Communicator& tp = test::world();
  Tensor x = Tensor::full({2, 3}, 1.0).set_requires_grad();
  const Tensor y = copy_to_tp(x, tp);
  EXPECT_EQ(y.to_vector(), x.to_vector());
  // Rank r contributes (r + 1) to every element of the gradient: the sum is n(n+1)/2 exactly.
  autograd::sum(autograd::scale(y, tp.rank() + 1.0)).backward();
  const double n = tp.size();
  for (double g : x.grad().to_vector())
    EXPECT_EQ(g, n * (n + 1) / 2);
}

TEST(TpMappings, ReduceFromTpSumsForwardAndPassesGradientThrough) {
  const comm::Communicator& tp = test::world();
  Tensor x = Tensor::full({4}, tp.rank() + 1.0).set_requires_grad();
  const Tensor y = reduce_from_tp(x, tp);
  const double n = tp.size();
  for (double v : y.to_vector())
    EXPECT_EQ(v, n * (n + 1) / 2);
  autograd::sum(autograd::scale(y, 3.0)).backward();
  for (double g : x.grad().to_vector())
    EXPECT_EQ(g, 3.0);
}

TEST(TpMappings, GatherAndScatterAreInversesAlongTheLastDim) {
  const comm::Communicator& tp = test::world();
  const int n = tp.size();
  Tensor shard = Tensor::full({2, 3}, tp.rank()).set_requires_grad();
  const Tensor full = gather_from_tp(shard, tp);
  ASSERT_EQ(full.shape(), (autograd::Shape{2, 3 * n}));
  const std::vector<double> values = full.to_vector();
  for (int row = 0; row < 2; ++row) {
    for (int col = 0; col < 3 * n; ++col)
      EXPECT_EQ(values[row * 3 * n + col], col / 3);
  }
  // d/d shard of sum(full * w) is this rank's columns of w.
  const Tensor w = autograd::reshape(autograd::arange(2 * 3 * n), {2, 3 * n});
  autograd::sum(autograd::mul(full, w)).backward();
  const std::vector<double> grad = shard.grad().to_vector();
  for (int row = 0; row < 2; ++row) {
    for (int col = 0; col < 3; ++col) {
      EXPECT_EQ(grad[row * 3 + col], row * 3 * n + tp.rank() * 3 + col);
    }
  }

  Tensor whole = Tensor::from_vector(w.to_vector(), {2, 3 * n}).set_requires_grad();
  const Tensor mine = scatter_to_tp(whole, tp);
  {
    autograd::NoGradGuard no_grad;
    EXPECT_EQ(mine.to_vector(), autograd::narrow(w, 1, tp.rank() * 3, 3).to_vector());
  }
  // Each rank's gradient of its own shard is (rank + 1); the all-gathered gradient has rank r's
  // value in block r.
  autograd::sum(autograd::scale(mine, tp.rank() + 1.0)).backward();
  const std::vector<double> gathered = whole.grad().to_vector();
  for (int col = 0; col < 3 * n; ++col)
    EXPECT_EQ(gathered[col], col / 3 + 1.0);
}

TEST(TpMappings, ScatterRejectsAnIndivisibleLastDim) {
  const comm::Communicator& tp = test::world();
  if (tp.size() == 1) GTEST_SKIP() << "every size divides by 1";
  EXPECT_THROW(scatter_to_tp(Tensor::zeros({2, tp.size() + 1}), tp), std::invalid_argument);
}

// Both layers compute the dense layer's dot products, only split differently: column-parallel
// shards the output (the GEMM may block a narrower output differently, changing FMA/accumulation
// order), row-parallel splits each dot product in tp partial sums. Rounding differences are
// bounded by ~K eps sum|x w| with K = 4 tp <= 16 terms of |x w| ~ 1 in float32 (eps 6e-8), so
// 1e-5 absolute is ample, while a wrong shard or a missing partial sum is off by O(1).
TEST(ParallelLinear, ColumnAndRowParallelMatchTheDenseLayer) {
  const comm::Communicator& tp = test::world();
  const auto weights =
      make_linear_weights(8 * tp.size(), 4 * tp.size(), 7, DType::f32, autograd::Device::cpu);
  const Tensor x = autograd::randn({3, 5, 4 * tp.size()}, 8);
  const Linear dense(weights);
  const std::vector<double> reference = dense.forward(x).to_vector();
  const ColumnParallelLinear column(weights, tp, /*gather_output=*/true);
  const RowParallelLinear row(weights, tp, /*input_is_parallel=*/false);
  for (const std::vector<double>& actual :
       {column.forward(x).to_vector(), row.forward(x).to_vector()}) {
    ASSERT_EQ(actual.size(), reference.size());
    for (std::size_t i = 0; i < actual.size(); ++i)
      EXPECT_NEAR(actual[i], reference[i], 1e-5);
  }
}

TEST(ParallelLinear, IndivisibleFeaturesAreRejectedWithTheNumbers) {
  const comm::Communicator& tp = test::world();
  if (tp.size() == 1) GTEST_SKIP() << "every size divides by 1";
  const auto weights = make_linear_weights(tp.size() + 1, 4, 1, DType::f32, autograd::Device::cpu);
  try {
    ColumnParallelLinear layer(weights, tp, false);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is not divisible by tp"), std::string::npos) << e.what();
  }
}

// Mlp runs autograd::fused_mlp; its output and every parameter's gradient are those of the
// unfused fc2(gelu(fc1(x))) on copies of the same weights. The same kernels run in the same order,
// so float64 agrees far below 1e-12.
TEST(Mlp, IsLinearGeluLinearOfItsWeights) {
  const auto weights = make_mlp_weights(8, 12, 3, 4, DType::f64, autograd::Device::cpu);
  const Mlp mlp(weights);
  const auto leaf = [](const Tensor& t) { return t.detach().clone().set_requires_grad(); };
  const Tensor w1 = leaf(weights.fc1.weight), b1 = leaf(weights.fc1.bias);
  const Tensor w2 = leaf(weights.fc2.weight), b2 = leaf(weights.fc2.bias);
  Tensor x1 = autograd::randn({2, 3, 8}, 5, 1.0, DType::f64).set_requires_grad();
  Tensor x2 = x1.detach().clone().set_requires_grad();
  const Tensor y1 = mlp.forward(x1);
  const Tensor y2 = autograd::linear(autograd::gelu(autograd::linear(x2, w1, b1)), w2, b2);
  const Tensor dy = autograd::randn({2, 3, 8}, 6, 1.0, DType::f64);
  y1.backward(dy);
  y2.backward(dy);
  test::expect_close(y1, y2, 1e-12);
  test::expect_close(x1.grad(), x2.grad(), 1e-12);
  const Parameters p = mlp.parameters();
  ASSERT_EQ(p.size(), 4u);
  test::expect_close(p[0].tensor.grad(), w1.grad(), 1e-12);
  test::expect_close(p[1].tensor.grad(), b1.grad(), 1e-12);
  test::expect_close(p[2].tensor.grad(), w2.grad(), 1e-12);
  test::expect_close(p[3].tensor.grad(), b2.grad(), 1e-12);
}

// Float64 so the TP and dense gradients agree to summation-order rounding (~1e-15 relative).
TEST(ParallelMlp, ForwardAndGradientsMatchTheDenseMlp) {
  const comm::Communicator& tp = test::world();
  const auto weights = make_mlp_weights(8, 4 * tp.size(), 3, 4, DType::f64, autograd::Device::cpu);
  const ParallelMlp parallel(weights, tp);
  const Mlp dense(weights);
  Tensor x1 = autograd::randn({2, 3, 8}, 5, 1.0, DType::f64).set_requires_grad();
  Tensor x2 = x1.detach().clone().set_requires_grad();
  const Tensor target = autograd::randn({2, 3, 8}, 6, 1.0, DType::f64);
  autograd::mse_loss(parallel.forward(x1), target).backward();
  autograd::mse_loss(dense.forward(x2), target).backward();
  test::expect_close(x1.grad(), x2.grad(), 1e-12);
  const Parameters p = parallel.parameters(), d = dense.parameters();
  const int t = tp.rank(), width = 4;
  autograd::NoGradGuard no_grad;
  test::expect_close(p[0].tensor.grad(), autograd::narrow(d[0].tensor.grad(), 0, t * width, width),
                     1e-12);
  test::expect_close(p[1].tensor.grad(), autograd::narrow(d[1].tensor.grad(), 0, t * width, width),
                     1e-12);
  test::expect_close(p[2].tensor.grad(), autograd::narrow(d[2].tensor.grad(), 1, t * width, width),
                     1e-12);
  test::expect_close(p[3].tensor.grad(), d[3].tensor.grad(), 1e-12);
}

}  // namespace
}  // namespace mpitron::nn
