// Element-wise ops and sums against naive double loops. Each float result is one or two roundings
// of exact inputs, so 4 eps relative (tol * max(1, |want|)) bounds the error with margin; sums
// of n terms accumulate in double inside the kernel and are allowed n * eps of the dtype.
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernel_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

using ElementwiseTest = KernelTest;
MPITRON_KERNEL_TEST_SUITE(ElementwiseTest);

constexpr std::size_t kN = 1031;  // odd, so no vector or block width divides it

TEST_P(ElementwiseTest, FillWritesEveryElement) {
  Buffer out = empty(kN);
  fill(out, -2.5);
  expect_close(host_values(out), std::vector<double>(kN, -2.5), 0.0);
}

TEST_P(ElementwiseTest, BroadcastScalarScalesTheDeviceScalar) {
  Buffer s = make({3.0});
  Buffer out = empty(kN);
  broadcast_scalar(s, -0.5, out);
  expect_close(host_values(out), std::vector<double>(kN, -1.5), 0.0);
}

TEST_P(ElementwiseTest, AddSubMulMatchNaiveLoops) {
  const std::vector<double> a = random(kN, 1), b = random(kN, 2);
  std::vector<double> plus(kN), minus(kN), times(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    plus[i] = a[i] + b[i];
    minus[i] = a[i] - b[i];
    times[i] = a[i] * b[i];
  }
  const Buffer ba = make(a), bb = make(b);
  Buffer out = empty(kN);
  add(ba, bb, out);
  expect_close(host_values(out), plus, 4 * eps());
  sub(ba, bb, out);
  expect_close(host_values(out), minus, 4 * eps());
  mul(ba, bb, out);
  expect_close(host_values(out), times, 4 * eps());
}

TEST_P(ElementwiseTest, OutMayAliasAnInput) {
  const std::vector<double> a = random(kN, 3), b = random(kN, 4);
  std::vector<double> want(kN);
  for (std::size_t i = 0; i < kN; ++i)
    want[i] = a[i] + b[i];
  Buffer ba = make(a);
  const Buffer bb = make(b);
  add(ba, bb, ba);
  expect_close(host_values(ba), want, 4 * eps());
}

TEST_P(ElementwiseTest, ScaleAndAxpyMatchNaiveLoops) {
  const std::vector<double> x = random(kN, 5), y = random(kN, 6);
  std::vector<double> scaled(kN), accumulated(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    scaled[i] = 0.75 * x[i];
    accumulated[i] = y[i] - 1.5 * x[i];
  }
  const Buffer bx = make(x);
  Buffer out = empty(kN);
  scale(bx, 0.75, out);
  expect_close(host_values(out), scaled, 4 * eps());
  Buffer by = make(y);
  axpy(-1.5, bx, by);
  expect_close(host_values(by), accumulated, 4 * eps());
}

TEST_P(ElementwiseTest, BiasAddBroadcastsOverRows) {
  constexpr std::size_t rows = 9, cols = 13;
  const std::vector<double> x = random(rows * cols, 7), bias = random(cols, 8);
  std::vector<double> want(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c)
      want[r * cols + c] = x[r * cols + c] + bias[c];
  }
  Buffer out = empty(rows * cols);
  bias_add(make(x), make(bias), cols, out);
  expect_close(host_values(out), want, 4 * eps());
}

TEST_P(ElementwiseTest, SumRowsIsTheColumnSum) {
  constexpr std::size_t rows = 37, cols = 131;  // more than one 64-column block, a ragged tail
  const std::vector<double> x = random(rows * cols, 9);
  std::vector<double> want(cols, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c)
      want[c] += x[r * cols + c];
  }
  Buffer out = empty(cols);
  sum_rows(make(x), cols, out);
  // Accumulated in double (37 terms: error ~1e-14 absolute) and rounded once to the dtype.
  expect_close(host_values(out), want, 2 * eps());
}

TEST_P(ElementwiseTest, SumAccumulatesEveryElement) {
  constexpr std::size_t n = 100003;
  const std::vector<double> x = random(n, 10, 0.0, 1.0);
  double want = 0.0;
  for (double v : x)
    want += v;
  Buffer out = empty(1);
  sum(make(x), out);
  // Accumulated in double (n * 2^-52 relative) and rounded once to the dtype (eps relative).
  expect_close(host_values(out), {want}, 2 * eps() + n * 0x1p-52);
}

TEST_P(ElementwiseTest, SumOfNothingIsZero) {
  Buffer out = make({7.0});
  sum(empty(0), out);
  expect_close(host_values(out), {0.0}, 0.0);
}

}  // namespace
}  // namespace mpitron::test
