// Central-difference gradient checks (float64) of the GEMM, element-wise and reduction ops, and
// of a 2-layer GELU MLP with MSE loss. Tolerances: see autograd_test_support.h.
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "autograd_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

class GradcheckMath : public AutogradTest {};

TEST_P(GradcheckMath, LinearWithAndWithoutBias2DAnd3D) {
  for (const Shape& x_shape : {Shape{5, 4}, Shape{2, 3, 4}}) {
    SCOPED_TRACE("x " + to_string(x_shape));
    const Inputs inputs{normal(x_shape, 1), normal({3, 4}, 2), normal({3}, 3)};
    EXPECT_TRUE(
        gradcheck_passes([](const Inputs& in) { return linear(in[0], in[1], in[2]); }, inputs));
    EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return linear(in[0], in[1]); },
                                 {inputs[0], inputs[1]}));
  }
}

// a is [batch..., m, k] (stored [.., k, m] when trans_a), b [batch..., k, n] (or [.., n, k]) or a
// shared 2-D b. m, k, n are distinct so a wrongly transposed gradient cannot even have the right
// shape.
TEST_P(GradcheckMath, MatmulAllTransposesBatchedAndSharedB) {
  const std::int64_t m = 3, k = 4, n = 2;
  for (const Shape& batch : {Shape{}, Shape{2}, Shape{2, 3}}) {
    for (const bool shared_b : {false, true}) {
      if (batch.empty() && shared_b) continue;  // a 2-D a with a 2-D b is the plain case
      for (const bool trans_a : {false, true}) {
        for (const bool trans_b : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "batch " << to_string(batch) << " shared_b " << shared_b << " trans_a "
                       << trans_a << " trans_b " << trans_b);
          Shape a_shape = batch, b_shape = shared_b ? Shape{} : batch;
          a_shape.insert(a_shape.end(), {trans_a ? k : m, trans_a ? m : k});
          b_shape.insert(b_shape.end(), {trans_b ? n : k, trans_b ? k : n});
          const Inputs inputs{normal(a_shape, 4), normal(b_shape, 5)};
          EXPECT_TRUE(gradcheck_passes(
              [=](const Inputs& in) { return matmul(in[0], in[1], trans_a, trans_b); }, inputs));
        }
      }
    }
  }
}

TEST_P(GradcheckMath, AddSameShapeAndBiasBroadcast) {
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return add(in[0], in[1]); },
                               {normal({2, 3, 4}, 6), normal({2, 3, 4}, 7)}));
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return add(in[0], in[1]); },
                               {normal({2, 3, 4}, 6), normal({4}, 8)}));
}

TEST_P(GradcheckMath, SubMulScale) {
  const Inputs inputs{normal({3, 5}, 9), normal({3, 5}, 10)};
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return sub(in[0], in[1]); }, inputs));
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return mul(in[0], in[1]); }, inputs));
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return scale(in[0], -2.5); }, {inputs[0]}));
}

TEST_P(GradcheckMath, GeluExactAndTanh) {
  // std 3 reaches both tails and the curved middle of GELU.
  const Inputs inputs{normal({4, 6}, 11, 3.0)};
  for (const GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    SCOPED_TRACE(form == GeluForm::exact ? "exact" : "tanh");
    EXPECT_TRUE(gradcheck_passes([form](const Inputs& in) { return gelu(in[0], form); }, inputs));
  }
}

TEST_P(GradcheckMath, SoftmaxOverLastDim) {
  for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{2, 3, 4}}) {
    SCOPED_TRACE(to_string(shape));
    EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return softmax(in[0]); },
                                 {normal(shape, 12, 2.0)}));
  }
}

TEST_P(GradcheckMath, MseLossAgainstAConstantTarget) {
  // The target gets no gradient by contract, so it is a constant of f, not a checked input.
  const Tensor target = normal({3, 4}, 14);
  EXPECT_TRUE(gradcheck_passes([target](const Inputs& in) { return mse_loss(in[0], target); },
                               {normal({3, 4}, 13)}));
}

TEST_P(GradcheckMath, SumAndMean) {
  const Inputs inputs{normal({2, 3, 4}, 15)};
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return sum(in[0]); }, inputs));
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return mean(in[0]); }, inputs));
}

// x [4, 3, 8] -> linear 8->16 -> gelu -> linear 16->8 -> mse against a fixed target.
TEST_P(GradcheckMath, TwoLayerGeluMlpWithMseLoss) {
  const Tensor target = normal({4, 3, 8}, 16);
  const Inputs inputs{normal({4, 3, 8}, 17), normal({16, 8}, 18, 0.35), normal({16}, 19, 0.35),
                      normal({8, 16}, 20, 0.25), normal({8}, 21, 0.25)};
  EXPECT_TRUE(gradcheck_passes(
      [target](const Inputs& in) {
        const Tensor hidden = gelu(linear(in[0], in[1], in[2]));
        return mse_loss(linear(hidden, in[3], in[4]), target);
      },
      inputs));
}

INSTANTIATE_TEST_SUITE_P(Devices, GradcheckMath, ::mpitron::test::all_devices(),
                         ::mpitron::test::device_dtype_name);

}  // namespace
}  // namespace mpitron::test
