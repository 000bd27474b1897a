// PyTorch parity: forward values and gradients of our ops against float64 goldens written by
// tools/make_golden.py (inputs and expected outputs both come from the JSON files under
// tests/data/, so torch is never needed here). Each check runs in float64 and in float32, on
// the CPU and, when present, on a CUDA device.
//
// Comparison: normwise, max_i |got_i - expected_i| <= rtol * max_i |expected_i| (plus an
// underflow floor, see `atol`), because the rounding error of a sum is bounded relative to the
// magnitudes of its terms (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
// section 3.1: |error| <= gamma_K sum |terms|, gamma_K ~ K u), not relative to a result that may
// have cancelled (e.g. gelu(-5) ~ -1.4e-6).
//
// Tolerances (see `rtol`):
// - float64: 1e-12. Our inputs are the goldens' exact inputs; differences come only from
//   summation order (GEMM blocking) and libm-vs-torch exp/erf/tanh (~1 ulp each). With at most
//   K = 192 chained summed terms (the MLP's dx: 32 + 64 forward, 32 + 64 back), K u = 2.1e-14,
//   so 1e-12 is a ~50x margin; a formula mistake (tanh vs exact GELU differ by 1e-4) is far
//   above it.
// - float32: (4 K + 16) eps32 (eps32 = 1.19e-7). K is the number of summed terms along the
//   longest chain of reductions that produced the value; the factor 4 covers the rounding of the
//   inputs to float32 and its propagation. The 16 ulp are the element-wise functions: float32
//   exp/erf/tanh are accurate to a few ulp, and GELU's derivative composes about ten roundings
//   with 1 - tanh^2, which amplifies tanh's error (measured: 3.7 ulp for the tanh form). E.g.
//   2.4e-6 for GELU, 9.3e-5 for the MLP's dx.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "autograd/ops.h"
#include "autograd_test_support.h"
#include "support/golden_file.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

using Goldens = mpitron::test::GoldenFile;

class TorchParity : public AutogradTest {
 protected:
  double rtol(int summed_terms) const {
    if (dtype() == DType::f64) return 1e-12;
    return (4.0 * summed_terms + 16.0) * std::numeric_limits<float>::epsilon();
  }

  // Absolute floor: the smallest normal number of the dtype. Below it the format loses relative
  // precision and flushes to 0 (e.g. softmax's exp(-151.29) = 2e-66 is 0 in float32), so an
  // expected value that small cannot be matched more closely.
  double atol() const {
    return dtype() == DType::f64 ? std::numeric_limits<double>::min()
                                 : std::numeric_limits<float>::min();
  }

  /// Golden tensor `name` in this test's dtype and device, optionally a leaf requiring grad.
  Tensor input(const Goldens& goldens, const std::string& name, bool requires_grad = false) const {
    Tensor t = Tensor::from_vector(goldens.values(name), goldens.shape(name), dtype(), device());
    if (requires_grad) t.set_requires_grad();
    return t;
  }

  /// `got` matches golden `name` normwise within rtol(summed_terms) + extra_rtol, plus atol().
  void expect_golden(const Tensor& got, const Goldens& goldens, const std::string& name,
                     int summed_terms, double extra_rtol = 0.0) const {
    SCOPED_TRACE(name);
    ASSERT_TRUE(got.defined());
    ASSERT_EQ(got.shape(), goldens.shape(name));
    const std::vector<double> actual = got.to_vector();
    const std::vector<double> expected = goldens.values(name);
    double scale = 0.0;
    for (const double e : expected)
      scale = std::max(scale, std::abs(e));
    const double bound = (rtol(summed_terms) + extra_rtol) * scale + atol();
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const double error = std::abs(actual[i] - expected[i]);
      // Written so that a NaN or infinite result fails.
      EXPECT_TRUE(error <= bound) << "element " << i << ": got " << actual[i] << " expected "
                                  << expected[i] << " error " << error << " > bound " << bound;
    }
  }
};

TEST_P(TorchParity, GeluBothFormsAndDerivatives) {
  const Goldens goldens("gelu.json");
  for (const auto& [form, key] : {std::pair{GeluForm::exact, std::string("exact")},
                                  std::pair{GeluForm::tanh, std::string("tanh")}}) {
    Tensor x = input(goldens, "x", true);
    const Tensor y = gelu(x, form);
    y.backward(Tensor::full(x.shape(), 1.0, dtype(), device()));  // dx = gelu'(x)
    expect_golden(y, goldens, key + ".y", 1);
    expect_golden(x.grad(), goldens, key + ".dydx", 1);
  }
}

TEST_P(TorchParity, SoftmaxOfLargeMagnitudesIsFiniteForwardAndBackward) {
  const Goldens goldens("softmax.json");
  for (const std::string name : {"wide", "equal_large", "mixed"}) {
    Tensor x = input(goldens, name + ".x", true);
    const Tensor y = softmax(x);
    y.backward(input(goldens, name + ".dy"));
    const auto cols = static_cast<int>(x.size(-1));
    expect_golden(y, goldens, name + ".y", cols);              // sum of exps
    expect_golden(x.grad(), goldens, name + ".dx", 2 * cols);  // that sum and sum dy * y
  }
}

TEST_P(TorchParity, MseLossAndGradient) {
  const Goldens goldens("mse.json");
  Tensor pred = input(goldens, "pred", true);
  const Tensor loss = mse_loss(pred, input(goldens, "target"));
  loss.backward();
  expect_golden(loss, goldens, "loss", static_cast<int>(pred.numel()));
  expect_golden(pred.grad(), goldens, "dpred", 1);
}

// 32 -> 64 -> 32 exact-GELU MLP on x [2, 4, 32] (8 rows) with MSE loss, composed of linear,
// gelu and linear, and as fused_mlp plus the fc2 bias.
TEST_P(TorchParity, GeluMlpForwardLossAndEveryGradient) {
  const Goldens goldens("mlp.json");
  for (const bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused_mlp" : "linear, gelu, linear");
    Tensor x = input(goldens, "x", true);
    Tensor w1 = input(goldens, "w1", true), b1 = input(goldens, "b1", true);
    Tensor w2 = input(goldens, "w2", true), b2 = input(goldens, "b2", true);
    const Tensor out =
        fused ? add(fused_mlp(x, w1, b1, w2), b2) : linear(gelu(linear(x, w1, b1)), w2, b2);
    const Tensor loss = mse_loss(out, input(goldens, "target"));
    loss.backward();

    // Summed terms along the longest chain: forward 32 (layer 1) + 64 (layer 2); the loss adds
    // its 256 squares; gradients go back through 32 (dH = dOut W2) and sum over the 8 rows.
    const int rows = 8, forward = 32 + 64;
    expect_golden(out, goldens, "out", forward);
    expect_golden(loss, goldens, "loss", forward + static_cast<int>(out.numel()));
    expect_golden(b2.grad(), goldens, "db2", forward + rows);
    expect_golden(w2.grad(), goldens, "dw2", forward + rows);
    expect_golden(x.grad(), goldens, "dx", forward + 64 + 32);
    expect_golden(b1.grad(), goldens, "db1", forward + 32 + rows);
    expect_golden(w1.grad(), goldens, "dw1", forward + 32 + rows);
  }
}

// x [3, 4, 10] (values ~3 +- 2): the row statistics sum 10 terms; dx adds the two row means of
// the backward (another 2 x 10); dweight and dbias sum over the 12 rows.
TEST_P(TorchParity, LayerNormForwardAndGradients) {
  const Goldens goldens("layer_norm.json");
  Tensor x = input(goldens, "x", true), weight = input(goldens, "weight", true);
  Tensor bias = input(goldens, "bias", true);
  const Tensor y = layer_norm(x, weight, bias, 1e-5);
  y.backward(input(goldens, "dy"));
  expect_golden(y, goldens, "y", 20);
  expect_golden(x.grad(), goldens, "dx", 40);
  expect_golden(weight.grad(), goldens, "dweight", 20 + 12);
  expect_golden(bias.grad(), goldens, "dbias", 12);
}

// logits [6, 11]: row 1 all equal, rows 2 and 3 of magnitude 1e4. In float32 the inputs
// themselves round by half an ulp of 1e4 (2^-11 ~ 4.9e-4), which moves logit differences by up
// to 2^-10 and so the softmax probabilities by a relative 2^-10 ~ 1e-3: that input-rounding term
// is added to the float32 tolerance of dlogits (and, relative to the ~1e3 mean loss, it is far
// below the summation term there). A wrong formula (missing max, wrong 1/rows) errs by O(1).
TEST_P(TorchParity, CrossEntropyOfLargeAndEqualLogits) {
  const Goldens goldens("cross_entropy.json");
  Tensor logits = input(goldens, "logits", true);
  const Tensor targets = Tensor::from_vector(goldens.values("targets"), goldens.shape("targets"),
                                             DType::i64, device());
  const Tensor loss = cross_entropy(logits, targets);
  loss.backward();
  expect_golden(loss, goldens, "loss", 11 + 6);
  const double input_rounding = dtype() == DType::f32 ? 0x1p-10 : 0.0;
  expect_golden(logits.grad(), goldens, "dlogits", 11, input_rounding);
}

// tools/make_golden_llama.py: Hugging Face Llama's formulas written out in torch.
// RMSNorm of x [3, 4, 10] (eps 1e-5; one row below eps): the row's sum of squares adds 10
// terms; dx adds the backward's row mean of g xhat (another 10); dweight sums over the 12 rows.
TEST_P(TorchParity, RmsNormForwardAndGradients) {
  const Goldens goldens("rms_norm.json");
  Tensor x = input(goldens, "x", true), weight = input(goldens, "weight", true);
  const Tensor y = rms_norm(x, weight, 1e-5);
  y.backward(input(goldens, "dy"));
  expect_golden(y, goldens, "y", 10);
  expect_golden(x.grad(), goldens, "dx", 20);
  expect_golden(weight.grad(), goldens, "dweight", 10 + 12);
}

// RoPE (rotate_half) of q at positions 0..5 (theta 10000) and of k at 4090..4093 (theta 5e5):
// each output is one sum of two products. Both sides compute the angle p theta^(-2i/d) in
// float64, each within ~2 ulp of p (up to 4093 radians), so they may differ by 4 p 2^-52
// radians, which moves an output by as much relative to the largest: the extra rtol.
TEST_P(TorchParity, RotaryEmbeddingOfQueriesAndKeysForwardAndGradient) {
  const Goldens goldens("rotary.json");
  for (const std::string name : {"q", "k"}) {
    SCOPED_TRACE(name);
    Tensor x = input(goldens, name + ".x", true);
    const auto offset = static_cast<std::int64_t>(goldens.scalar(name + ".offset"));
    const Tensor y = rotary_embedding(x, goldens.scalar(name + ".theta"), offset);
    y.backward(input(goldens, name + ".dy"));
    const double angle_error = 4.0 * static_cast<double>(offset + x.size(1)) * 0x1p-52;
    expect_golden(y, goldens, name + ".y", 2, angle_error);
    expect_golden(x.grad(), goldens, name + ".dx", 2, angle_error);
  }
}

// RoPE with Llama 3.2's rope_scaling (theta 5e5, factor 32, low 1, high 4, original 8192) on
// head_dim 64, whose pairs fall in all three bands, at positions 1021.. and 100000..: the
// frequencies of kernels/rope.h against tools/make_golden_llama.py's float64 formula, with the
// angle error of the unscaled test.
TEST_P(TorchParity, RotaryEmbeddingWithLlama3ScalingFarFromTheStart) {
  const Goldens goldens("rotary_llama3.json");
  const kernels::RopeFrequencies rope(500000.0, {32.0, 1.0, 4.0, 8192.0});
  for (const std::string name : {"near", "far"}) {
    SCOPED_TRACE(name);
    Tensor x = input(goldens, name + ".x", true);
    const auto offset = static_cast<std::int64_t>(goldens.scalar(name + ".offset"));
    const Tensor y = rotary_embedding(x, rope, offset);
    y.backward(input(goldens, name + ".dy"));
    const double angle_error = 4.0 * static_cast<double>(offset + x.size(1)) * 0x1p-52;
    expect_golden(y, goldens, name + ".y", 2, angle_error);
    expect_golden(x.grad(), goldens, name + ".dx", 2, angle_error);
  }
}

// SwiGLU of gate in [-12, 12] and +-40 (where the sigmoid saturates): element-wise, no sums.
TEST_P(TorchParity, SwigluForwardAndGradients) {
  const Goldens goldens("swiglu.json");
  Tensor gate = input(goldens, "gate", true), up = input(goldens, "up", true);
  const Tensor y = swiglu(gate, up);
  y.backward(input(goldens, "dy"));
  expect_golden(y, goldens, "y", 1);
  expect_golden(gate.grad(), goldens, "dgate", 1);
  expect_golden(up.grad(), goldens, "dup", 1);
}

INSTANTIATE_TEST_SUITE_P(DevicesAndDtypes, TorchParity, ::mpitron::test::all_devices_and_dtypes(),
                         ::mpitron::test::device_dtype_name);

}  // namespace
}  // namespace mpitron::test
