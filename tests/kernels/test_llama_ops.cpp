// RMSNorm, rotary position embedding and SwiGLU (kernels/llama_ops.h) against naive long double
// loops written here from the definitions, on every device and dtype.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_test_support.h"
#include "kernels/llama_ops.h"
#include "kernels/ops.h"
#include "support/error_message.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

using LlamaKernelTest = KernelTest;
MPITRON_KERNEL_TEST_SUITE(LlamaKernelTest);

using Wide = long double;

struct RmsNormReference {
  std::vector<double> y, rstd, dx, dweight;
};

// Straight from the definition: r = (mean x^2 + eps)^(-1/2), y = x r w; the backward by the
// full Jacobian d y_j / d x_k = w_j (delta_jk r - x_j x_k r^3 / C), not by the kernel's
// simplified formula.
RmsNormReference rms_norm_reference(const std::vector<double>& x, const std::vector<double>& w,
                                    const std::vector<double>& dy, double eps) {
  const std::size_t cols = w.size(), rows = x.size() / cols;
  const Wide n = static_cast<Wide>(cols);
  RmsNormReference ref{std::vector<double>(x.size()), std::vector<double>(rows),
                       std::vector<double>(x.size()), std::vector<double>(cols)};
  std::vector<Wide> dweight(cols, 0.0L);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * cols;
    const double* dyr = dy.data() + r * cols;
    Wide squares = 0.0L;
    for (std::size_t c = 0; c < cols; ++c)
      squares += static_cast<Wide>(xr[c]) * xr[c];
    const Wide rstd = 1.0L / std::sqrt(squares / n + eps);
    ref.rstd[r] = static_cast<double>(rstd);
    for (std::size_t c = 0; c < cols; ++c) {
      ref.y[r * cols + c] = static_cast<double>(xr[c] * rstd * w[c]);
      dweight[c] += dyr[c] * (xr[c] * rstd);
    }
    for (std::size_t k = 0; k < cols; ++k) {
      Wide dx = 0.0L;
      for (std::size_t j = 0; j < cols; ++j) {
        const Wide jac = w[j] * ((j == k ? rstd : 0.0L) -
                                 static_cast<Wide>(xr[j]) * xr[k] * rstd * rstd * rstd / n);
        dx += dyr[j] * jac;
      }
      ref.dx[r * cols + k] = static_cast<double>(dx);
    }
  }
  for (std::size_t c = 0; c < cols; ++c)
    ref.dweight[c] = static_cast<double>(dweight[c]);
  return ref;
}

TEST_P(LlamaKernelTest, RmsNormForwardAndBackwardMatchTheDefinition) {
  // cols 300 is wider than a CUDA block. Row 0 is all zeros (rstd = 1 / sqrt(eps), y = 0), row 1
  // in [-2e-3, 2e-3] (mean square 1.3e-6, well below eps: eps must be inside the root), the rest
  // in [-2, 2].
  for (const std::size_t cols : {std::size_t{7}, std::size_t{300}}) {
    SCOPED_TRACE(::testing::Message() << "cols " << cols);
    constexpr std::size_t rows = 5;
    constexpr double rms_eps = 1e-5;
    std::vector<double> x(cols, 0.0);
    for (const double v : random(cols, 70, -2e-3, 2e-3))
      x.push_back(v);
    for (const double v : random((rows - 2) * cols, 71))
      x.push_back(v);
    const std::vector<double> w = random(cols, 72), dy = random(rows * cols, 73);
    const RmsNormReference ref = rms_norm_reference(x, w, dy, rms_eps);
    const Buffer bx = make(x), bw = make(w);
    Buffer y = empty(x.size()), rstd = empty(rows);
    rms_norm_forward(bx, bw, cols, rms_eps, y, rstd);
    // Forward: rstd rounded once (1/2 ulp) and two products, so y is within 2 ulp of x r w. The
    // backward composes about six roundings (g = dy w, xhat = x r, the row mean, xhat times it,
    // the difference, times r) of terms up to ~4x the result where g and xhat mean(g xhat)
    // partly cancel: 32 eps. The double row sums add up to cols eps of their terms in float64
    // (the long double reference does not): 2 cols eps covers them.
    const double tol = (32.0 + 2.0 * static_cast<double>(cols)) * eps();
    expect_close(host_values(y), ref.y, tol);
    expect_close(host_values(rstd), ref.rstd, tol);
    Buffer dx = make(std::vector<double>(x.size(), 9.0)), dw = make(std::vector<double>(cols, 9.0));
    rms_norm_backward(bx, bw, rstd, make(dy), cols, dx, dw);  // dw overwritten, not accumulated
    expect_close(host_values(dx), ref.dx, tol);
    expect_close(host_values(dw), ref.dweight, tol);
  }
}

// y = RoPE(x) by rotate_half's pairs (i, i + d/2) and the angle p theta^(-2i/d), all in long
// double; `sign` -1 rotates back (the backward).
std::vector<double> rotary_reference(const std::vector<double>& x, std::size_t seq,
                                     std::size_t heads, std::size_t head_dim, double theta,
                                     std::int64_t offset, int sign) {
  std::vector<double> y(x.size());
  const std::size_t half = head_dim / 2, width = heads * head_dim;
  for (std::size_t t = 0; t < x.size() / width; ++t) {
    const Wide position = static_cast<Wide>(offset + static_cast<std::int64_t>(t % seq));
    for (std::size_t i = 0; i < half; ++i) {
      const Wide angle =
          sign * position *
          std::pow(static_cast<Wide>(theta), -2.0L * i / static_cast<Wide>(head_dim));
      const Wide c = std::cos(angle), s = std::sin(angle);
      for (std::size_t h = 0; h < heads; ++h) {
        const std::size_t lo = t * width + h * head_dim + i, hi = lo + half;
        y[lo] = static_cast<double>(x[lo] * c - x[hi] * s);
        y[hi] = static_cast<double>(x[hi] * c + x[lo] * s);
      }
    }
  }
  return y;
}

// The sizes of one rotary_embedding case: x [batch, seq, heads, head_dim].
struct RotarySizes {
  std::size_t batch, seq, heads, head_dim;
};

TEST_P(LlamaKernelTest, RotaryEmbeddingRotatesTheRotateHalfPairs) {
  // [2, 5, 3, 8]: batch 2 (positions restart with each sequence), 3 heads sharing the angles;
  // [1, 3, 2, 260]: 130 pairs, two whole blocks of the CPU loop's cos and sin table and a
  // partial third. Offsets 0 (training) and 4093 (a generation step deep into a Llama 2
  // context); theta of Llama 2 and Llama 3.
  for (const RotarySizes z : {RotarySizes{2, 5, 3, 8}, RotarySizes{1, 3, 2, 260}}) {
    const std::vector<double> x = random(z.batch * z.seq * z.heads * z.head_dim, 74);
    for (const double theta : {10000.0, 500000.0}) {
      for (const std::int64_t offset : {std::int64_t{0}, std::int64_t{4093}}) {
        SCOPED_TRACE(::testing::Message()
                     << "head_dim " << z.head_dim << " theta " << theta << " offset " << offset);
        // The float64 angle p theta^(-2i/d) is within ~2 ulp of p (pow and the product): up to
        // 4 * 4097 2^-52 radians, which moves y by as much times |x| <= 2. Beyond that cos and
        // sin round once each, then two products and a sum: 8 eps of terms up to |x| <= 2.
        const double tol = 16.0 * eps() + 8.0 * static_cast<double>(offset + z.seq) * 0x1p-52;
        Buffer y = empty(x.size());
        rotary_embedding(make(x), z.seq, z.heads, z.head_dim, theta, offset, y);
        expect_close(host_values(y),
                     rotary_reference(x, z.seq, z.heads, z.head_dim, theta, offset, 1), tol);
        Buffer dx = empty(x.size());
        rotary_embedding_backward(make(x), z.seq, z.heads, z.head_dim, theta, offset, dx);
        expect_close(host_values(dx),
                     rotary_reference(x, z.seq, z.heads, z.head_dim, theta, offset, -1), tol);
        Buffer in_place = make(x);  // y may alias x
        rotary_embedding(in_place, z.seq, z.heads, z.head_dim, theta, offset, in_place);
        expect_close(host_values(in_place), host_values(y), 0.0);
      }
    }
  }
}

// One token at position 1 of one head of head_dim 4, theta 10000: pair 0 is (0, 2) with angle
// 1 rad and pair 1 is (1, 3) with angle 10000^(-1/2) = 0.01 rad. A unit vector on element 0 must
// turn towards element 2 (rotate_half), not element 1 (the paper's adjacent pairs).
TEST_P(LlamaKernelTest, RotaryEmbeddingPairsElementIWithIPlusHalfHeadDim) {
  Buffer y = empty(4);
  rotary_embedding(make({1.0, 0.0, 0.0, 0.0}), 1, 1, 4, 10000.0, 1, y);
  expect_close(host_values(y), {std::cos(1.0), 0.0, std::sin(1.0), 0.0}, 2 * eps());
  rotary_embedding(make({0.0, 0.0, 0.0, 1.0}), 1, 1, 4, 10000.0, 1, y);
  expect_close(host_values(y), {0.0, -std::sin(0.01), 0.0, std::cos(0.01)}, 2 * eps());
}

TEST_P(LlamaKernelTest, SwigluForwardAndBackwardMatchTheDefinition) {
  // Gates across [-20, 20] and the tails (+-90: e^-90 underflows float32, so the sigmoid must
  // not divide 0 by 0 or overflow), ups and upstream gradients in [-2, 2].
  std::vector<double> gate = random(200, 75, -20.0, 20.0);
  for (const double g : {-90.0, -30.0, -1.0, 0.0, 1.0, 30.0, 90.0})
    gate.push_back(g);
  const std::vector<double> up = random(gate.size(), 76), dy = random(gate.size(), 77);
  std::vector<double> want_y, want_dgate, want_dup;
  for (std::size_t i = 0; i < gate.size(); ++i) {
    const Wide g = gate[i], s = 1.0L / (1.0L + std::exp(-g));
    want_y.push_back(static_cast<double>(g * s * up[i]));
    want_dgate.push_back(static_cast<double>(dy[i] * up[i] * s * (1.0L + g * (1.0L - s))));
    want_dup.push_back(static_cast<double>(dy[i] * g * s));
  }
  Buffer y = empty(gate.size());
  const Buffer bgate = make(gate), bup = make(up);
  swiglu_forward(bgate, bup, y);
  // The sigmoid is exp (a few ulp: the float32 CPU loop's exp_f32 is within 1e-8 before
  // rounding) and a division; then up to four products and 1 - s, whose absolute error eps / 2
  // is multiplied by |gate| <= 30 where it matters (for |gate| = 90 the term is below eps): with
  // |dy|, |up| <= 2 and the relative-or-absolute comparison, 16 eps + 30 eps.
  const double tol = 48.0 * eps();
  expect_close(host_values(y), want_y, tol);
  Buffer dgate = make(std::vector<double>(gate.size(), 9.0));
  Buffer dup = make(std::vector<double>(gate.size(), 9.0));
  swiglu_backward(bgate, bup, make(dy), dgate, dup);
  expect_close(host_values(dgate), want_dgate, tol);
  expect_close(host_values(dup), want_dup, tol);
}

// train --bf16 keeps gate and up as bfloat16; the backward reads them so, widening each element
// exactly: the float32 call's bits on the widened values, with no float32 copy of either.
TEST_P(LlamaKernelTest, SwigluBackwardReadsBfloat16GateAndUp) {
  if (dtype() != DType::f32) GTEST_SKIP() << "bfloat16 inputs go with float32 gradients";
  constexpr std::size_t n = 300;
  const Buffer gate32 = make(random(n, 78, -8.0, 8.0)), up32 = make(random(n, 79));
  const Buffer dy = make(random(n, 80));
  Buffer gate16(n, DType::bf16, device()), up16(n, DType::bf16, device());
  convert(gate32, gate16);
  convert(up32, up16);
  Buffer gate_widened = empty(n), up_widened = empty(n);
  convert(gate16, gate_widened);
  convert(up16, up_widened);
  Buffer want_dgate = empty(n), want_dup = empty(n), dgate = empty(n), dup = empty(n);
  swiglu_backward(gate_widened, up_widened, dy, want_dgate, want_dup);
  swiglu_backward(gate16, up16, dy, dgate, dup);
  EXPECT_EQ(host_values(dgate), host_values(want_dgate));
  EXPECT_EQ(host_values(dup), host_values(want_dup));
  Buffer unrounded_dgate = empty(n), unrounded_dup = empty(n);
  swiglu_backward(gate32, up32, dy, unrounded_dgate, unrounded_dup);
  EXPECT_NE(host_values(dup), host_values(unrounded_dup)) << "the inputs are rounded";
}

// Train --bf16 keeps RMSNorm's input as bfloat16: the backward reading it is the float32
// backward's bits on the widened values.
TEST_P(LlamaKernelTest, RmsNormBackwardReadsBfloat16X) {
  if (dtype() != DType::f32) GTEST_SKIP() << "a bfloat16 x goes with float32 gradients";
  constexpr std::size_t rows = 4, cols = 300;
  const Buffer x32 = make(random(rows * cols, 74)), w = make(random(cols, 75));
  const Buffer dy = make(random(rows * cols, 76));
  Buffer y = empty(rows * cols), rstd = empty(rows);
  rms_norm_forward(x32, w, cols, 1e-5, y, rstd);
  Buffer x16(rows * cols, DType::bf16, device()), x_widened = empty(rows * cols);
  convert(x32, x16);
  convert(x16, x_widened);
  Buffer want_dx = empty(rows * cols), want_dw = empty(cols), dx = empty(rows * cols),
         dw = empty(cols);
  rms_norm_backward(x_widened, w, rstd, dy, cols, want_dx, want_dw);
  rms_norm_backward(x16, w, rstd, dy, cols, dx, dw);
  EXPECT_EQ(host_values(dx), host_values(want_dx));
  EXPECT_EQ(host_values(dw), host_values(want_dw));
  Buffer unrounded_dw = empty(cols);
  rms_norm_backward(x32, w, rstd, dy, cols, want_dx, unrounded_dw);
  EXPECT_NE(host_values(dw), host_values(unrounded_dw)) << "x is rounded";
}

TEST(LlamaKernelErrors, BadArgumentsThrowOneLineNamingTheOpAndTheValues) {
  const Buffer x(24, DType::f32, Device::cpu), w(6, DType::f32, Device::cpu);
  Buffer y(24, DType::f32, Device::cpu), rstd(4, DType::f32, Device::cpu);
  EXPECT_EQ(message_of<std::invalid_argument>([&] { rms_norm_forward(x, w, 6, -1.0, y, rstd); }),
            "kernels::rms_norm_forward: eps must be >= 0, got -1.000000");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { rms_norm_forward(x, w, 5, 1e-5, y, rstd); }),
            "kernels::rms_norm_forward: x has 24 elements, not a whole number of rows of cols = 5");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { rotary_embedding(x, 2, 2, 3, 10000.0, 0, y); }),
            "kernels::rotary_embedding: seq, heads and head_dim must be >= 1 and head_dim even, "
            "got seq 2, heads 2, head_dim 3");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { rotary_embedding(x, 2, 2, 6, 0.0, 0, y); }),
            "kernels::rotary_embedding: theta 0 is not a finite number > 0");
  const RopeFrequencies tiny_factor(10000.0, {0.5, 1.0, 4.0, 8192.0});
  EXPECT_EQ(
      message_of<std::invalid_argument>([&] { rotary_embedding(x, 2, 2, 6, tiny_factor, 0, y); }),
      "kernels::rotary_embedding: rope_scaling factor 0.5 is not a finite number >= 1");
  const RopeFrequencies crossed(10000.0, {8.0, 4.0, 1.0, 8192.0});
  EXPECT_EQ(message_of<std::invalid_argument>([&] { rotary_embedding(x, 2, 2, 6, crossed, 0, y); }),
            "kernels::rotary_embedding: rope_scaling low_freq_factor 4 is not in (0, "
            "high_freq_factor) with a finite high_freq_factor");
  EXPECT_EQ(
      message_of<std::invalid_argument>([&] { rotary_embedding_backward(x, 2, 2, 6, 1e4, -1, y); }),
      "kernels::rotary_embedding_backward: position_offset must be >= 0, got -1");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { rotary_embedding(x, 5, 1, 2, 10000.0, 0, y); }),
            "kernels::rotary_embedding: x has 24 elements, not a whole number of rows of cols = "
            "10");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { swiglu_forward(x, w, y); }),
            "kernels::swiglu_forward: up has 6 elements, expected 24 (numel of gate)");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { swiglu_backward(x, x, x, y, y); }),
            "kernels::swiglu_backward: dup may not alias dgate");
  const Buffer half(24, DType::bf16, Device::cpu), wide(24, DType::f64, Device::cpu);
  Buffer dgate(24, DType::f64, Device::cpu), dup(24, DType::f64, Device::cpu);
  EXPECT_EQ(
      message_of<std::invalid_argument>([&] { swiglu_backward(half, half, wide, dgate, dup); }),
      "kernels::swiglu_backward: gate is cpu bfloat16 but dy is cpu float64");
  Buffer dx(24, DType::f64, Device::cpu), dw64(6, DType::f64, Device::cpu);
  const Buffer w64(6, DType::f64, Device::cpu), rstd64(4, DType::f64, Device::cpu);
  EXPECT_EQ(message_of<std::invalid_argument>(
                [&] { rms_norm_backward(half, w64, rstd64, wide, 6, dx, dw64); }),
            "kernels::rms_norm_backward: x is cpu bfloat16 but dy is cpu float64");
  Buffer dx16(24, DType::bf16, Device::cpu), w16(6, DType::bf16, Device::cpu);
  Buffer rstd16(4, DType::bf16, Device::cpu), dw16(6, DType::bf16, Device::cpu);
  EXPECT_EQ(message_of<std::invalid_argument>(
                [&] { rms_norm_backward(half, w16, rstd16, half, 6, dx16, dw16); }),
            "kernels::rms_norm_backward: dy is bfloat16; this op takes float32, float64, int32 or "
            "int64 buffers (convert bfloat16 to float32 with kernels::convert first)");
}

}  // namespace
}  // namespace mpitron::test
