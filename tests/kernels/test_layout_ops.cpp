// transpose and copy_rows only move elements, so results must be bit-exact (tolerance 0).
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "kernel_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

using LayoutTest = KernelTest;
MPITRON_KERNEL_TEST_SUITE(LayoutTest);

TEST_P(LayoutTest, TransposeSwapsTheTwoDims) {
  constexpr std::size_t outer = 2, d1 = 3, mid = 2, d2 = 5, inner = 3;
  const std::vector<double> x = random(outer * d1 * mid * d2 * inner, 11);
  std::vector<double> want(x.size());
  for (std::size_t o = 0; o < outer; ++o) {
    for (std::size_t i = 0; i < d1; ++i) {
      for (std::size_t m = 0; m < mid; ++m) {
        for (std::size_t j = 0; j < d2; ++j) {
          for (std::size_t e = 0; e < inner; ++e) {
            want[(((o * d2 + j) * mid + m) * d1 + i) * inner + e] =
                x[(((o * d1 + i) * mid + m) * d2 + j) * inner + e];
          }
        }
      }
    }
  }
  Buffer y = empty(x.size());
  transpose(make(x), outer, d1, mid, d2, inner, y);
  expect_close(host_values(y), want, 0.0);
}

TEST_P(LayoutTest, TransposeOfAMatrixIsTheMatrixTranspose) {
  // [[1, 2, 3], [4, 5, 6]] -> [[1, 4], [2, 5], [3, 6]]
  Buffer y = empty(6);
  transpose(make({1, 2, 3, 4, 5, 6}), 1, 2, 1, 3, 1, y);
  expect_close(host_values(y), {1, 4, 2, 5, 3, 6}, 0.0);
}

TEST_P(LayoutTest, CopyRowsMovesStridedBlocks) {
  // Copy a [3, 2] block starting at column 1 of a [3, 4] source into columns 2..3 of a [3, 5]
  // destination: a narrow followed by a concat.
  const std::vector<double> src = random(12, 12);
  std::vector<double> want(15, -1.0);
  for (std::size_t r = 0; r < 3; ++r) {
    for (std::size_t c = 0; c < 2; ++c)
      want[r * 5 + 2 + c] = src[r * 4 + 1 + c];
  }
  Buffer dst = make(std::vector<double>(15, -1.0));
  copy_rows(make(src), 1, 4, dst, 2, 5, 3, 2);
  expect_close(host_values(dst), want, 0.0);
}

TEST_P(LayoutTest, CopyRowsPastTheEndThrows) {
  const Buffer src = make(std::vector<double>(12, 0.0));
  Buffer dst = empty(15);
  EXPECT_THROW(copy_rows(src, 2, 4, dst, 0, 5, 3, 3), std::out_of_range);  // src needs 13
  EXPECT_THROW(copy_rows(src, 0, 4, dst, 3, 5, 3, 3), std::out_of_range);  // dst needs 16
  EXPECT_NO_THROW(copy_rows(src, 1, 4, dst, 2, 5, 3, 3));                  // exactly fits
}

}  // namespace
}  // namespace mpitron::test
