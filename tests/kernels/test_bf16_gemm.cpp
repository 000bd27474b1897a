// The bfloat16 GEMM (cpu/packed_gemm_bf16.h, kernels::gemm_bf16) against a float64 product of
// the same bfloat16 inputs, within a bound derived from float32 accumulation:
//
// An element is alpha sum_p a_p b_p + beta c. A product of two bfloat16 values is exact in
// float32 (8 + 8 significand bits <= 24), so every rounding is of a sum (or of alpha * pass,
// or of beta c when beta is not 0 or 1): within a pass of at most 256 terms each term is added
// by one float32 fused multiply-add (convert_at_pack) or one per term of a VDPBF16PS pair (pair
// kernels), each pass is added to C by one more fused alpha * pass + C, and beta c is rounded
// once before. So each term meets at most r = k + passes + 2 roundings of relative size
// u = 2^-24, and as for recursive summation (Higham, "Accuracy and Stability of Numerical
// Algorithms", 2nd ed., sec. 3.1 and 4.2)
//   |C - exact| <= gamma_r (|alpha| sum_p |a_p b_p| + |beta c|),  gamma_r = r u / (1 - r u).
// (gamma_k of the plain dot product plus the passes: r = k + ceil(k / 256) + 2.) The float64
// reference adds its own k 2^-53 sum |a_p b_p| at most, which the bound includes. A bfloat16 C
// is the float32 result rounded once more, |bf16(x) - x| <= 2^-8 |x| (half an ulp of 8
// significand bits), so its bound is E (1 + 2^-8) + 2^-8 |exact| with E the float32 bound.
// Inputs are uniform in [-1, 1] rounded to bfloat16 (far above the denormals the pair kernels
// flush). The pair layout (VDPBF16PS's packing) is proven here by its scalar emulation on any
// CPU; the instruction itself runs only where the CPU has AVX512-BF16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gemm_test_support.h"
#include "kernels/bf16.h"
#include "kernels/build_info.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/packed_gemm_bf16.h"
#include "kernels/device.h"
#include "kernels/ops.h"

namespace mpitron::test {
namespace {

using kernels::bf16;
using kernels::cpu::Bf16Kernel;

using Case = GemmCase;

// uniform_floats rounded to bfloat16.
std::vector<bf16> random_bf16(std::size_t count, unsigned seed) {
  const std::vector<float> values = uniform_floats(count, seed);
  std::vector<bf16> v(count);
  std::transform(values.begin(), values.end(), v.begin(), kernels::to_bf16);
  return v;
}

double value(bf16 x) {
  return kernels::bf16_to_float(x);
}

// Sizes around the pair kernel's 12 x 32 tile and the float32 kernel's (6 or 12 rows, 16 or 32
// columns), a pass of k (the float32 kernel's 256 terms, the pair kernel's 1024) with an odd k
// past it, more than one block of rows (192) and panel of columns (the float32 kernel's 1024, the
// pair kernel's 2048), and k = 0.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      out.push_back({1, 1, 1, ta, tb});
      out.push_back({12, 32, 7, ta, tb});
      out.push_back({13, 33, 257, ta, tb});
      out.push_back({13, 33, 1025, ta, tb});
      out.push_back({37, 53, 71, ta, tb});
      out.push_back({5, 7, 0, ta, tb});
      out.push_back({200, 530, 67, ta, tb});
    }
  }
  out.push_back({14, 2100, 9, false, true});
  return out;
}

// One product of a case: its bfloat16 operands, stored as the case says, and an old C.
struct Operands {
  Case s;
  std::vector<bf16> a, b;
  std::vector<float> c0;
  std::size_t lda() const { return s.trans_a ? s.m : s.k; }
  std::size_t ldb() const { return s.trans_b ? s.k : s.n; }
  double at_a(std::size_t i, std::size_t p) const {
    return value(s.trans_a ? a[p * s.m + i] : a[i * s.k + p]);
  }
  double at_b(std::size_t p, std::size_t j) const {
    return value(s.trans_b ? b[j * s.k + p] : b[p * s.n + j]);
  }
};

Operands operands(const Case& s, unsigned seed) {
  return {s, random_bf16(s.m * s.k, seed), random_bf16(s.k * s.n, seed + 1),
          uniform_floats(s.m * s.n, seed + 2)};
}

// The largest |got - exact| / bound over C, with exact = alpha op(A) op(B) + beta c0 in float64
// and the bound of the top of this file (bf16_output: got was rounded to bfloat16) for float32
// roundings of unit u.
template <class Got>
double worst_error_over_bound(const Operands& o, double alpha, double beta, Got got,
                              bool bf16_output, double u = std::ldexp(1.0, -24)) {
  const Case& s = o.s;
  const double r = static_cast<double>(s.k + (s.k + 255) / 256 + 2);
  const double gamma = r * u / (1.0 - r * u);
  const double reference_error = static_cast<double>(s.k) * std::ldexp(1.0, -53);
  double worst = 0.0;
  for (std::size_t i = 0; i < s.m; ++i) {
    for (std::size_t j = 0; j < s.n; ++j) {
      double dot = 0.0, magnitude = 0.0;
      for (std::size_t p = 0; p < s.k; ++p) {
        const double term = o.at_a(i, p) * o.at_b(p, j);
        dot += term;
        magnitude += std::abs(term);
      }
      const double old = beta == 0.0 ? 0.0 : o.c0[i * s.n + j];
      const double exact = alpha * dot + beta * old;
      double bound = gamma * (std::abs(alpha) * magnitude + std::abs(beta * old)) +
                     reference_error * std::abs(alpha) * magnitude;
      if (bf16_output)
        bound = bound * (1.0 + std::ldexp(1.0, -8)) + std::ldexp(std::abs(exact), -8);
      const double error = std::abs(got(i, j) - exact);
      if (error == 0.0) continue;
      worst = std::max(worst, bound > 0.0 ? error / bound : HUGE_VAL);
    }
  }
  return worst;
}

std::vector<Bf16Kernel> kernels_here() {
  std::vector<Bf16Kernel> out{Bf16Kernel::convert_at_pack, Bf16Kernel::avx512bf16_emulated};
  if (kernels::cpu::cpu_has_avx512_bf16()) out.push_back(Bf16Kernel::avx512bf16);
  return out;
}

const char* name(Bf16Kernel kernel) {
  switch (kernel) {
    case Bf16Kernel::avx512bf16:
      return "avx512bf16";
    case Bf16Kernel::avx512bf16_emulated:
      return "avx512bf16 emulated";
    case Bf16Kernel::convert_at_pack:
      break;
  }
  return "convert_at_pack";
}

std::string describe(const Case& s, Bf16Kernel kernel, double alpha, double beta) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
         " ta=" + std::to_string(s.trans_a) + " tb=" + std::to_string(s.trans_b) + " " +
         name(kernel) + " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta);
}

// float32 C: overwrite (beta 0), accumulate (C += A B, the main-gradient accumulation) and a
// general alpha and beta, every transpose, every kernel this CPU runs.
TEST(Bf16Gemm, Float32OutputIsWithinTheFloat32AccumulationBound) {
  for (const Bf16Kernel kernel : kernels_here()) {
    for (const Case& s : cases()) {
      const Operands o = operands(s, 11);
      for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.75f, 0.5f}}) {
        SCOPED_TRACE(describe(s, kernel, alpha, beta));
        std::vector<float> c = o.c0;
        kernels::cpu::packed_gemm_bf16(kernel, s.trans_a, s.trans_b, s.m, s.n, s.k, alpha,
                                       o.a.data(), o.lda(), o.b.data(), o.ldb(), beta, c.data(),
                                       s.n);
        const double worst = worst_error_over_bound(
            o, alpha, beta, [&](std::size_t i, std::size_t j) { return c[i * s.n + j]; }, false);
        EXPECT_LE(worst, 1.0) << "largest error over its bound";
      }
    }
  }
}

// bfloat16 C: alpha op(A) op(B) + beta C in float32, rounded once: the bound, and the bits of
// the float32-output call's result rounded by to_bf16, on both paths (beta = 0 with k within
// one pass rounds each tile from L1; k = 0, k = 1025 or beta != 0 go through the workspace).
TEST(Bf16Gemm, Bfloat16OutputIsTheFloat32ResultRoundedOnce) {
  for (const Bf16Kernel kernel : kernels_here()) {
    for (const Case& s : cases()) {
      Operands o = operands(s, 21);
      std::vector<bf16> c0(o.c0.size());
      for (std::size_t i = 0; i < c0.size(); ++i) {
        c0[i] = kernels::to_bf16(o.c0[i]);
        o.c0[i] = kernels::bf16_to_float(c0[i]);  // the reference's old C is the bfloat16 one
      }
      for (auto [alpha, beta] :
           {std::pair{1.0f, 0.0f}, {0.75f, 0.0f}, {0.75f, 0.5f}, {1.0f, 1.0f}}) {
        SCOPED_TRACE(describe(s, kernel, alpha, beta));
        std::vector<bf16> c = c0;
        std::vector<float> wide = o.c0;
        kernels::cpu::packed_gemm_bf16(kernel, s.trans_a, s.trans_b, s.m, s.n, s.k, alpha,
                                       o.a.data(), o.lda(), o.b.data(), o.ldb(), beta, c.data(),
                                       s.n);
        kernels::cpu::packed_gemm_bf16(kernel, s.trans_a, s.trans_b, s.m, s.n, s.k, alpha,
                                       o.a.data(), o.lda(), o.b.data(), o.ldb(), beta, wide.data(),
                                       s.n);
        for (std::size_t i = 0; i < c.size(); ++i)
          ASSERT_EQ(c[i].bits, kernels::float_to_bf16_bits(wide[i])) << "element " << i;
        const double worst = worst_error_over_bound(
            o, alpha, beta, [&](std::size_t i, std::size_t j) { return value(c[i * s.n + j]); },
            true);
        EXPECT_LE(worst, 1.0) << "largest error over its bound";
      }
    }
  }
}

// A bfloat16 C whose float32 results are denormals (alpha 0.25 times sums of 2^-125, the pass
// itself flushes none) beside normal ones, in full 12 x 32 tiles: the rounding keeps the
// denormals (to_bf16's rule) where VDPBF16PS's rounding instruction alone would count them as zero.
TEST(Bf16Gemm, Bfloat16OutputKeepsDenormalResults) {
  const std::size_t m = 24, n = 64, k = 2;
  std::vector<bf16> a(m * k), b(k * n, kernels::to_bf16(0x1p-63f));
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t p = 0; p < k; ++p)
      a[i * k + p] = kernels::to_bf16(i % 3 == 0 ? 1.0f : 0x1p-63f);
  }
  for (const Bf16Kernel kernel : kernels_here()) {
    SCOPED_TRACE(name(kernel));
    std::vector<bf16> c(m * n);
    std::vector<float> wide(m * n);
    kernels::cpu::packed_gemm_bf16(kernel, false, false, m, n, k, 0.25f, a.data(), k, b.data(), n,
                                   0.0f, c.data(), n);
    kernels::cpu::packed_gemm_bf16(kernel, false, false, m, n, k, 0.25f, a.data(), k, b.data(), n,
                                   0.0f, wide.data(), n);
    std::size_t denormals = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      ASSERT_EQ(c[i].bits, kernels::float_to_bf16_bits(wide[i])) << "element " << i;
      denormals += std::fpclassify(wide[i]) == FP_SUBNORMAL && c[i].bits == 0x0040;
    }
    EXPECT_EQ(denormals, m / 3 * 2 * n) << "rows of 0.25 * 2^-125 = 2^-127, bfloat16 bits 0x0040";
  }
}

// convert_at_pack widens exactly and reuses the float32 GEMM: the bits of packed_sgemm on the
// widened operands.
TEST(Bf16Gemm, ConvertAtPackHasTheBitsOfTheFloat32GemmOnWidenedInputs) {
  for (const Case& s : cases()) {
    SCOPED_TRACE(describe(s, Bf16Kernel::convert_at_pack, 0.5, 1.0));
    const Operands o = operands(s, 31);
    std::vector<float> a(o.a.size()), b(o.b.size());
    std::transform(o.a.begin(), o.a.end(), a.begin(), kernels::bf16_to_float);
    std::transform(o.b.begin(), o.b.end(), b.begin(), kernels::bf16_to_float);
    std::vector<float> want = o.c0, got = o.c0;
    kernels::cpu::packed_sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 0.5f, a.data(), o.lda(),
                               b.data(), o.ldb(), 1.0f, want.data(), s.n);
    kernels::cpu::packed_gemm_bf16(Bf16Kernel::convert_at_pack, s.trans_a, s.trans_b, s.m, s.n, s.k,
                                   0.5f, o.a.data(), o.lda(), o.b.data(), o.ldb(), 1.0f, got.data(),
                                   s.n);
    EXPECT_EQ(got, want);
  }
}

// C = op(A) op(B) for one row of A and one column of B given as k values (bfloat16 bits).
float dot_of(Bf16Kernel kernel, const std::vector<std::uint16_t>& a,
             const std::vector<std::uint16_t>& b) {
  std::vector<bf16> av, bv;
  for (std::size_t p = 0; p < a.size(); ++p) {
    av.push_back(bf16{a[p]});
    bv.push_back(bf16{b[p]});
  }
  float c = 0.0f;
  kernels::cpu::packed_gemm_bf16(kernel, false, false, 1, 1, a.size(), 1.0f, av.data(), a.size(),
                                 bv.data(), 1, 0.0f, &c, 1);
  return c;
}

constexpr std::uint16_t kOne = 0x3F80, kZero = 0x0000;
constexpr std::uint16_t kTwoToMinus12 = 0x3980, kMinusTwoToMinus12 = 0xB980;  // +-2^-12

// The emulation follows VDPBF16PS's documented order: per pair, the high term (2q + 1) first. With
// 1 in the accumulator, + 2^-24 is a tie that stays at 1, then - 2^-24 gives 1 - 2^-24; in k
// order (convert_at_pack) - 2^-24 comes first and the sum returns to 1.
TEST(Bf16Gemm, TheEmulationAddsTheHighTermOfAPairFirst) {
  const std::vector<std::uint16_t> a{kOne, kZero, kMinusTwoToMinus12, kTwoToMinus12};
  const std::vector<std::uint16_t> b{kOne, kZero, kTwoToMinus12, kTwoToMinus12};
  EXPECT_EQ(dot_of(Bf16Kernel::convert_at_pack, a, b), 1.0f);
  EXPECT_EQ(dot_of(Bf16Kernel::avx512bf16_emulated, a, b), 1.0f - std::ldexp(1.0f, -24));
}

// VDPBF16PS as documented treats bfloat16 denormal inputs as zero and flushes float32 denormal
// results; the emulation does, and the converting path keeps both.
TEST(Bf16Gemm, TheEmulationFlushesDenormalsAndConvertAtPackKeepsThem) {
  const std::uint16_t smallest_denormal = 0x0001;  // 2^-133
  const std::uint16_t two_to_100 = 0x7180, two_to_minus_100 = 0x0D80, two_to_minus_30 = 0x3080;
  // A denormal input times 2^100: 2^-33 when kept, 0 when the input counts as zero.
  EXPECT_EQ(dot_of(Bf16Kernel::convert_at_pack, {smallest_denormal}, {two_to_100}),
            std::ldexp(1.0f, -33));
  EXPECT_EQ(dot_of(Bf16Kernel::avx512bf16_emulated, {smallest_denormal}, {two_to_100}), 0.0f);
  // A product of normals below float32's normal range: 2^-130 when kept, 0 when flushed.
  EXPECT_EQ(dot_of(Bf16Kernel::convert_at_pack, {two_to_minus_100}, {two_to_minus_30}),
            std::ldexp(1.0f, -130));
  EXPECT_EQ(dot_of(Bf16Kernel::avx512bf16_emulated, {two_to_minus_100}, {two_to_minus_30}), 0.0f);
}

// The instruction itself is held to the float32-accumulation bound
// (Float32OutputIsWithinTheFloat32AccumulationBound, kernels_here) and to the block and thread
// tests below, never to its emulation's bits: dot instructions of other vendors' silicon have been
// measured to round their partial sums differently from their manuals' pseudocode, and no CPU this
// project tests on could confirm either vendor's VDPBF16PS bit for bit. The emulation checks that
// the pair layout is packed and walked as the instruction reads it.
TEST(Bf16Gemm, TheRealKernelIsRefusedWithoutTheInstruction) {
  if (kernels::cpu::cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU has AVX512-BF16";
  float c = 0.0f;
  const bf16 one{kOne};
  EXPECT_THROW(kernels::cpu::packed_gemm_bf16(Bf16Kernel::avx512bf16, false, false, 1, 1, 1, 1.0f,
                                              &one, 1, &one, 1, 0.0f, &c, 1),
               std::logic_error);
  EXPECT_EQ(kernels::bf16_gemm_path(), kernels::Bf16GemmPath::convert_at_pack);
}

// The VDPBF16PS peak is measured only where the instruction is (bench gemm --dtype bfloat16).
TEST(Bf16Gemm, TheDotPeakIsMeasuredWhereTheInstructionIs) {
  const double peak = kernels::cpu_bf16_dot_peak_gflops(0.01);
  if (kernels::cpu::cpu_has_avx512_bf16()) {
    EXPECT_GT(peak, 0.0);
  } else {
    EXPECT_EQ(peak, 0.0);
  }
}

// Any block of rows and columns computed as a product of its own has the whole call's bits
// (what the threads' tiles rely on), for every kernel.
TEST(Bf16Gemm, AnyBlockOfTheProductHasTheBitsOfTheWholeCall) {
  const Case s{41, 70, 300, true, false};
  const Operands o = operands(s, 51);
  for (const Bf16Kernel kernel : kernels_here()) {
    SCOPED_TRACE(name(kernel));
    std::vector<float> whole = o.c0, pieces = o.c0;
    kernels::cpu::packed_gemm_bf16(kernel, s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, o.a.data(),
                                   o.lda(), o.b.data(), o.ldb(), 1.0f, whole.data(), s.n);
    for (auto [r0, r1] : {std::pair<std::size_t, std::size_t>{0, 17}, {17, 41}}) {
      for (auto [c0, c1] : {std::pair<std::size_t, std::size_t>{0, 45}, {45, 70}}) {
        kernels::cpu::packed_gemm_bf16(kernel, s.trans_a, s.trans_b, r1 - r0, c1 - c0, s.k, 1.0f,
                                       o.a.data() + r0, o.lda(), o.b.data() + c0, o.ldb(), 1.0f,
                                       pieces.data() + r0 * s.n + c0, s.n);
      }
    }
    EXPECT_EQ(pieces, whole);
  }
}

// op(A) and op(B) stored either way give the kernels the same pair words (B stored with k fastest
// goes through the in-register transpose on AVX-512 CPUs, A so stored is read in place or from a
// copy of its rows; one stored [k, outer] interleaves two rows), so every storage gives the same
// bits, for every kernel; also with a row stride that leaves the rows' words unaligned, and one of
// 4 KiB, whose rows would share L1 sets and are copied. 37 x 45 with 300 terms: whole 16 x 16
// blocks and the rows, columns and pairs past them.
TEST(Bf16Gemm, EveryStorageOfTheOperandsGivesTheSameBits) {
  const std::size_t m = 37, n = 45, k = 300, ld = k + 3;
  const std::vector<bf16> a = random_bf16(m * k, 81), b = random_bf16(n * k, 82);  // [m|n, k]
  constexpr std::size_t kWideLd = 2048;                                            // 4096 bytes
  std::vector<bf16> a_strided(m * ld), a_wide(m * kWideLd), a_t(k * m), b_t(k * n);
  for (std::size_t p = 0; p < k; ++p) {
    for (std::size_t i = 0; i < m; ++i) {
      a_strided[i * ld + p] = a[i * k + p];
      a_wide[i * kWideLd + p] = a[i * k + p];
      a_t[p * m + i] = a[i * k + p];
    }
    for (std::size_t j = 0; j < n; ++j)
      b_t[p * n + j] = b[j * k + p];
  }
  for (const Bf16Kernel kernel : kernels_here()) {
    SCOPED_TRACE(name(kernel));
    const auto product = [&](bool trans_a, const bf16* x, std::size_t lda, bool trans_b,
                             const bf16* y, std::size_t ldb) {
      std::vector<float> c(m * n, 0.0f);
      kernels::cpu::packed_gemm_bf16(kernel, trans_a, trans_b, m, n, k, 1.0f, x, lda, y, ldb, 0.0f,
                                     c.data(), n);
      return c;
    };
    const std::vector<float> want = product(true, a_t.data(), m, false, b_t.data(), n);
    EXPECT_EQ(product(false, a.data(), k, false, b_t.data(), n), want);
    EXPECT_EQ(product(false, a_strided.data(), ld, false, b_t.data(), n), want);
    EXPECT_EQ(product(false, a_wide.data(), kWideLd, false, b_t.data(), n), want);
    EXPECT_EQ(product(true, a_t.data(), m, true, b.data(), k), want);
    EXPECT_EQ(product(false, a.data(), k, true, b.data(), k), want);
  }
}

// kernels::gemm_bf16 on buffers: the CPU path's bits (packed_gemm_bf16 on bf16_gemm_path()) at
// 1 and 3 threads, into float32 and bfloat16 C, on a product large enough to be cut into tiles.
TEST(Bf16Gemm, TheOpHasThePathsBitsAtEveryThreadCount) {
  const int before = kernels::cpu_threads();
  const Case s{301, 257, 190, false, true};
  const Operands o = operands(s, 61);
  const Bf16Kernel kernel = kernels::bf16_gemm_path() == kernels::Bf16GemmPath::avx512bf16
                                ? Bf16Kernel::avx512bf16
                                : Bf16Kernel::convert_at_pack;
  std::vector<float> want = o.c0;
  kernels::cpu::packed_gemm_bf16(kernel, s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, o.a.data(),
                                 o.lda(), o.b.data(), o.ldb(), 1.0f, want.data(), s.n);
  kernels::Buffer a(o.a.size(), kernels::DType::bf16, kernels::Device::cpu);
  kernels::Buffer b(o.b.size(), kernels::DType::bf16, kernels::Device::cpu);
  std::copy(o.a.begin(), o.a.end(), a.data_as<bf16>());
  std::copy(o.b.begin(), o.b.end(), b.data_as<bf16>());
  for (const int threads : {1, 3}) {
    kernels::set_cpu_threads(threads);
    kernels::Buffer c(want.size(), kernels::DType::f32, kernels::Device::cpu);
    std::copy(o.c0.begin(), o.c0.end(), c.data_as<float>());
    kernels::gemm_bf16(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0, a, b, 1.0, c);
    kernels::Buffer h(want.size(), kernels::DType::bf16, kernels::Device::cpu);
    kernels::gemm_bf16(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0, a, b, 0.0, h);
    std::vector<float> fresh(want.size(), 0.0f);
    kernels::cpu::packed_gemm_bf16(kernel, s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, o.a.data(),
                                   o.lda(), o.b.data(), o.ldb(), 0.0f, fresh.data(), s.n);
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(c.data_as<float>()[i], want[i]) << "element " << i << " at " << threads;
      ASSERT_EQ(h.data_as<bf16>()[i].bits, kernels::float_to_bf16_bits(fresh[i]))
          << "element " << i << " at " << threads;
    }
  }
  kernels::set_cpu_threads(before);
}

// gemm on float32 buffers under bfloat16 operands (train --bf16) is gemm_bf16 of the operands
// rounded by convert, bit for bit, into float32 C with beta 0 and 1 (the main-gradient
// accumulation); gemm_batched keeps float32 operands, and float32 operands come back when set.
// A bfloat16 A or B beside a float32 one (an activation kept as bfloat16) is the same product
// under either setting.
TEST(Bf16Gemm, Bfloat16OperandsOfAFloat32GemmAreItsInputsRounded) {
  const Case s{37, 45, 300, false, true};
  const std::vector<float> a_values = uniform_floats(s.m * s.k, 81);
  const std::vector<float> b_values = uniform_floats(s.k * s.n, 82);
  const std::vector<float> c_values = uniform_floats(s.m * s.n, 83);
  const auto buffer = [](const std::vector<float>& values, kernels::DType dtype) {
    kernels::Buffer f(values.size(), kernels::DType::f32, kernels::Device::cpu);
    std::copy(values.begin(), values.end(), f.data_as<float>());
    if (dtype == kernels::DType::f32) return f;
    kernels::Buffer rounded(values.size(), dtype, kernels::Device::cpu);
    kernels::convert(f, rounded);
    return rounded;
  };
  const auto floats = [](const kernels::Buffer& b) {
    return std::vector<float>(b.data_as<float>(), b.data_as<float>() + b.numel());
  };
  const kernels::Buffer a = buffer(a_values, kernels::DType::f32);
  const kernels::Buffer b = buffer(b_values, kernels::DType::f32);
  const kernels::Buffer a16 = buffer(a_values, kernels::DType::bf16);
  const kernels::Buffer b16 = buffer(b_values, kernels::DType::bf16);
  for (const double beta : {0.0, 1.0}) {
    kernels::Buffer want = buffer(c_values, kernels::DType::f32);
    kernels::gemm_bf16(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0, a16, b16, beta, want);
    kernels::Buffer full = buffer(c_values, kernels::DType::f32);
    kernels::gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0, a, b, beta, full);
    kernels::set_gemm_operands(kernels::GemmOperands::bfloat16);
    kernels::Buffer got = buffer(c_values, kernels::DType::f32);
    kernels::gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0, a, b, beta, got);
    kernels::Buffer batched = buffer(c_values, kernels::DType::f32);
    kernels::gemm_batched(s.trans_a, s.trans_b, 1, s.m, s.n, s.k, 1.0, a, 0, b, 0, beta, batched,
                          0);
    kernels::set_gemm_operands(kernels::GemmOperands::float32);
    kernels::Buffer again = buffer(c_values, kernels::DType::f32);
    kernels::gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0, a, b, beta, again);
    kernels::Buffer a_rounded = buffer(c_values, kernels::DType::f32);
    kernels::gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0, a16, b, beta, a_rounded);
    kernels::Buffer b_rounded = buffer(c_values, kernels::DType::f32);
    kernels::gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0, a, b16, beta, b_rounded);
    EXPECT_EQ(floats(got), floats(want)) << "beta " << beta;
    EXPECT_EQ(floats(a_rounded), floats(want)) << "a bfloat16 A, float32 B";
    EXPECT_EQ(floats(b_rounded), floats(want)) << "float32 A, a bfloat16 B";
    EXPECT_NE(floats(got), floats(full)) << "the bfloat16 operands must change the product";
    EXPECT_EQ(floats(batched), floats(full)) << "gemm_batched keeps float32 operands";
    EXPECT_EQ(floats(again), floats(full)) << "float32 operands after set back";
  }
}

// cuBLAS's bfloat16 GEMM (cublasGemmEx, float32 compute) within the same bound for a unit of
// 2^-23: its tensor cores may add in float32 rounding toward zero, not to nearest (Fasi et al.,
// "Numerical behavior of NVIDIA tensor cores", PeerJ Computer Science 7:e330, 2021), and its
// order of summation is its own.
TEST(Bf16Gemm, CudaIsWithinTheFloat32AccumulationBound) {
  if (!kernels::cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const Case& s : cases()) {
    if (s.k == 0) continue;
    const Operands o = operands(s, 71);
    kernels::Buffer a(o.a.size(), kernels::DType::bf16, kernels::Device::cpu);
    kernels::Buffer b(o.b.size(), kernels::DType::bf16, kernels::Device::cpu);
    kernels::Buffer c(o.c0.size(), kernels::DType::f32, kernels::Device::cpu);
    std::copy(o.a.begin(), o.a.end(), a.data_as<bf16>());
    std::copy(o.b.begin(), o.b.end(), b.data_as<bf16>());
    std::copy(o.c0.begin(), o.c0.end(), c.data_as<float>());
    const kernels::Buffer ga = a.to(kernels::Device::cuda), gb = b.to(kernels::Device::cuda);
    kernels::Buffer gc = c.to(kernels::Device::cuda);
    kernels::gemm_bf16(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0, ga, gb, 1.0, gc);
    const kernels::Buffer got = gc.to(kernels::Device::cpu);
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k));
    EXPECT_LE(worst_error_over_bound(
                  o, 1.0, 1.0,
                  [&](std::size_t i, std::size_t j) { return got.data_as<float>()[i * s.n + j]; },
                  false, std::ldexp(1.0, -23)),
              1.0);
  }
}

}  // namespace
}  // namespace mpitron::test
