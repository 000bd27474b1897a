// DP gradient averaging (flat buffer, buckets overlapped with backward) with rank-valued data
// (exact closed forms), and SGD against hand-computed
// updates.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "autograd/recompute.h"
#include "nn/optim/sgd.h"
#include "nn/parallel/data_parallel.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::Tensor;

TEST(DataParallelGradients, AveragesTheGradientsItFindsAndLeavesViews) {
  const comm::Communicator& dp = test::world();
  const double n = dp.size();
  Tensor a = Tensor::zeros({2, 3}).set_requires_grad();
  Tensor b = Tensor::zeros({5}).set_requires_grad();
  Tensor unused = Tensor::zeros({4}).set_requires_grad();
  a.set_grad(Tensor::full({2, 3}, dp.rank() + 1.0));
  b.set_grad(Tensor::full({5}, 2.0 * dp.rank()));
  {
    DataParallelGradients gradients({{"a", a}, {"b", b}, {"unused", unused}}, dp);
    EXPECT_EQ(gradients.bucket_count(), 1u);
    gradients.finish();
  }
  for (double g : a.grad().to_vector())
    EXPECT_EQ(g, (n + 1) / 2);  // mean of 1..n
  for (double g : b.grad().to_vector())
    EXPECT_EQ(g, n - 1);  // mean of 0, 2, .., 2(n-1)
  for (double g : unused.grad().to_vector())
    EXPECT_EQ(g, 0.0);
}

// --grad-reduce-in-bf16: the gradients travel as bfloat16. Integers below 256 survive exactly;
// 1 + (rank + 1) 2^-10 rounds to 1 on every rank (bfloat16 keeps 7 fraction bits), so the mean
// is exactly 1 where a float32 reduction gives 1 + (n + 1) 2^-11. One replica reduces nothing.
TEST(DataParallelGradients, ABfloat16WireRoundsTheGradientsItAverages) {
  const comm::Communicator& dp = test::world();
  const double n = dp.size();
  Tensor a = Tensor::zeros({3}).set_requires_grad();
  Tensor b = Tensor::zeros({4}).set_requires_grad();
  a.set_grad(Tensor::full({3}, dp.rank() + 1.0));
  b.set_grad(Tensor::full({4}, 1.0 + (dp.rank() + 1.0) * 0x1p-10));
  {
    DataParallelGradients gradients({{"a", a}, {"b", b}}, dp, 2, {}, comm::Wire::bf16);
    gradients.finish();
  }
  for (double g : a.grad().to_vector())
    EXPECT_EQ(g, (n + 1) / 2);
  for (double g : b.grad().to_vector())
    EXPECT_EQ(g, dp.size() == 1 ? 1.0 + 0x1p-10 : 1.0);
  Tensor c = Tensor::zeros({2}, autograd::DType::f64).set_requires_grad();
  EXPECT_THROW(DataParallelGradients({{"c", c}}, dp, 2, {}, comm::Wire::bf16),
               std::invalid_argument);
}

// loss = sum_i sum(w_i * x_i) with x_i = (rank + 1) * (i + 1) * pass: d loss / d w_i = x_i, so
// after passes 1..P the averaged gradient of w_i is (i + 1) * (n + 1) / 2 * P (P + 1) / 2.
TEST(DataParallelGradients, BucketsStartDuringBackwardAndAccumulateInPlace) {
  const comm::Communicator& dp = test::world();
  const double n = dp.size();
  Parameters parameters;
  for (int i = 0; i < 4; ++i) {
    parameters.push_back(
        {fmt::format("w{}", i), Tensor::zeros({3 + i}, autograd::DType::f64).set_requires_grad()});
  }
  DataParallelGradients gradients(parameters, dp, /*bucket_elements=*/5);
  EXPECT_EQ(gradients.bucket_count(), 3u);  // w3 (6) | w2 (5) | w1, w0 (4 + 3)
  EXPECT_EQ(gradients.bucket_elements(0), 6u);
  const int passes = 3;
  for (int step = 0; step < 2; ++step) {
    gradients.zero();
    gradients.set_backward_passes(passes);
    const void* storage = parameters[0].tensor.grad().buffer().data();
    for (int pass = 1; pass <= passes; ++pass) {
      Tensor loss = Tensor::zeros({}, autograd::DType::f64);
      for (int i = 0; i < 4; ++i) {
        const Tensor x = Tensor::full(parameters[i].tensor.shape(),
                                      (dp.rank() + 1.0) * (i + 1) * pass, autograd::DType::f64);
        loss = autograd::add(loss, autograd::sum(autograd::mul(parameters[i].tensor, x)));
      }
      loss.backward();
      EXPECT_EQ(gradients.buckets_started(), pass == passes && n > 1 ? 3u : 0u);
    }
    gradients.finish();
    EXPECT_EQ(parameters[0].tensor.grad().buffer().data(), storage);  // accumulated in place
    for (int i = 0; i < 4; ++i) {
      for (double g : parameters[i].tensor.grad().to_vector())
        EXPECT_DOUBLE_EQ(g, (i + 1) * (n + 1) / 2 * passes * (passes + 1) / 2) << i;
    }
  }
}

// A frozen parameter (no requires_grad, so no hook) in a bucket does not hold it back until
// finish: the bucket starts as soon as backward has made the trainable one's gradient final.
TEST(DataParallelGradients, AFrozenParameterDoesNotHoldItsBucketBack) {
  const comm::Communicator& dp = test::world();
  const double n = dp.size();
  Tensor trainable = Tensor::zeros({4}, autograd::DType::f64).set_requires_grad();
  Tensor frozen = Tensor::zeros({3}, autograd::DType::f64);
  DataParallelGradients gradients({{"trainable", trainable}, {"frozen", frozen}}, dp);
  ASSERT_EQ(gradients.bucket_count(), 1u);
  gradients.zero();
  const Tensor x = Tensor::full({4}, dp.rank() + 1.0, autograd::DType::f64);
  const Tensor y = Tensor::full({3}, 1.0, autograd::DType::f64);
  autograd::add(autograd::sum(autograd::mul(trainable, x)), autograd::sum(autograd::mul(frozen, y)))
      .backward();
  EXPECT_EQ(gradients.buckets_started(), n > 1 ? 1u : 0u);
  gradients.finish();
  for (double g : trainable.grad().to_vector())
    EXPECT_EQ(g, (n + 1) / 2);  // mean of 1..n
  for (double g : frozen.grad().to_vector())
    EXPECT_EQ(g, 0.0);
}

// A bucket larger than one all-reduce piece: its pieces (two whole, one ragged) and the next
// bucket's run at most kMaxInFlight at a time; every element gets the mean of
// (rank + 1) * (j % 7 + 1), which is exact in float64.
TEST(DataParallelGradients, BucketsLargerThanAPieceAverageEveryElement) {
  const comm::Communicator& dp = test::world();
  const double n = dp.size();
  const auto big_numel = static_cast<std::int64_t>(2 * DataParallelGradients::kPieceElements + 7);
  Tensor big = Tensor::zeros({big_numel}, autograd::DType::f64).set_requires_grad();
  Tensor small = Tensor::zeros({3}, autograd::DType::f64).set_requires_grad();
  DataParallelGradients gradients({{"small", small}, {"big", big}}, dp, /*bucket_elements=*/4);
  ASSERT_EQ(gradients.bucket_count(), 2u);  // big | small
  std::vector<double> x(static_cast<std::size_t>(big_numel));
  for (std::size_t j = 0; j < x.size(); ++j)
    x[j] = (dp.rank() + 1.0) * static_cast<double>(j % 7 + 1);
  const Tensor loss = autograd::add(
      autograd::sum(autograd::mul(big, Tensor::from_vector(x, {big_numel}, autograd::DType::f64))),
      autograd::sum(autograd::scale(small, dp.rank() + 1.0)));
  loss.backward();
  gradients.finish();
  const std::vector<double> g = big.grad().to_vector();
  for (std::size_t j = 0; j < g.size(); ++j) {
    ASSERT_DOUBLE_EQ(g[j], static_cast<double>(j % 7 + 1) * (n + 1) / 2) << j;
  }
  for (double v : small.grad().to_vector())
    EXPECT_DOUBLE_EQ(v, (n + 1) / 2);
}

TEST(DataParallelGradients, MoreBackwardPassesThanSetIsAnError) {
  const comm::Communicator& dp = test::world();
  if (dp.size() == 1) GTEST_SKIP() << "one replica reduces nothing";
  Tensor w = Tensor::zeros({2}).set_requires_grad();
  DataParallelGradients gradients({{"w", w}}, dp);
  autograd::sum(w).backward();
  EXPECT_THROW(autograd::sum(w).backward(), std::logic_error);
  gradients.finish();
}

// A gradient the user replaced (set_grad, e.g. cleared to none as torch's zero_grad does) is
// still averaged: the bucket takes its values back into the flat buffer (PyTorch DDP's reducer
// copies such a gradient into its bucket view the same way), and `zero` clears it.
TEST(DataParallelGradients, TakesBackGradientsReplacedBySetGrad) {
  const comm::Communicator& dp = test::world();
  const double n = dp.size();
  Tensor w = Tensor::zeros({3}, autograd::DType::f64).set_requires_grad();
  Tensor v = Tensor::zeros({2}, autograd::DType::f64).set_requires_grad();
  DataParallelGradients gradients({{"w", w}, {"v", v}}, dp);
  const void* storage = w.grad().buffer().data();
  for (int step = 0; step < 2; ++step) {
    w.set_grad(Tensor());  // backward makes a new gradient tensor
    v.set_grad(Tensor::full({2}, 2.0 * dp.rank(), autograd::DType::f64));  // no backward reaches v
    const Tensor x = Tensor::full({3}, dp.rank() + 1.0, autograd::DType::f64);
    autograd::sum(autograd::mul(w, x)).backward();
    gradients.finish();
    for (double g : w.grad().to_vector())
      EXPECT_EQ(g, (n + 1) / 2);  // mean of 1..n
    for (double g : v.grad().to_vector())
      EXPECT_EQ(g, n - 1);  // mean of 0, 2, .., 2(n-1)
    EXPECT_EQ(w.grad().buffer().data(), storage);
    gradients.zero();
    for (double g : w.grad().to_vector())
      EXPECT_EQ(g, 0.0);
  }
}

// A parameter used by two recomputed regions receives its gradient in two inner backward
// passes, so its hook fires twice per pass (PyTorch DDP with reentrant checkpointing fails the
// same way): the second firing must be an error that names the cause, not a silent average of
// half a gradient.
TEST(DataParallelGradients, AParameterSharedByTwoRecomputedRegionsIsAnErrorNamingTheCause) {
  const comm::Communicator& dp = test::world();
  if (dp.size() == 1) GTEST_SKIP() << "one replica reduces nothing";
  Tensor w = Tensor::full({2, 2}, 0.5, autograd::DType::f64).set_requires_grad();
  DataParallelGradients gradients({{"w", w}}, dp);
  const autograd::Recomputable layer = [&](const Tensor& in) { return autograd::linear(in, w); };
  const Tensor x = Tensor::full({1, 2}, 1.0, autograd::DType::f64);
  const Tensor loss = autograd::sum(autograd::recompute(layer, autograd::recompute(layer, x)));
  try {
    loss.backward();
    ADD_FAILURE() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("recompute"), std::string::npos) << e.what();
  }
  gradients.finish();
}

TEST(DataParallelGradients, RejectsMixedDtypesAndZeroBuckets) {
  const comm::Communicator& dp = test::world();
  Tensor a = Tensor::zeros({2}).set_requires_grad();
  Tensor b = Tensor::zeros({2}, autograd::DType::f64).set_requires_grad();
  EXPECT_THROW(DataParallelGradients({{"a", a}, {"b", b}}, dp), std::invalid_argument);
  EXPECT_THROW(DataParallelGradients({{"a", a}}, dp, 0), std::invalid_argument);
  DataParallelGradients gradients({{"a", a}}, dp);
  EXPECT_THROW(gradients.set_backward_passes(0), std::invalid_argument);
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
  const void* storage = p.grad().buffer().data();
  sgd.zero_grad();  // in place: the gradient's storage stays
  EXPECT_EQ(p.grad().buffer().data(), storage);
  EXPECT_EQ(p.grad().to_vector(), std::vector<double>(3, 0.0));
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
