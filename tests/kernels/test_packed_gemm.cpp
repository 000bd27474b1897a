// The packed float32 GEMM (cpu/packed_gemm.h) against a naive loop in double, and its promise
// that each element's bits do not depend on how the product is cut. With inputs in [-1, 1] an
// element is k products summed in passes of kDepth terms (k - 1 additions), each pass times
// alpha and added to C (beta C first): at most k + 2 passes + 1 roundings, each of relative size
// eps = 2^-24 on a partial result no larger than |alpha| k + |beta c| (Higham, "Accuracy and
// Stability of Numerical Algorithms", 2nd ed., section 3.1), which is the tolerance.
#include "kernels/cpu/packed_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "gemm_test_support.h"

namespace mpitron::test {
namespace {

using kernels::cpu::packed_gemm_shape;
using kernels::cpu::packed_sgemm;

using Case = GemmCase;

float at_a(const Case& s, const std::vector<float>& a, std::size_t i, std::size_t p) {
  return s.trans_a ? a[p * s.m + i] : a[i * s.k + p];
}

float at_b(const Case& s, const std::vector<float>& b, std::size_t p, std::size_t j) {
  return s.trans_b ? b[j * s.k + p] : b[p * s.n + j];
}

// Sizes around the micro-tile (rows, columns), a pass of k (depth), more than one block of
// rows and panel of columns (panels that hold all of k), the tiles of the fused attention, k =
// 1024, where row-major A's rows share L1 sets and are copied to a padded stride rather than read
// in place, and k = 1031 over 1030 columns: k too long for a panel to hold all of it, so each
// pass is packed on its own, in two panels of columns.
std::vector<Case> cases() {
  const auto shape = packed_gemm_shape();
  std::vector<Case> out;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      out.push_back({1, 1, 1, ta, tb});
      out.push_back({shape.rows, shape.columns, 7, ta, tb});
      out.push_back({shape.rows + 1, shape.columns - 1, shape.depth + 1, ta, tb});
      out.push_back({64, 64, 32, ta, tb});
      out.push_back({37, 53, 71, ta, tb});
      out.push_back({17 * shape.rows + 5, 530, 2 * shape.depth + 9, ta, tb});
      out.push_back({2 * shape.rows + 3, 40, 1024, ta, tb});
      out.push_back({shape.rows + 1, 1030, 1031, ta, tb});
    }
  }
  return out;
}

TEST(PackedGemm, MatchesTheDoubleLoopForEveryTransposeAndScale) {
  constexpr double kEps = std::numeric_limits<float>::epsilon() / 2;
  for (const Case& s : cases()) {
    const std::size_t passes = (s.k + packed_gemm_shape().depth - 1) / packed_gemm_shape().depth;
    for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.5f, 0.25f}}) {
      SCOPED_TRACE(::testing::Message()
                   << s.m << "x" << s.n << "x" << s.k << " ta=" << s.trans_a << " tb=" << s.trans_b
                   << " alpha=" << alpha << " beta=" << beta);
      const std::vector<float> a = uniform_floats(s.m * s.k, 1), b = uniform_floats(s.k * s.n, 2);
      const std::vector<float> c0 = uniform_floats(s.m * s.n, 3);
      std::vector<float> c = c0;
      packed_sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, alpha, a.data(), s.trans_a ? s.m : s.k,
                   b.data(), s.trans_b ? s.k : s.n, beta, c.data(), s.n);
      double worst = 0.0;
      for (std::size_t i = 0; i < s.m; ++i) {
        for (std::size_t j = 0; j < s.n; ++j) {
          double dot = 0.0;
          for (std::size_t p = 0; p < s.k; ++p)
            dot += static_cast<double>(at_a(s, a, i, p)) * at_b(s, b, p, j);
          const double old = c0[i * s.n + j];
          const double want = alpha * dot + (beta == 0.0f ? 0.0 : beta * old);
          const double bound = static_cast<double>(s.k + 2 * passes + 1) * kEps *
                               (std::abs(alpha) * static_cast<double>(s.k) + std::abs(beta * old));
          worst = std::max(worst, std::abs(c[i * s.n + j] - want) / bound);
        }
      }
      EXPECT_LE(worst, 1.0) << "largest error over its bound";
    }
  }
}

TEST(PackedGemm, BetaZeroNeverReadsCAndEmptyKScalesC) {
  const std::vector<float> a = uniform_floats(5 * 3, 4), b = uniform_floats(3 * 7, 5);
  std::vector<float> c(5 * 7, std::numeric_limits<float>::quiet_NaN());
  packed_sgemm(false, false, 5, 7, 3, 1.0f, a.data(), 3, b.data(), 7, 0.0f, c.data(), 7);
  for (float x : c)
    EXPECT_TRUE(std::isfinite(x));
  std::vector<float> d(4, 2.0f);
  packed_sgemm(false, false, 2, 2, 0, 1.0f, a.data(), 1, b.data(), 2, 0.5f, d.data(), 2);
  for (float x : d)
    EXPECT_EQ(x, 1.0f);
}

// The rows [r0, r1) and columns [c0, c1) of a product computed as a product of their own give
// the bits of the whole call: each element is summed the same way whatever the cut.
TEST(PackedGemm, AnyBlockOfTheProductHasTheBitsOfTheWholeCall) {
  const auto shape = packed_gemm_shape();
  for (const Case& s : cases()) {
    if (s.m < 3 || s.n < 3) continue;
    SCOPED_TRACE(::testing::Message()
                 << s.m << "x" << s.n << "x" << s.k << " ta=" << s.trans_a << " tb=" << s.trans_b);
    const std::size_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
    const std::vector<float> a = uniform_floats(s.m * s.k, 6), b = uniform_floats(s.k * s.n, 7);
    std::vector<float> whole = uniform_floats(s.m * s.n, 8), pieces = whole;
    packed_sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 0.75f, a.data(), lda, b.data(), ldb, 0.5f,
                 whole.data(), s.n);
    // Cuts that are not multiples of the micro-tile, so rows and columns change tiles.
    const std::size_t row_cut = std::min(s.m - 1, shape.rows / 2 + 1);
    const std::size_t col_cut = std::min(s.n - 1, shape.columns / 2 + 3);
    for (auto [r0, r1] : {std::pair{std::size_t{0}, row_cut}, {row_cut, s.m}}) {
      for (auto [c0, c1] : {std::pair{std::size_t{0}, col_cut}, {col_cut, s.n}}) {
        const float* a0 = a.data() + (s.trans_a ? r0 : r0 * lda);
        const float* b0 = b.data() + (s.trans_b ? c0 * ldb : c0);
        packed_sgemm(s.trans_a, s.trans_b, r1 - r0, c1 - c0, s.k, 0.75f, a0, lda, b0, ldb, 0.5f,
                     pieces.data() + r0 * s.n + c0, s.n);
      }
    }
    EXPECT_EQ(pieces, whole);
  }
}

// Row-major A with rows 1024 floats apart is read from a copy at a padded stride (its rows share
// L1 sets), the same A with rows 1025 apart in place: both give the same bits.
TEST(PackedGemm, ReadingAInPlaceOrFromACopyGivesTheSameBits) {
  const std::size_t m = 3 * packed_gemm_shape().rows + 2, n = 45, k = 1024;
  const std::vector<float> a = uniform_floats(m * k, 9), b = uniform_floats(k * n, 10);
  std::vector<float> padded(m * (k + 1), 0.0f);
  for (std::size_t i = 0; i < m; ++i)
    std::copy(a.begin() + i * k, a.begin() + (i + 1) * k, padded.begin() + i * (k + 1));
  std::vector<float> copied = uniform_floats(m * n, 11), in_place = copied;
  packed_sgemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 1.0f, copied.data(), n);
  packed_sgemm(false, false, m, n, k, 1.0f, padded.data(), k + 1, b.data(), n, 1.0f,
               in_place.data(), n);
  EXPECT_EQ(copied, in_place);
}

}  // namespace
}  // namespace mpitron::test
