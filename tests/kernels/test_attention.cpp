// The fused attention kernels (attention_forward / attention_backward) against a naive float64
// loop that materializes the [seq, seq] probabilities: softmax(scale q k^T) v, its log-sum-exp,
// and the gradients through the explicit softmax Jacobian (dS = P (dP - rowsum(P dP)), not the
// kernel's rowsum(dO O)). Sizes reach the CPU tiles' edges (64 queries x 64 keys): seq 1, seq
// not a multiple of the block, exactly one block, three blocks; odd head_dim; several slices;
// causal and not.
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "kernel_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

using AttentionTest = KernelTest;
MPITRON_KERNEL_TEST_SUITE(AttentionTest);

struct Sizes {
  std::size_t slices, seq, d;
  bool causal;
};

struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

// Forward and backward in float64 with the whole probability matrix of each slice.
Reference reference(const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v, const std::vector<double>& dout, Sizes z,
                    double scale) {
  const std::size_t s = z.seq, d = z.d;
  Reference ref{std::vector<double>(q.size(), 0.0), std::vector<double>(z.slices * s, 0.0),
                std::vector<double>(q.size(), 0.0), std::vector<double>(q.size(), 0.0),
                std::vector<double>(q.size(), 0.0)};
  for (std::size_t b = 0; b < z.slices; ++b) {
    const std::size_t base = b * s * d;
    const auto at = [&](const std::vector<double>& m, std::size_t row, std::size_t x) {
      return m[base + row * d + x];
    };
    std::vector<double> p(s * s, 0.0), dp(s * s, 0.0);
    for (std::size_t i = 0; i < s; ++i) {
      const std::size_t visible = z.causal ? i + 1 : s;
      double max = -INFINITY;
      for (std::size_t j = 0; j < visible; ++j) {
        double dot = 0.0;
        for (std::size_t x = 0; x < d; ++x)
          dot += at(q, i, x) * at(k, j, x);
        p[i * s + j] = scale * dot;
        max = std::max(max, p[i * s + j]);
      }
      double total = 0.0;
      for (std::size_t j = 0; j < visible; ++j)
        total += std::exp(p[i * s + j] - max);
      ref.lse[b * s + i] = max + std::log(total);
      for (std::size_t j = 0; j < visible; ++j)
        p[i * s + j] = std::exp(p[i * s + j] - max) / total;
      for (std::size_t j = visible; j < s; ++j)
        p[i * s + j] = 0.0;
      double row_dot = 0.0;
      for (std::size_t j = 0; j < s; ++j) {
        for (std::size_t x = 0; x < d; ++x) {
          ref.o[base + i * d + x] += p[i * s + j] * at(v, j, x);
          dp[i * s + j] += at(dout, i, x) * at(v, j, x);
        }
        row_dot += p[i * s + j] * dp[i * s + j];
      }
      for (std::size_t j = 0; j < s; ++j) {
        const double ds = p[i * s + j] * (dp[i * s + j] - row_dot);
        for (std::size_t x = 0; x < d; ++x) {
          ref.dq[base + i * d + x] += scale * ds * at(k, j, x);
          ref.dk[base + j * d + x] += scale * ds * at(q, i, x);
          ref.dv[base + j * d + x] += p[i * s + j] * at(dout, i, x);
        }
      }
    }
  }
  return ref;
}

TEST_P(AttentionTest, ForwardAndBackwardMatchFloat64Loop) {
  const Sizes cases[] = {{3, 1, 5, true},  {3, 1, 5, false},  {2, 67, 3, true},  {2, 67, 3, false},
                         {4, 64, 7, true}, {1, 130, 8, true}, {1, 130, 8, false}};
  for (const Sizes z : cases) {
    SCOPED_TRACE(::testing::Message() << "slices " << z.slices << " seq " << z.seq << " head_dim "
                                      << z.d << " causal " << z.causal);
    const std::size_t n = z.slices * z.seq * z.d;
    const double scale = 1.0 / std::sqrt(static_cast<double>(z.d));
    const std::vector<double> q = random(n, 90), v = random(n, 92), dout = random(n, 93);
    // Keys grow along the sequence, so a row's max keeps rising from block to block and every
    // rescale of the online softmax matters.
    std::vector<double> k = random(n, 91);
    for (std::size_t e = 0; e < n; ++e)
      k[e] *= 1.0 + 2.0 * static_cast<double>(e / z.d % z.seq) / static_cast<double>(z.seq);
    k = rounded(k);
    const Reference want = reference(q, k, v, dout, z, scale);

    Buffer o = make(std::vector<double>(n, 7.0)), lse = empty(z.slices * z.seq);
    const Buffer qb = make(q), kb = make(k), vb = make(v);
    attention_forward(qb, kb, vb, z.seq, z.d, z.causal, scale, o, lse);
    // o is a convex combination of v rows (|v| < 2): sums of up to 130 products, each rounded,
    // stay within a few hundred eps; lse (|lse| < 12) likewise.
    expect_close(host_values(o), want.o, 256 * eps());
    expect_close(host_values(lse), want.lse, 256 * eps());

    Buffer dq = make(std::vector<double>(n, 7.0)), dk = make(std::vector<double>(n, 7.0)),
           dv = make(std::vector<double>(n, 7.0));
    attention_backward(qb, kb, vb, o, lse, make(dout), z.seq, z.d, z.causal, scale, dq, dk, dv);
    // The gradients sum up to 130 terms of scale P (dP - D) q: recomputed P carries lse's
    // rounding times |s| (|s| < 20), hence the wider bound.
    expect_close(host_values(dv), want.dv, 1024 * eps());
    expect_close(host_values(dk), want.dk, 1024 * eps());
    expect_close(host_values(dq), want.dq, 1024 * eps());
  }
}

TEST_P(AttentionTest, CausalRowsIgnoreLaterKeys) {
  // Changing the last key and value changes no output row but the last one.
  const std::size_t seq = 70, d = 4, n = seq * d;
  const std::vector<double> q = random(n, 94), k = random(n, 95), v = random(n, 96);
  std::vector<double> k2 = k, v2 = v;
  for (std::size_t x = 0; x < d; ++x) {
    k2[(seq - 1) * d + x] += 1.5;
    v2[(seq - 1) * d + x] -= 1.0;
  }
  Buffer o1 = empty(n), o2 = empty(n), lse = empty(seq);
  attention_forward(make(q), make(k), make(v), seq, d, true, 0.5, o1, lse);
  attention_forward(make(q), make(k2), make(v2), seq, d, true, 0.5, o2, lse);
  const std::vector<double> a = host_values(o1), b = host_values(o2);
  for (std::size_t e = 0; e < (seq - 1) * d; ++e)
    ASSERT_EQ(a[e], b[e]) << "element " << e;
  EXPECT_NE(a[n - 1], b[n - 1]);
}

// bfloat16 q, k, v and o (train --bf16's kept copies) with float32 results: FlashAttention-2's
// bfloat16 arithmetic (Dao 2023, arXiv:2307.08691), whose products multiply bfloat16 operands
// (q, k, v and o as they are; the probabilities P, dO and the score gradients dS rounded to
// nearest even) and sum in float32, against the float32 kernels on the inputs' widened values,
// which round nothing. Rounding an operand moves a product's term by at most 2^-9 of itself
// (unit roundoff u = 2^-9), so the output, P V over the row sum, moves by at most u max|v| and
// lse not beyond float32 rounding (its sums are float32 in both); a gradient's term carries at
// most three roundings (dS: dO's through dP = dO v^T, then its own; dV: P's and dO's), 3u of
// the terms summed into an element, and those sums reach a few times the tensor's largest value:
// bound 8u = 2^-6 of it (measured at most 4.2e-3 of it, and the output 0.42 u max|v|, 2-core
// Zen 5, 2026-12-07). Unrounded
// operands would give the float32 bits; rounding too much (truncating, or rounding P to fewer
// bits) would move the output by more than u max|v|.
TEST_P(AttentionTest, MultipliesBfloat16OperandsWithinTheirRounding) {
  if (dtype() != DType::f32) GTEST_SKIP() << "bfloat16 inputs pair with float32 results";
  const std::size_t slices = 2, seq = 130, d = 8, n = slices * seq * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const double u = std::ldexp(1.0, -9);
  const auto narrow = [&](const Buffer& x) {
    Buffer h(x.numel(), DType::bf16, device());
    convert(x, h);
    return h;
  };
  const auto widened = [&](const Buffer& h) {
    Buffer x = empty(h.numel());
    convert(h, x);
    return x;
  };
  // max |got - want| over max |want|, and max |want|.
  const auto largest = [](const std::vector<double>& x) {
    double m = 0.0;
    for (const double e : x)
      m = std::max(m, std::abs(e));
    return m;
  };
  const auto error = [&](const Buffer& got, const Buffer& want) {
    const std::vector<double> a = host_values(got), b = host_values(want);
    double worst = 0.0;
    for (std::size_t e = 0; e < a.size(); ++e)
      worst = std::max(worst, std::abs(a[e] - b[e]));
    return worst;
  };
  const Buffer q16 = narrow(make(random(n, 97))), k16 = narrow(make(random(n, 98))),
               v16 = narrow(make(random(n, 99))), dout = make(random(n, 100));
  const Buffer q = widened(q16), k = widened(k16), v = widened(v16);
  for (const bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    Buffer o = empty(n), lse = empty(slices * seq), want_o = empty(n),
           want_lse = empty(slices * seq);
    attention_forward(q16, k16, v16, seq, d, causal, scale, o, lse);
    attention_forward(q, k, v, seq, d, causal, scale, want_o, want_lse);
    const double o_error = error(o, want_o);
    EXPECT_LE(o_error, u * largest(host_values(v)));
    EXPECT_GT(o_error, 0.0) << "P is rounded";
    EXPECT_LE(error(lse, want_lse), 1e-5 * largest(host_values(want_lse)));
    const Buffer o16 = narrow(o), o_widened = widened(o16);
    Buffer dq = empty(n), dk = empty(n), dv = empty(n);
    Buffer want_dq = empty(n), want_dk = empty(n), want_dv = empty(n);
    attention_backward(q16, k16, v16, o16, lse, dout, seq, d, causal, scale, dq, dk, dv);
    attention_backward(q, k, v, o_widened, lse, dout, seq, d, causal, scale, want_dq, want_dk,
                       want_dv);
    for (const auto& [got, want] : {std::pair{&dq, &want_dq}, {&dk, &want_dk}, {&dv, &want_dv}}) {
      const double scale_of = largest(host_values(*want));
      EXPECT_LE(error(*got, *want), 8 * u * scale_of);
    }
  }
  // Every kept input bfloat16, and the results float32.
  Buffer o = empty(n), lse = empty(slices * seq), dq = empty(n), dk = empty(n), dv = empty(n);
  EXPECT_THROW(attention_forward(q16, k, v16, seq, d, true, scale, o, lse), std::invalid_argument);
  Buffer o64(n, DType::f64, device()), lse64(slices * seq, DType::f64, device());
  EXPECT_THROW(attention_forward(q16, k16, v16, seq, d, true, scale, o64, lse64),
               std::invalid_argument);
  EXPECT_THROW(attention_backward(q16, k16, v16, o, lse, dout, seq, d, true, scale, dq, dk, dv),
               std::invalid_argument);
}

TEST_P(AttentionTest, RejectsBadSizes) {
  const Buffer x = make(std::vector<double>(24, 0.5));
  Buffer o = empty(24), lse = empty(6), short_lse = empty(5);
  EXPECT_THROW(attention_forward(x, x, x, 0, 4, true, 1.0, o, lse), std::invalid_argument);
  EXPECT_THROW(attention_forward(x, x, x, 5, 4, true, 1.0, o, lse), std::invalid_argument);
  EXPECT_THROW(attention_forward(x, x, x, 3, 4, true, 1.0, o, short_lse), std::invalid_argument);
  Buffer aliased = make(std::vector<double>(24, 0.5));
  EXPECT_THROW(attention_forward(aliased, x, x, 3, 4, true, 1.0, aliased, lse),
               std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::test
