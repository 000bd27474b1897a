// Activation recomputation (autograd/recompute.h): the same values and gradients as the plain
// graph (the recomputed forward runs the same ops in the same order, so float64 results agree
// to the last bits; EXPECT_DOUBLE_EQ allows 4 ulp), gradcheck through it, parameters reached when
// the input needs no gradient or backward runs with grad mode off, and less memory kept between
// forward and backward.
#include <gtest/gtest.h>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/recompute.h"
#include "autograd_test_support.h"
#include "kernels/allocator.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

// A two-layer MLP block with a residual: x + W2 gelu(W1 x).
Tensor block(const Tensor& x, const Tensor& w1, const Tensor& w2) {
  return add(x, linear(gelu(linear(x, w1)), w2));
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_TRUE(a.defined());
  ASSERT_TRUE(b.defined());
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  ASSERT_EQ(va.size(), vb.size());
  for (std::size_t i = 0; i < va.size(); ++i)
    EXPECT_DOUBLE_EQ(va[i], vb[i]) << i;
}

TEST(Recompute, MatchesThePlainGraphInValueAndGradients) {
  for (const bool x_needs_grad : {true, false}) {
    Tensor x = randn({3, 4, 8}, 1, 1.0, DType::f64);
    if (x_needs_grad) x.set_requires_grad();
    Tensor w1 = randn({16, 8}, 2, 0.5, DType::f64).set_requires_grad();
    Tensor w2 = randn({8, 16}, 3, 0.5, DType::f64).set_requires_grad();
    const Tensor plain = block(block(x, w1, w2), w1, w2);
    sum(mul(plain, plain)).backward();
    const Tensor dx = x_needs_grad ? x.grad() : Tensor(), dw1 = w1.grad(), dw2 = w2.grad();
    for (Tensor t : {x, w1, w2})
      t.set_grad(Tensor());
    const Recomputable layer = [&](const Tensor& in) { return block(in, w1, w2); };
    const Tensor recomputed = recompute(layer, recompute(layer, x));
    expect_same(recomputed, plain);
    sum(mul(recomputed, recomputed)).backward();
    expect_same(w1.grad(), dw1);
    expect_same(w2.grad(), dw2);
    if (x_needs_grad) {
      expect_same(x.grad(), dx);
    } else {
      EXPECT_FALSE(x.grad().defined());
    }
  }
}

// The recomputation records its graph even when backward is called with grad mode off, as the
// plain graph's backward works there too (torch.utils.checkpoint enables grad the same way).
TEST(Recompute, BackwardUnderNoGradGuardStillReachesTheParameters) {
  Tensor x = randn({3, 8}, 1, 1.0, DType::f64).set_requires_grad();
  Tensor w1 = randn({16, 8}, 2, 0.5, DType::f64).set_requires_grad();
  Tensor w2 = randn({8, 16}, 3, 0.5, DType::f64).set_requires_grad();
  sum(block(x, w1, w2)).backward();
  const Tensor dx = x.grad(), dw1 = w1.grad(), dw2 = w2.grad();
  for (Tensor t : {x, w1, w2})
    t.set_grad(Tensor());
  const Tensor loss = sum(recompute([&](const Tensor& in) { return block(in, w1, w2); }, x));
  {
    NoGradGuard no_grad;
    loss.backward();
    EXPECT_FALSE(grad_enabled());
  }
  expect_same(x.grad(), dx);
  expect_same(w1.grad(), dw1);
  expect_same(w2.grad(), dw2);
}

TEST(Recompute, PassesGradcheck) {
  const Inputs inputs{randn({2, 5}, 4, 1.0, DType::f64), randn({6, 5}, 5, 0.5, DType::f64),
                      randn({5, 6}, 6, 0.5, DType::f64)};
  EXPECT_TRUE(gradcheck_passes(
      [](const Inputs& in) {
        return recompute([&](const Tensor& x) { return block(x, in[1], in[2]); }, in[0]);
      },
      inputs));
}

TEST(Recompute, KeepsOnlyTheInputBetweenForwardAndBackward) {
  const Tensor x = randn({64, 32}, 7, 1.0, DType::f64);
  Tensor w1 = randn({128, 32}, 8, 0.2, DType::f64).set_requires_grad();
  Tensor w2 = randn({32, 128}, 9, 0.2, DType::f64).set_requires_grad();
  const auto kept = [&](bool recomputed) {
    const std::size_t before = kernels::allocator_stats(kernels::Device::cpu).in_use_bytes;
    const Recomputable layer = [&](const Tensor& in) { return block(in, w1, w2); };
    const Tensor y = recomputed ? recompute(layer, x) : layer(x);
    return kernels::allocator_stats(kernels::Device::cpu).in_use_bytes - before;
  };
  // Plain: the output plus W1 x and gelu(W1 x) ([64, 128] each) and the second product; with
  // recomputation only the output ([64, 32] float64 = 16 KiB) stays.
  EXPECT_EQ(kept(true), 64u * 32 * 8);
  EXPECT_GE(kept(false), 64u * 32 * 8 + 2 * 64u * 128 * 8);
}

}  // namespace
}  // namespace mpitron::test
