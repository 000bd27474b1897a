// Forward values of the ops that the PyTorch parity test does not cover (matmul, element-wise
// arithmetic, sum/mean, shape ops) against naive index loops. Gradient checks only prove that
// backward is consistent with forward; these prove forward itself.
//
// Tolerances: data movement and single element-wise roundings are exact (EXPECT_EQ). matmul and
// sum accumulate K <= 24 products/terms of O(1) float64 values, error <= K u sum|terms|
// (Higham, Accuracy and Stability of Numerical Algorithms, section 3.1) ~ 24 * 1.1e-16 * 24 =
// 6e-14, so 1e-13 absolute.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "autograd_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

using Index = std::vector<std::int64_t>;
constexpr double kSumTolerance = 1e-13;

Index unravel(std::int64_t flat, const Shape& shape) {
  Index index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

std::int64_t ravel(const Index& index, const Shape& shape) {
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

class Forward : public AutogradTest {
 protected:
  // Checks every element of `got` (shape `shape`) against reference(index of that element).
  template <class Reference>
  void expect_elements(const Tensor& got, const Shape& shape, Reference reference,
                       double tolerance = 0.0) const {
    ASSERT_EQ(got.shape(), shape);
    const std::vector<double> values = got.to_vector();
    for (std::int64_t i = 0; i < got.numel(); ++i) {
      const double expected = reference(unravel(i, shape));
      EXPECT_NEAR(values[static_cast<std::size_t>(i)], expected, tolerance) << "element " << i;
    }
  }
};

TEST_P(Forward, MatmulAllTransposesBatchedAndSharedB) {
  const std::int64_t batch = 2, m = 3, k = 4, n = 5;
  for (const bool shared_b : {false, true}) {
    for (const bool trans_a : {false, true}) {
      for (const bool trans_b : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "shared_b " << shared_b << " trans_a " << trans_a
                                          << " trans_b " << trans_b);
        const Shape a_shape{batch, trans_a ? k : m, trans_a ? m : k};
        Shape b_shape{trans_b ? n : k, trans_b ? k : n};
        if (!shared_b) b_shape.insert(b_shape.begin(), batch);
        const Tensor a = normal(a_shape, 1), b = normal(b_shape, 2);
        const std::vector<double> av = a.to_vector(), bv = b.to_vector();
        expect_elements(
            matmul(a, b, trans_a, trans_b), {batch, m, n},
            [&](const Index& i) {
              double total = 0.0;
              for (std::int64_t p = 0; p < k; ++p) {
                const Index ai = trans_a ? Index{i[0], p, i[1]} : Index{i[0], i[1], p};
                Index bi = trans_b ? Index{i[2], p} : Index{p, i[2]};
                if (!shared_b) bi.insert(bi.begin(), i[0]);
                total += av[static_cast<std::size_t>(ravel(ai, a_shape))] *
                         bv[static_cast<std::size_t>(ravel(bi, b_shape))];
              }
              return total;
            },
            kSumTolerance);
      }
    }
  }
}

TEST_P(Forward, ElementWiseArithmeticIsExact) {
  const Shape shape{2, 3, 4};
  const Tensor a = normal(shape, 3), b = normal(shape, 4), bias = normal({4}, 5);
  const std::vector<double> av = a.to_vector(), bv = b.to_vector(), biasv = bias.to_vector();
  const auto at = [&](const std::vector<double>& v, const Index& i) {
    return v[static_cast<std::size_t>(ravel(i, shape))];
  };
  expect_elements(add(a, b), shape, [&](const Index& i) { return at(av, i) + at(bv, i); });
  expect_elements(add(a, bias), shape, [&](const Index& i) {
    return at(av, i) + biasv[static_cast<std::size_t>(i[2])];
  });
  expect_elements(sub(a, b), shape, [&](const Index& i) { return at(av, i) - at(bv, i); });
  expect_elements(mul(a, b), shape, [&](const Index& i) { return at(av, i) * at(bv, i); });
  expect_elements(scale(a, -0.75), shape, [&](const Index& i) { return -0.75 * at(av, i); });
}

TEST_P(Forward, SumAndMean) {
  const Tensor x = normal({4, 6}, 6);
  double total = 0.0;
  for (const double v : x.to_vector())
    total += v;
  expect_elements(
      sum(x), {}, [&](const Index&) { return total; }, kSumTolerance);
  expect_elements(
      mean(x), {}, [&](const Index&) { return total / 24.0; }, kSumTolerance);
}

TEST_P(Forward, ReshapeKeepsTheRowMajorOrder) {
  const Tensor x = normal({2, 3, 4}, 7);
  const Tensor y = reshape(x, {6, -1});
  EXPECT_EQ(y.shape(), (Shape{6, 4}));
  EXPECT_EQ(y.to_vector(), x.to_vector());
}

TEST_P(Forward, TransposeMovesEachElement) {
  const Shape shape{2, 3, 4, 5};
  const Tensor x = normal(shape, 8);
  const std::vector<double> xv = x.to_vector();
  for (const auto& [d0, d1] :
       {std::pair{0, 1}, std::pair{1, 3}, std::pair{-1, -2}, std::pair{0, 3}, std::pair{2, 2}}) {
    SCOPED_TRACE(::testing::Message() << "dims " << d0 << ", " << d1);
    const auto a = static_cast<std::size_t>(d0 < 0 ? d0 + 4 : d0);
    const auto b = static_cast<std::size_t>(d1 < 0 ? d1 + 4 : d1);
    Shape y_shape = shape;
    std::swap(y_shape[a], y_shape[b]);
    expect_elements(transpose(x, d0, d1), y_shape, [&](Index i) {
      std::swap(i[a], i[b]);
      return xv[static_cast<std::size_t>(ravel(i, shape))];
    });
  }
}

TEST_P(Forward, NarrowSplitAndConcatMoveEachElement) {
  const Shape shape{3, 4, 6};
  const Tensor x = normal(shape, 9);
  const std::vector<double> xv = x.to_vector();
  for (const int dim : {0, 1, 2}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const auto d = static_cast<std::size_t>(dim);
    const auto element_at_offset = [&](std::int64_t offset) {
      return [&, offset](Index i) {
        i[d] += offset;
        return xv[static_cast<std::size_t>(ravel(i, shape))];
      };
    };
    Shape narrow_shape = shape;
    narrow_shape[d] = 2;
    expect_elements(narrow(x, dim, 1, 2), narrow_shape, element_at_offset(1));

    const int chunks = dim == 1 ? 2 : 3;
    const std::int64_t chunk = shape[d] / chunks;
    const std::vector<Tensor> parts = split(x, chunks, dim);
    Shape part_shape = shape;
    part_shape[d] = chunk;
    for (std::size_t p = 0; p < parts.size(); ++p) {
      expect_elements(parts[p], part_shape,
                      element_at_offset(static_cast<std::int64_t>(p) * chunk));
    }
    // Concatenating the parts in reverse order moves each block to the mirrored position.
    const Tensor reversed = concat(std::vector<Tensor>(parts.rbegin(), parts.rend()), dim);
    const auto count = static_cast<std::int64_t>(parts.size());
    expect_elements(reversed, shape, [&](Index i) {
      i[d] = (count - 1 - i[d] / chunk) * chunk + i[d] % chunk;
      return xv[static_cast<std::size_t>(ravel(i, shape))];
    });
  }
}

// round_through_bf16 on values whose bfloat16 rounding is known by hand (7 fraction bits, so
// near 1 the ulp is 2^-7): 1 + 2^-8 is a tie and rounds to the even 1, 1 + 3 2^-8 a tie that
// rounds to the even 1 + 2^-6, 1 + 2^-8 + 2^-20 is past the tie and rounds up to 1 + 2^-7, -3 is
// exact. Backward rounds the gradient (here the same values) alike; float64 is refused.
TEST(RoundThroughBf16, RoundsToNearestEvenForwardAndBackward) {
  const double u = std::ldexp(1.0, -8);
  const std::vector<double> values{1 + u, 1 + 3 * u, 1 + u + std::ldexp(1.0, -20), -3.0};
  const std::vector<double> rounded{1.0, 1 + 4 * u, 1 + 2 * u, -3.0};
  const Tensor x = Tensor::from_vector(values, {4}).set_requires_grad();
  const Tensor y = round_through_bf16(x);
  EXPECT_EQ(y.to_vector(), rounded);
  sum(mul(y, Tensor::from_vector(values, {4}))).backward();
  EXPECT_EQ(x.grad().to_vector(), rounded);
  EXPECT_THROW(round_through_bf16(Tensor::zeros({2}, DType::f64)), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Devices, Forward, ::mpitron::test::all_devices(),
                         ::mpitron::test::device_dtype_name);

}  // namespace
}  // namespace mpitron::test
