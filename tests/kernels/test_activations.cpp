// GELU, softmax and MSE against closed forms and naive double loops written here.
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "kernel_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

using ActivationTest = KernelTest;
MPITRON_KERNEL_TEST_SUITE(ActivationTest);

double gelu_reference(double x, GeluForm form) {
  if (form == GeluForm::exact) return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  const double pi = std::acos(-1.0);
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

TEST_P(ActivationTest, GeluMatchesTorchValues) {
  // torch.nn.functional.gelu(torch.tensor([-1., 1.], dtype=torch.float64), approximate=...)
  Buffer y = empty(2);
  gelu_forward(make({-1.0, 1.0}), y, GeluForm::exact);
  expect_close(host_values(y), {-0.15865525393145707, 0.8413447460685429}, 8 * eps());
  gelu_forward(make({-1.0, 1.0}), y, GeluForm::tanh);
  expect_close(host_values(y), {-0.15880800939172324, 0.8411919906082768}, 8 * eps());
}

TEST_P(ActivationTest, GeluForwardMatchesTheFormula) {
  const std::vector<double> x = random(1001, 20, -6.0, 6.0);
  for (GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    std::vector<double> want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      want[i] = gelu_reference(x[i], form);
    Buffer y = empty(x.size());
    gelu_forward(make(x), y, form);
    // A few roundings of x-sized terms and a libm erf/tanh accurate to ~2 ulp: 16 eps.
    expect_close(host_values(y), want, 16 * eps());
  }
}

TEST_P(ActivationTest, GeluBackwardMatchesCentralDifferences) {
  const std::vector<double> x = random(257, 21, -5.0, 5.0);
  const std::vector<double> dy = random(257, 22);
  constexpr double h = 1e-5;
  for (GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    std::vector<double> want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double slope =
          (gelu_reference(x[i] + h, form) - gelu_reference(x[i] - h, form)) / (2 * h);
      want[i] = dy[i] * slope;
    }
    Buffer dx = empty(x.size());
    gelu_backward(make(x), make(dy), dx, form);
    // Central differences in double err by h^2 |f'''| / 6 + 1e-16 / h < 1e-9; float kernels add
    // a few eps of rounding (|slope| <= 1.13, |dy| <= 2).
    expect_close(host_values(dx), want, 1e-9 + 16 * eps());
  }
}

TEST_P(ActivationTest, GeluBackwardRunsInPlace) {
  const std::vector<double> x = random(129, 26, -5.0, 5.0), dy = random(129, 27);
  for (GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    Buffer separate = empty(x.size());
    gelu_backward(make(x), make(dy), separate, form);
    Buffer in_place = make(dy);  // dx written over dy
    gelu_backward(make(x), in_place, in_place, form);
    expect_close(host_values(in_place), host_values(separate), 0.0);
  }
}

// The one-pass op against the two it replaces: the same bits, with separate outputs and with
// the in-place aliasing fused_mlp's backward uses (y over dy, dx over x). 1001 elements leave a
// ragged tail after any vector width and span GELU's tails and middle.
TEST_P(ActivationTest, GeluForwardBackwardGivesTheBitsOfForwardAndBackward) {
  const std::vector<double> x = random(1001, 30, -6.0, 6.0), dy = random(1001, 31);
  for (GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    Buffer want_y = empty(x.size()), want_dx = empty(x.size());
    gelu_forward(make(x), want_y, form);
    gelu_backward(make(x), make(dy), want_dx, form);
    Buffer y = empty(x.size()), dx = empty(x.size());
    gelu_forward_backward(make(x), make(dy), y, dx, form);
    expect_close(host_values(y), host_values(want_y), 0.0);
    expect_close(host_values(dx), host_values(want_dx), 0.0);
    Buffer in_x = make(x), in_dy = make(dy);
    gelu_forward_backward(in_x, in_dy, in_dy, in_x, form);
    expect_close(host_values(in_dy), host_values(want_y), 0.0);
    expect_close(host_values(in_x), host_values(want_dx), 0.0);
  }
}

// y [rows, cols] += bias row-wise, g = gelu(y): against a double loop over the same rounded
// inputs. cols 67 leaves a ragged tail after any vector width; x spans GELU's tails and middle.
TEST_P(ActivationTest, BiasGeluAddsTheBiasInPlaceAndWritesGelu) {
  constexpr std::size_t rows = 5, cols = 67;
  const std::vector<double> y = random(rows * cols, 28, -4.0, 4.0), bias = random(cols, 29);
  for (GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    std::vector<double> want_y(y.size()), want_g(y.size());
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < cols; ++c) {
        const std::size_t i = r * cols + c;
        want_y[i] = y[i] + bias[c];
        want_g[i] = gelu_reference(want_y[i], form);
      }
    }
    Buffer y_buffer = make(y), g = empty(y.size());
    bias_gelu(y_buffer, make(bias), cols, g, form);
    // The sum rounds once (half an eps); gelu of it adds the 16 eps of GeluForwardMatchesTheFormula
    // plus |gelu'| <= 1.13 times that half eps.
    expect_close(host_values(y_buffer), want_y, eps());
    expect_close(host_values(g), want_g, 18 * eps());
  }
}

std::vector<double> softmax_reference(const std::vector<double>& x, std::size_t cols) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / cols; ++r) {
    double max = x[r * cols];
    for (std::size_t c = 0; c < cols; ++c)
      max = std::fmax(max, x[r * cols + c]);
    double total = 0.0;
    for (std::size_t c = 0; c < cols; ++c)
      total += std::exp(x[r * cols + c] - max);
    for (std::size_t c = 0; c < cols; ++c)
      y[r * cols + c] = std::exp(x[r * cols + c] - max) / total;
  }
  return y;
}

TEST_P(ActivationTest, SoftmaxIsFiniteForLargeInputs) {
  Buffer y = empty(3);
  softmax_forward(make({151.29, 0.0, -151.29}), 3, y);
  // exp(-151.29) ~ 1.7e-66 underflows to 0 in float32; the absolute tolerance 4 eps covers it.
  expect_close(host_values(y), {1.0, std::exp(-151.29), std::exp(-302.58)}, 4 * eps());
  Buffer pair = empty(2);
  softmax_forward(make({1000.0, 1000.0}), 2, pair);
  expect_close(host_values(pair), {0.5, 0.5}, 0.0);
}

TEST_P(ActivationTest, SoftmaxRowsMatchNaiveLoops) {
  constexpr std::size_t rows = 7, cols = 300;  // cols above one CUDA block's width
  const std::vector<double> x = random(rows * cols, 23, -8.0, 8.0);
  Buffer y = empty(x.size());
  softmax_forward(make(x), cols, y);
  // exp of an exact difference (2 roundings) and a row sum accumulated with ~cols eps error.
  expect_close(host_values(y), softmax_reference(x, cols), 8 * eps());
}

TEST_P(ActivationTest, SoftmaxBackwardIsTheJacobianProduct) {
  constexpr std::size_t rows = 5, cols = 67;
  const std::vector<double> y = softmax_reference(random(rows * cols, 24), cols);
  const std::vector<double> dy = random(rows * cols, 25);
  const std::vector<double> yr = rounded(y);
  std::vector<double> want(y.size(), 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t i = 0; i < cols; ++i) {
      for (std::size_t j = 0; j < cols; ++j) {  // dx_j = sum_i dy_i y_i (delta_ij - y_j)
        const double jac = yr[r * cols + i] * ((i == j ? 1.0 : 0.0) - yr[r * cols + j]);
        want[r * cols + j] += dy[r * cols + i] * jac;
      }
    }
  }
  Buffer dx = empty(y.size());
  softmax_backward(make(yr), make(dy), cols, dx);
  // |dy| <= 2 and sum y = 1, so the inner product is O(2) and rounds with a few eps.
  expect_close(host_values(dx), want, 8 * eps());
}

// Reference of softmax(scale x) per row with the causal mask of square [cols, cols] blocks.
std::vector<double> masked_softmax_reference(const std::vector<double>& x, std::size_t cols,
                                             bool causal, double scale) {
  std::vector<double> scaled(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool masked = causal && i % cols > (i / cols) % cols;
    scaled[i] = masked ? -INFINITY : scale * x[i];
  }
  return softmax_reference(scaled, cols);
}

TEST_P(ActivationTest, SoftmaxHandlesMinusInfinityAndTies) {
  const std::vector<double> x{-INFINITY, 1.0, 1.0, -INFINITY, 3.0, 3.0, 3.0, 3.0};
  Buffer y = empty(x.size());
  softmax_forward(make(x), 4, y);
  // Ties share the mass exactly (powers of two); -inf gets exactly 0.
  expect_close(host_values(y), {0.0, 0.5, 0.5, 0.0, 0.25, 0.25, 0.25, 0.25}, 0.0);
}

TEST_P(ActivationTest, CausalScaledSoftmaxMatchesMaskedReference) {
  // Two [5, 5] score matrices, then one [300, 300] wider than a CUDA block.
  for (const std::size_t cols : {std::size_t{5}, std::size_t{300}}) {
    const std::size_t rows = cols == 5 ? 10 : cols;
    const double scale = 0.35355339059327373;  // 1 / sqrt(8)
    const std::vector<double> x = random(rows * cols, 28, -6.0, 6.0);
    for (const bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "cols " << cols << " causal " << causal);
      Buffer y = make(std::vector<double>(x.size(), 7.0));  // stale values must be overwritten
      softmax_forward(make(x), cols, y, causal, scale);
      const std::vector<double> want = masked_softmax_reference(x, cols, causal, scale);
      const std::vector<double> got = host_values(y);
      // The scale adds one rounding to the 8 eps of SoftmaxRowsMatchNaiveLoops.
      expect_close(got, want, 10 * eps());
      for (std::size_t i = 0; i < x.size() && causal; ++i) {
        if (i % cols > (i / cols) % cols) {
          ASSERT_EQ(got[i], 0.0) << "masked element " << i;
        }
      }
    }
  }
}

TEST_P(ActivationTest, CausalRowsRejectNonSquareScores) {
  Buffer y = empty(12);
  EXPECT_THROW(softmax_forward(make(std::vector<double>(12, 0.0)), 4, y, true),
               std::invalid_argument);  // 3 rows of 4 columns
}

TEST_P(ActivationTest, ScaledSoftmaxBackwardIsTheJacobianProduct) {
  constexpr std::size_t cols = 6, rows = 12;  // two causal [6, 6] blocks
  const double scale = 0.5;
  const std::vector<double> y =
      rounded(masked_softmax_reference(random(rows * cols, 29), cols, /*causal=*/true, scale));
  const std::vector<double> dy = random(rows * cols, 30);
  std::vector<double> want(y.size(), 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t i = 0; i < cols; ++i) {
      for (std::size_t j = 0; j < cols; ++j) {  // d y_i / d x_j = scale y_i (delta_ij - y_j)
        const double jac = scale * y[r * cols + i] * ((i == j ? 1.0 : 0.0) - y[r * cols + j]);
        want[r * cols + j] += dy[r * cols + i] * jac;
      }
    }
  }
  Buffer dx = empty(y.size());
  softmax_backward(make(y), make(dy), cols, dx, scale);
  expect_close(host_values(dx), want, 8 * eps());
}

TEST_P(ActivationTest, MseForwardAndBackwardMatchNaiveLoops) {
  constexpr std::size_t n = 999;
  const std::vector<double> pred = random(n, 26), target = random(n, 27);
  double total = 0.0;
  std::vector<double> grad(n);
  for (std::size_t i = 0; i < n; ++i) {
    total += (pred[i] - target[i]) * (pred[i] - target[i]);
    grad[i] = 0.5 * 2.0 * (pred[i] - target[i]) / n;  // dloss = 0.5
  }
  const Buffer bp = make(pred), bt = make(target);
  Buffer loss = empty(1);
  mse_forward(bp, bt, loss);
  // Accumulated in double, then one rounding to the dtype.
  expect_close(host_values(loss), {total / n}, 2 * eps());
  Buffer dpred = empty(n);
  mse_backward(bp, bt, make({0.5}), dpred);
  expect_close(host_values(dpred), grad, 4 * eps());
}

}  // namespace
}  // namespace mpitron::test
