// DP gradient averaging with rank-valued data (exact closed forms), and SGD against hand-computed
// updates.
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "nn/data_parallel.h"
#include "nn/sgd.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::Tensor;

TEST(GradientAverager, AveragesEveryParameterWithOneFlatReduction) {
  const comm::Communicator& dp = test_world();
  const double n = dp.size();
  Tensor a = Tensor::zeros({2, 3}).set_requires_grad();
  Tensor b = Tensor::zeros({5}).set_requires_grad();
  Tensor unused = Tensor::zeros({4}).set_requires_grad();
  a.set_grad(Tensor::full({2, 3}, dp.rank() + 1.0));
  b.set_grad(Tensor::full({5}, 2.0 * dp.rank()));
  GradientAverager averager(dp);
  for (int step = 0; step < 2; ++step) {  // the flat buffer is reused on the second call
    averager.average({{"a", a}, {"b", b}, {"unused", unused}});
    for (double g : a.grad().to_vector())
      EXPECT_EQ(g, (n + 1) / 2);  // mean of 1..n
    for (double g : b.grad().to_vector())
      EXPECT_EQ(g, n - 1);  // mean of 0, 2, .., 2(n-1)
    for (double g : unused.grad().to_vector())
      EXPECT_EQ(g, 0.0);
  }
}

TEST(Sgd, PlainStepSubtractsLrTimesGradient) {
  Tensor p = Tensor::from_vector({1.0, -2.0, 0.5}, {3}).set_requires_grad();
  p.set_grad(Tensor::from_vector({0.5, 0.25, -1.0}, {3}));
  Sgd sgd({{"p", p}}, 0.1);
  sgd.step();
  const std::vector<double> v = p.to_vector();
  EXPECT_FLOAT_EQ(v[0], 0.95f);
  EXPECT_FLOAT_EQ(v[1], -2.025f);
  EXPECT_FLOAT_EQ(v[2], 0.6f);
  sgd.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

// torch.optim.SGD with momentum m: v1 = g1, p1 = p0 - lr g1; v2 = m g1 + g2, p2 = p1 - lr v2.
TEST(Sgd, MomentumFollowsTorchSemantics) {
  Tensor p = Tensor::from_vector({1.0}, {1}, autograd::DType::f64).set_requires_grad();
  Sgd sgd({{"p", p}}, 0.5, 0.9);
  p.set_grad(Tensor::from_vector({2.0}, {1}, autograd::DType::f64));
  sgd.step();
  EXPECT_DOUBLE_EQ(p.item(), 0.0);
  p.set_grad(Tensor::from_vector({1.0}, {1}, autograd::DType::f64));
  sgd.step();
  EXPECT_DOUBLE_EQ(p.item(), -0.5 * (0.9 * 2.0 + 1.0));
}

TEST(Sgd, RejectsBadHyperparameters) {
  EXPECT_THROW(Sgd({}, 0.0), std::invalid_argument);
  EXPECT_THROW(Sgd({}, 0.1, 1.0), std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::nn
