// The backward engine: gradient accumulation over several paths, seeding with a grad_output,
// freeing the graph after backward, post-accumulate hooks, flat views, NoGradGuard, detach,
// and proof that gradcheck fails on a wrong backward rule. Expected values
// are closed forms; every operand is float64 with small integer or dyadic values, so the
// closed forms are exact and the comparisons use EXPECT_DOUBLE_EQ (4 ulp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd_test_support.h"
#include "kernels/allocator.h"
#include "kernels/ops.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

Tensor leaf(const std::vector<double>& values, const Shape& shape) {
  return Tensor::from_vector(values, shape, DType::f64).set_requires_grad();
}

void expect_values(const Tensor& t, const std::vector<double>& expected) {
  ASSERT_TRUE(t.defined());
  const std::vector<double> got = t.to_vector();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_DOUBLE_EQ(got[i], expected[i]) << "at " << i;
}

TEST(Engine, AccumulatesALeafUsedTwice) {
  // y = x*x + x, dy/dx = 2x + 1 (x reaches y along three edges).
  Tensor x = leaf({-1.5, 0.0, 2.0, 3.25}, {4});
  sum(add(mul(x, x), x)).backward();
  expect_values(x.grad(), {-2.0, 1.0, 5.0, 7.5});
}

TEST(Engine, AccumulatesAnIntermediateUsedTwice) {
  // h = 3x; y = h*h + h; dy/dx = 3 (2h + 1): the engine must sum both paths into h's gradient
  // before running h's backward once.
  Tensor x = leaf({-1.0, 0.5, 2.0}, {3});
  const Tensor h = scale(x, 3.0);
  sum(add(mul(h, h), h)).backward();
  expect_values(x.grad(), {-15.0, 12.0, 39.0});
}

TEST(Engine, RepeatedBackwardAccumulatesIntoLeafGrad) {
  Tensor x = leaf({1.0, -2.0}, {2});
  sum(scale(x, 4.0)).backward();
  sum(scale(x, 4.0)).backward();
  expect_values(x.grad(), {8.0, 8.0});
}

TEST(Engine, BackwardFreesWhatTheGraphSavedAndRefusesASecondPass) {
  // y = sum(gelu(x W)): the product and gelu's input are saved for backward. After backward the
  // graph holds nothing: the allocator's in-use bytes drop back to what the caller still holds.
  const Tensor x = Tensor::full({64, 32}, 0.5, DType::f64);
  Tensor w = leaf(std::vector<double>(32 * 16, 0.25), {32, 16});
  w.set_grad(Tensor::zeros({32, 16}, DType::f64));
  const std::size_t before = kernels::allocator_stats(kernels::Device::cpu).in_use_bytes;
  Tensor y = sum(gelu(matmul(x, w)));
  EXPECT_GT(kernels::allocator_stats(kernels::Device::cpu).in_use_bytes, before + 64 * 16 * 8);
  y.backward();
  // Only the one-element loss remains (one 512-byte allocation class).
  EXPECT_LE(kernels::allocator_stats(kernels::Device::cpu).in_use_bytes, before + 512);
  EXPECT_THROW(y.backward(), std::logic_error);
}

// A new graph built on top of a differentiated one: the refusal comes before any op's backward
// runs, so no leaf has received part of the gradient when the error is thrown.
TEST(Engine, BackwardThroughADifferentiatedGraphChangesNoLeaf) {
  Tensor x = leaf({1.0, -2.0}, {2});
  Tensor w = leaf({3.0, 0.5}, {2});
  const Tensor y = scale(x, 2.0);
  sum(y).backward();
  const Tensor z = sum(mul(y, w));
  EXPECT_THROW(z.backward(), std::logic_error);
  EXPECT_FALSE(w.grad().defined());
  expect_values(x.grad(), {2.0, 2.0});
}

TEST(Engine, PostAccumulateHookFiresOncePerPassAfterTheLastUse) {
  // x is used three times; the hook must see the complete gradient 2x + 1 once per pass.
  Tensor x = leaf({-1.5, 2.0}, {2});
  std::vector<std::vector<double>> seen;
  x.set_post_accumulate_hook([&] { seen.push_back(x.grad().to_vector()); });
  sum(add(mul(x, x), x)).backward();
  sum(add(mul(x, x), x)).backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::vector<double>{-2.0, 5.0}));
  EXPECT_EQ(seen[1], (std::vector<double>{-4.0, 10.0}));
  x.set_post_accumulate_hook({});
  sum(x).backward();
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_THROW(mul(x, x).set_post_accumulate_hook([] {}), std::logic_error);
}

TEST(Engine, FlatViewsShareStorage) {
  Tensor flat = Tensor::zeros({6}, DType::f64);
  Tensor view = flat.flat_view(2, {2, 2});
  kernels::fill(view.buffer(), 3.0);
  expect_values(flat, {0.0, 0.0, 3.0, 3.0, 3.0, 3.0});
  EXPECT_THROW(flat.flat_view(3, {2, 2}), std::out_of_range);
  flat = Tensor();  // the view keeps the storage alive
  expect_values(view, {3.0, 3.0, 3.0, 3.0});
}

TEST(Engine, BackwardWithGradOutputSeedsTheVectorJacobianProduct) {
  // y = x*x, seeded with g: x.grad = 2 x g.
  Tensor x = leaf({1.0, -2.0, 0.5, 3.0, 0.0, -1.0}, {2, 3});
  const Tensor g = Tensor::from_vector({1.0, 0.5, -2.0, 0.25, 7.0, -1.0}, {2, 3}, DType::f64);
  mul(x, x).backward(g);
  expect_values(x.grad(), {2.0, -2.0, -2.0, 1.5, 0.0, 2.0});
}

TEST(Engine, BackwardOnALeafSeedsItsGradDirectly) {
  Tensor x = leaf({1.0, 2.0}, {2});
  x.backward(Tensor::from_vector({3.0, -4.0}, {2}, DType::f64));
  expect_values(x.grad(), {3.0, -4.0});
}

TEST(Engine, BackwardWithoutGradOutputNeedsOneElement) {
  const Tensor x = leaf({1.0, 2.0}, {2});
  EXPECT_THROW(scale(x, 2.0).backward(), std::logic_error);
  EXPECT_THROW(Tensor::zeros({}, DType::f64).backward(), std::logic_error);  // needs no grad
}

TEST(Engine, NoGradGuardRecordsNothingAndRestoresTheMode) {
  Tensor x = leaf({1.0, 2.0}, {2});
  {
    NoGradGuard outer;
    {
      NoGradGuard inner;
      EXPECT_FALSE(grad_enabled());
    }
    EXPECT_FALSE(grad_enabled());  // the inner guard restores "off", not "on"
    const Tensor y = mul(x, x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    expect_values(y, {1.0, 4.0});
  }
  EXPECT_TRUE(grad_enabled());
  const Tensor y = mul(x, x);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_NE(y.grad_fn(), nullptr);
}

TEST(Engine, DetachSharesStorageAndCutsTheGraph) {
  // y = detach(x) * x: only the second factor is differentiated, so dy/dx = x (not 2x).
  Tensor x = leaf({1.5, -2.0, 3.0}, {3});
  const Tensor d = x.detach();
  EXPECT_TRUE(d.is_leaf());
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(&d.buffer(), &x.buffer());
  sum(mul(d, x)).backward();
  expect_values(x.grad(), {1.5, -2.0, 3.0});
  EXPECT_FALSE(d.grad().defined());
}

TEST(Engine, ParametersThatDoNotRequireGradGetNone) {
  Tensor w = leaf({2.0, 3.0}, {2});
  const Tensor c = Tensor::from_vector({5.0, 7.0}, {2}, DType::f64);
  sum(mul(w, c)).backward();
  expect_values(w.grad(), {5.0, 7.0});
  EXPECT_FALSE(c.grad().defined());
}

// y = x * x through a user Function whose backward multiplies the right gradient 2 x dy by
// `factor`; factor 1 is correct. Shows the Function extension point and that gradcheck can fail.
class ScaledSquare final : public Function {
 public:
  ScaledSquare(Tensor x, double factor) : x_(std::move(x)), factor_(factor) {}
  std::string name() const override { return "scaled_square"; }
  std::vector<Tensor> backward(const Tensor& dy) override {
    Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    kernels::mul(dy.buffer(), x_.buffer(), dx.buffer());
    kernels::scale(dx.buffer(), 2.0 * factor_, dx.buffer());
    return {dx};
  }

  static Tensor apply(const Tensor& x, double factor) {
    Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
    kernels::mul(x.buffer(), x.buffer(), y.buffer());
    return attach(y, std::make_shared<ScaledSquare>(x, factor), {x});
  }

 private:
  Tensor x_;
  double factor_;
};

TEST(Gradcheck, AcceptsACorrectUserFunction) {
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return ScaledSquare::apply(in[0], 1.0); },
                               {randn({3, 4}, 41, 1.0, DType::f64)}));
}

TEST(Gradcheck, CatchesABackwardThatReturnsTwiceTheGradient) {
  const GradcheckResult result =
      gradcheck([](const Inputs& in) { return ScaledSquare::apply(in[0], 2.0); },
                {randn({3, 4}, 41, 1.0, DType::f64)}, kGradEps, kGradAtol, kGradRtol);
  EXPECT_FALSE(result.passed);
  EXPECT_NE(result.worst.find("input 0 element"), std::string::npos) << result.worst;
  EXPECT_GT(result.max_abs_error, 0.1);
}

TEST(Gradcheck, CatchesANaNGradient) {
  // NaN compares false with everything: a checker that only asks "error > tolerance" passes it.
  const GradcheckResult result = gradcheck(
      [](const Inputs& in) {
        return ScaledSquare::apply(in[0], std::numeric_limits<double>::quiet_NaN());
      },
      {randn({2, 2}, 42, 1.0, DType::f64)}, kGradEps, kGradAtol, kGradRtol);
  EXPECT_FALSE(result.passed);
  EXPECT_TRUE(std::isnan(result.max_abs_error));
}

}  // namespace
}  // namespace mpitron::test
