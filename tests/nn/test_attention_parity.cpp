// PyTorch parity of tensor-parallel attention (TP group = the world): the reference program's
// MultiHeadAttentionTP in float64 (tools/make_golden_attention_dp.py -> tests/data/
// attention.json, embed 64, 4 heads, input [2, 8, 64]) with seeded normal weights (forward and
// every gradient) and with the arange weights (forward).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "nn/layers/attention.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::DType;
using autograd::Tensor;

constexpr std::int64_t kHeads = 4;
const char* const kNames[] = {"q.weight", "q.bias", "k.weight",   "k.bias",
                              "v.weight", "v.bias", "out.weight", "out.bias"};

// Normwise: max |actual - expected| <= rtol * max(1, max |expected|). The arange outputs reach
// 1e10, so element-wise absolute bounds are meaningless and a relative one per element would be
// dominated by cancellation near zero; the normwise bound is what rounding guarantees
// (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., sec. 3.1). The floor of 1
// (the size of the other gradients) serves the key bias, whose gradient is exactly zero: adding
// q.b_k to every score of a row does not change the softmax (torch's is rounding noise, 1e-16).
void expect_normwise_close(const Tensor& actual, const Tensor& expected, double rtol) {
  ASSERT_EQ(actual.shape(), expected.shape());
  const std::vector<double> a = actual.to_vector(), e = expected.to_vector();
  double error = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    error = std::max(error, std::abs(a[i] - e[i]));
    scale = std::max(scale, std::abs(e[i]));
  }
  scale = std::max(scale, 1.0);
  EXPECT_LE(error, rtol * scale) << "max error " << error << ", max |expected| " << scale;
}

// Tolerances: f64 sees only summation-order rounding against torch's float64 (64-term sums:
// ~1e-14 relative; 1e-11 used). f32 rounds the inputs and every op: ~4 K eps32 with K = 64
// terms per projection is 3e-5 (1e-4 used). The arange case saturates the softmax (score gaps
// are >= 1e-4 of the scores, far above f32 rounding), so it is a one-hot lookup whose value
// carries the same relative error.
class AttentionParity : public test::DeviceDtypeTest {
 protected:
  double rtol() const { return dtype() == DType::f64 ? 1e-11 : 1e-4; }
  test::GoldenFile golden_{"attention.json"};
};

TEST_P(AttentionParity, NormalWeightsForwardAndGradients) {
  const comm::Communicator& tp = test::world();
  const auto layer = [&](const std::string& name) {
    return LinearWeights{golden_.tensor("normal." + name + ".weight", dtype(), device()),
                         golden_.tensor("normal." + name + ".bias", dtype(), device())};
  };
  const AttentionWeights w{layer("q"), layer("k"), layer("v"), layer("out")};
  const ParallelMultiHeadAttention attention(w, kHeads, tp);
  Tensor x = golden_.tensor("x", dtype(), device()).set_requires_grad();
  const Tensor y = attention.forward(x);
  expect_normwise_close(y, golden_.tensor("normal.out"), rtol());
  autograd::sum(autograd::mul(y, golden_.tensor("dy", dtype(), device()))).backward();
  expect_normwise_close(x.grad(), golden_.tensor("normal.dx"), rtol());

  const Parameters mine = attention.parameters();
  const std::int64_t width = 64 / tp.size();
  for (std::size_t i = 0; i < mine.size(); ++i) {
    SCOPED_TRACE(kNames[i]);
    ASSERT_EQ(mine[i].name, kNames[i]);
    Tensor expected = golden_.tensor(std::string("normal.d") + kNames[i]);
    if (i < 6) expected = autograd::narrow(expected, 0, tp.rank() * width, width);
    if (i == 6) expected = autograd::narrow(expected, 1, tp.rank() * width, width);
    expect_normwise_close(mine[i].tensor.grad(), expected, rtol());
  }
}

TEST_P(AttentionParity, ArangeWeightsForward) {
  const AttentionWeights w = make_attention_weights_arange(64, dtype(), device());
  autograd::NoGradGuard no_grad;
  const Tensor y = ParallelMultiHeadAttention(w, kHeads, test::world())
                       .forward(golden_.tensor("x", dtype(), device()));
  expect_normwise_close(y, golden_.tensor("arange.out"), rtol());
}

// Causal attention (tools/make_golden_transformer.py -> causal_attention.json: embed 16, 4
// heads, x [2, 8, 16], torch's masked_fill(-inf) + softmax) through the dense block with the fused
// causal softmax; forward, dx and every parameter's gradient. Same tolerances (sums of <= 16
// terms here, fewer than the 64 above).
TEST_P(AttentionParity, CausalForwardAndGradients) {
  const test::GoldenFile golden("causal_attention.json");
  const auto layer = [&](const std::string& name) {
    return LinearWeights{golden.tensor(name + ".weight", dtype(), device()),
                         golden.tensor(name + ".bias", dtype(), device())};
  };
  const MultiHeadAttention attention({layer("q"), layer("k"), layer("v"), layer("out")}, kHeads,
                                     /*causal=*/true);
  Tensor x = golden.tensor("x", dtype(), device()).set_requires_grad();
  const Tensor y = attention.forward(x);
  expect_normwise_close(y, golden.tensor("out"), rtol());
  autograd::sum(autograd::mul(y, golden.tensor("dy", dtype(), device()))).backward();
  expect_normwise_close(x.grad(), golden.tensor("dx"), rtol());
  const Parameters params = attention.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(kNames[i]);
    ASSERT_EQ(params[i].name, kNames[i]);
    expect_normwise_close(params[i].tensor.grad(), golden.tensor(std::string("d") + kNames[i]),
                          rtol());
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, AttentionParity, test::all_devices_and_dtypes(),
                         test::device_dtype_name);

}  // namespace
}  // namespace mpitron::nn
