// gemm and gemm_batched against a naive triple loop in double. Each output is a k-term dot
// product; with inputs in [-2, 2] its rounding error is below k * eps * sum |a b| <= 4 k eps,
// so the tolerance is 4 k eps relative to max(1, |want|).
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernel_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

struct Shape {
  std::size_t m, n, k;
};

class GemmTest : public KernelTest {
 protected:
  // C = 0.5 op(A) op(B) + 0.25 C against the reference, for the four transpose combinations.
  void expect_every_transpose(Shape s) const;
};
MPITRON_KERNEL_TEST_SUITE(GemmTest);

/// C = alpha op(A) op(B) + beta C on row-major storage, the definition in ops.h.
std::vector<double> gemm_reference(bool ta, bool tb, Shape s, double alpha,
                                   const std::vector<double>& a, const std::vector<double>& b,
                                   double beta, std::vector<double> c) {
  for (std::size_t i = 0; i < s.m; ++i) {
    for (std::size_t j = 0; j < s.n; ++j) {
      double dot = 0.0;
      for (std::size_t p = 0; p < s.k; ++p) {
        dot += (ta ? a[p * s.m + i] : a[i * s.k + p]) * (tb ? b[j * s.k + p] : b[p * s.n + j]);
      }
      c[i * s.n + j] = alpha * dot + (beta == 0.0 ? 0.0 : beta * c[i * s.n + j]);
    }
  }
  return c;
}

void GemmTest::expect_every_transpose(Shape s) const {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << s.m << "x" << s.n << "x" << s.k << " ta=" << ta << " tb=" << tb);
      const std::vector<double> a = random(s.m * s.k, 30), b = random(s.k * s.n, 31);
      const std::vector<double> c0 = random(s.m * s.n, 32);
      Buffer c = make(c0);
      gemm(ta, tb, s.m, s.n, s.k, 0.5, make(a), make(b), 0.25, c);
      expect_close(host_values(c), gemm_reference(ta, tb, s, 0.5, a, b, 0.25, c0),
                   4.0 * s.k * eps());
    }
  }
}

TEST_P(GemmTest, AllTransposeCombinationsAtOddSizes) {
  // 3 x 1100 x 4: the CPU GEMM's 512-column panels, the last one ragged.
  for (Shape s : {Shape{7, 5, 3}, Shape{33, 17, 65}, Shape{1, 9, 1}, Shape{3, 1100, 4}})
    expect_every_transpose(s);
}

// The other tests run the provider the process starts with (MPITRON_GEMM, else the default);
// this one runs each provider the build has, then restores it.
TEST_P(GemmTest, EveryCpuProviderMatchesTheReference) {
  if (device() != Device::cpu) GTEST_SKIP() << "the providers are the CPU GEMM's";
  const GemmProvider before = gemm_provider();
  for (const GemmProvider provider :
       {GemmProvider::eigen, GemmProvider::blas, GemmProvider::mpitron}) {
    if (provider == GemmProvider::blas && !gemm_blas_available()) continue;
    set_gemm_provider(provider);
    SCOPED_TRACE(to_string(provider));
    expect_every_transpose(Shape{33, 17, 65});
    Buffer c = make({1.0, 2.0, 3.0, 4.0});
    gemm(false, false, 2, 2, 0, 1.0, empty(0), empty(0), 3.0, c);
    expect_close(host_values(c), {3.0, 6.0, 9.0, 12.0}, 0.0);
  }
  set_gemm_provider(before);
}

TEST(GemmProvider, AutoIsTheDefaultAndOtherNamesAreRefused) {
  EXPECT_EQ(parse_gemm_provider("auto"), default_gemm_provider());
  EXPECT_EQ(parse_gemm_provider("eigen"), GemmProvider::eigen);
  EXPECT_EQ(parse_gemm_provider("mpitron"), GemmProvider::mpitron);
  EXPECT_EQ(to_string(GemmProvider::mpitron), "mpitron");
  const int threads = cpu_threads();
  set_cpu_threads(1);
  EXPECT_EQ(default_gemm_provider(),
            gemm_blas_available() ? GemmProvider::blas : GemmProvider::eigen);
  set_cpu_threads(2);  // OpenBLAS keeps whole rows per tile: mpitron's GEMM is cut by columns too
  EXPECT_EQ(default_gemm_provider(), GemmProvider::mpitron);
  EXPECT_EQ(parse_gemm_provider("auto"), GemmProvider::mpitron);
  set_cpu_threads(threads);
  EXPECT_THROW(parse_gemm_provider("mkl"), std::invalid_argument);
  if (!gemm_blas_available()) {
    EXPECT_THROW(parse_gemm_provider("blas"), std::invalid_argument);
    EXPECT_THROW(set_gemm_provider(GemmProvider::blas), std::invalid_argument);
  }
}

TEST_P(GemmTest, BetaZeroIgnoresNanInC) {
  const Shape s{4, 6, 5};
  const std::vector<double> a = random(s.m * s.k, 33), b = random(s.k * s.n, 34);
  Buffer c = make(std::vector<double>(s.m * s.n, std::numeric_limits<double>::quiet_NaN()));
  gemm(false, false, s.m, s.n, s.k, 1.0, make(a), make(b), 0.0, c);
  const std::vector<double> zeros(s.m * s.n, 0.0);
  expect_close(host_values(c), gemm_reference(false, false, s, 1.0, a, b, 0.0, zeros),
               4.0 * s.k * eps());
}

TEST_P(GemmTest, EmptyInnerDimensionScalesC) {
  Buffer c = make({1.0, 2.0, 3.0, 4.0});
  gemm(false, false, 2, 2, 0, 1.0, empty(0), empty(0), 3.0, c);
  expect_close(host_values(c), {3.0, 6.0, 9.0, 12.0}, 0.0);
}

TEST_P(GemmTest, BatchedWithSharedAndStridedOperands) {
  const Shape s{5, 3, 4};
  constexpr std::size_t batch = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb);
      // A is strided per batch; B (stride 0) is one matrix shared by every product.
      const std::vector<double> a = random(batch * s.m * s.k, 35), b = random(s.k * s.n, 36);
      const std::vector<double> c0 = random(batch * s.m * s.n, 37);
      std::vector<double> want;
      for (std::size_t i = 0; i < batch; ++i) {
        const std::vector<double> ai(a.begin() + i * s.m * s.k, a.begin() + (i + 1) * s.m * s.k);
        const std::vector<double> ci(c0.begin() + i * s.m * s.n, c0.begin() + (i + 1) * s.m * s.n);
        const std::vector<double> out = gemm_reference(ta, tb, s, -1.0, ai, b, 0.5, ci);
        want.insert(want.end(), out.begin(), out.end());
      }
      Buffer c = make(c0);
      gemm_batched(ta, tb, batch, s.m, s.n, s.k, -1.0, make(a), s.m * s.k, make(b), 0, 0.5, c,
                   s.m * s.n);
      expect_close(host_values(c), want, 4.0 * s.k * eps());
    }
  }
}

TEST_P(GemmTest, BatchedWithSharedLeftOperand) {
  const Shape s{3, 4, 2};
  constexpr std::size_t batch = 2;
  const std::vector<double> a = random(s.m * s.k, 38), b = random(batch * s.k * s.n, 39);
  std::vector<double> want;
  for (std::size_t i = 0; i < batch; ++i) {
    const std::vector<double> bi(b.begin() + i * s.k * s.n, b.begin() + (i + 1) * s.k * s.n);
    const std::vector<double> out =
        gemm_reference(false, false, s, 1.0, a, bi, 0.0, std::vector<double>(s.m * s.n));
    want.insert(want.end(), out.begin(), out.end());
  }
  Buffer c = empty(batch * s.m * s.n);
  gemm_batched(false, false, batch, s.m, s.n, s.k, 1.0, make(a), 0, make(b), s.k * s.n, 0.0, c,
               s.m * s.n);
  expect_close(host_values(c), want, 4.0 * s.k * eps());
}

}  // namespace
}  // namespace mpitron::test
