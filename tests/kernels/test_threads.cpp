// Every CPU kernel that runs on cpu_threads() threads, at 2, 3 and 4 threads against its own
// output at 1 thread, bit for bit (float32 and float64). The sizes split each kernel's work into
// several chunks, rows, column blocks, sum blocks or GEMM tiles (the constants of
// src/kernels/cpu/chunk_sizes.h and parallel.h and the tiles of cpu/gemm.cpp: multiples of 48 rows
// by multiples of 64 columns where the provider allows a column cut, 512 for Eigen, each with at
// least 2^22 multiply-adds), so a result that depended on how the work is split, or on which thread
// did it, would differ.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/chunk_sizes.h"
#include "kernels/device.h"
#include "kernels/llama_ops.h"
#include "kernels/ops.h"
#include "support/compare.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

class ThreadsTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { before_ = cpu_threads(); }
  void TearDown() override { set_cpu_threads(before_); }

  /// n values uniform in [lo, hi) (a fixed sequence per seed), rounded to the dtype.
  Buffer random(std::size_t n, unsigned seed, double lo = -2.0, double hi = 2.0) const {
    std::vector<double> values(n);
    std::uint64_t state = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (double& v : values) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v = lo + (hi - lo) * static_cast<double>(state >> 11) * 0x1.0p-53;
    }
    return make_buffer(values, GetParam(), Device::cpu);
  }

  Buffer empty(std::size_t n) const { return Buffer(n, GetParam(), Device::cpu); }

  /// Runs `run` (which computes into `outputs`) at 1 thread, then at 2, 3 and 4, and expects
  /// every output's bits to equal the 1-thread ones.
  void expect_same_bits(const std::string& what, std::vector<Buffer*> outputs,
                        const std::function<void()>& run) const {
    set_cpu_threads(1);
    run();
    std::vector<std::vector<double>> want;
    for (const Buffer* out : outputs)
      want.push_back(host_values(*out));
    for (const int threads : {2, 3, 4}) {
      set_cpu_threads(threads);
      run();
      for (std::size_t o = 0; o < outputs.size(); ++o) {
        const std::vector<double> got = host_values(*outputs[o]);
        ASSERT_EQ(got.size(), want[o].size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          // float32 values are exact in double, so equal doubles are equal bits.
          ASSERT_EQ(got[i], want[o][i]) << what << ": output " << o << " element " << i << " at "
                                        << threads << " threads differs from 1 thread";
        }
      }
    }
  }

 private:
  int before_ = 1;
};

INSTANTIATE_TEST_SUITE_P(Dtypes, ThreadsTest, ::testing::Values(DType::f32, DType::f64),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return to_string(info.param);
                         });

// Several chunks of every kind: elements, sum blocks, rows of 777 columns, column blocks.
constexpr std::size_t kN = 5 * cpu::kElementChunk + 3;
constexpr std::size_t kRows = 301, kCols = 777;

TEST_P(ThreadsTest, ElementWiseOpsMatchOneThread) {
  static_assert(kN > 4 * cpu::kElementChunk && kN > 4 * cpu::kSumBlock);
  const Buffer a = random(kN, 1), b = random(kN, 2), bias = random(kCols, 3);
  const Buffer x = random(kRows * kCols, 4);
  Buffer out = empty(kN), y = empty(kN), rows_out = empty(kRows * kCols), g = empty(kRows * kCols);
  expect_same_bits("add, sub, mul, scale, axpy", {&out, &y}, [&] {
    add(a, b, out);
    sub(out, a, out);
    mul(out, b, out);
    scale(out, 0.3, out);
    copy(a, y);
    axpy(-1.7, out, y);
  });
  for (const GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    expect_same_bits("gelu forward and backward", {&out, &y}, [&] {
      gelu_forward(a, out, form);
      gelu_backward(a, b, y, form);
    });
    expect_same_bits("bias_add and bias_gelu", {&rows_out, &g}, [&] {
      bias_add(x, bias, kCols, rows_out);
      bias_gelu(rows_out, bias, kCols, g, form);
    });
  }
  const Buffer dloss = random(1, 5);
  expect_same_bits("mse_backward", {&out}, [&] { mse_backward(a, b, dloss, out); });
}

TEST_P(ThreadsTest, ReductionsMatchOneThread) {
  const Buffer a = random(kN, 1), b = random(kN, 2), x = random(kRows * kCols, 3);
  Buffer total = empty(1), squares = empty(1), mse = empty(1), columns = empty(kCols);
  Buffer maxima = empty(kRows);
  expect_same_bits("sum, sum_squares, mse_forward, sum_rows, row_max",
                   {&total, &squares, &mse, &columns, &maxima}, [&] {
                     sum(a, total);
                     sum_squares(a, squares);
                     mse_forward(a, b, mse);
                     sum_rows(x, kCols, columns);
                     row_max(x, kCols, kCols - 10, maxima);
                   });
}

TEST_P(ThreadsTest, SoftmaxMatchesOneThread) {
  // Six causal [200, 200] score matrices (causal masks need square ones), 15 chunks of rows.
  constexpr std::size_t kSeq = 200, kScoreRows = 6 * kSeq;
  const Buffer x = random(kScoreRows * kSeq, 1), dy = random(kScoreRows * kSeq, 2);
  Buffer y = empty(kScoreRows * kSeq), dx = empty(kScoreRows * kSeq);
  for (const bool causal : {false, true}) {
    expect_same_bits("softmax forward and backward", {&y, &dx}, [&] {
      softmax_forward(x, kSeq, y, causal, 0.125);
      softmax_backward(y, dy, kSeq, dx, 0.125);
    });
  }
}

TEST_P(ThreadsTest, FusedAttentionMatchesOneThread) {
  // 3 slices of seq 150 (3 query and key blocks each, the last partial) x head_dim 16: 9 tasks
  // per outer loop.
  constexpr std::size_t kSeq = 150, kDim = 16, kNumel = 3 * kSeq * kDim;
  const Buffer q = random(kNumel, 1), k = random(kNumel, 2), v = random(kNumel, 3);
  const Buffer dout = random(kNumel, 4);
  Buffer o = empty(kNumel), lse = empty(3 * kSeq);
  Buffer dq = empty(kNumel), dk = empty(kNumel), dv = empty(kNumel);
  for (const bool causal : {false, true}) {
    expect_same_bits("fused attention forward and backward", {&o, &lse, &dq, &dk, &dv}, [&] {
      attention_forward(q, k, v, kSeq, kDim, causal, 0.25, o, lse);
      attention_backward(q, k, v, o, lse, dout, kSeq, kDim, causal, 0.25, dq, dk, dv);
    });
  }
}

TEST_P(ThreadsTest, LayerNormMatchesOneThread) {
  const Buffer x = random(kRows * kCols, 1), weight = random(kCols, 2), bias = random(kCols, 3);
  const Buffer dy = random(kRows * kCols, 4);
  Buffer y = empty(kRows * kCols), xhat = empty(kRows * kCols), rstd = empty(kRows);
  Buffer dx = empty(kRows * kCols), dweight = empty(kCols), dbias = empty(kCols);
  expect_same_bits("layer_norm forward and backward", {&y, &xhat, &rstd, &dx, &dweight, &dbias},
                   [&] {
                     layer_norm_forward(x, weight, bias, kCols, 1e-5, y, xhat, rstd);
                     layer_norm_backward(xhat, weight, rstd, dy, kCols, dx, dweight, dbias);
                   });
}

// RMSNorm rows and column blocks; RoPE over 3 sequences of 43 positions (from 5) of 4 heads x
// 160 (80 pairs: two blocks of the cos and sin table), 6 chunks of up to 8 positions; SwiGLU
// element chunks.
TEST_P(ThreadsTest, LlamaOpsMatchOneThread) {
  const Buffer x = random(kRows * kCols, 1), weight = random(kCols, 2);
  const Buffer dy = random(kRows * kCols, 3), gate = random(kN, 4, -12.0, 12.0), up = random(kN, 5);
  const Buffer dgated = random(kN, 6);
  Buffer y = empty(kRows * kCols), rstd = empty(kRows), dx = empty(kRows * kCols);
  Buffer dweight = empty(kCols);
  expect_same_bits("rms_norm forward and backward", {&y, &rstd, &dx, &dweight}, [&] {
    rms_norm_forward(x, weight, kCols, 1e-5, y, rstd);
    rms_norm_backward(x, weight, rstd, dy, kCols, dx, dweight);
  });
  constexpr std::size_t kSeq = 43, kHeads = 4, kHeadDim = 160, kQk = 3 * kSeq * kHeads * kHeadDim;
  const Buffer q = random(kQk, 7), dq = random(kQk, 8);
  Buffer rotated = empty(kQk), drotated = empty(kQk);
  expect_same_bits("rotary_embedding forward and backward", {&rotated, &drotated}, [&] {
    rotary_embedding(q, kSeq, kHeads, kHeadDim, 10000.0, 5, rotated);
    rotary_embedding_backward(dq, kSeq, kHeads, kHeadDim, 10000.0, 5, drotated);
  });
  Buffer gated = empty(kN), dgate = empty(kN), dup = empty(kN);
  expect_same_bits("swiglu forward and backward", {&gated, &dgate, &dup}, [&] {
    swiglu_forward(gate, up, gated);
    swiglu_backward(gate, up, dgated, dgate, dup);
  });
}

TEST_P(ThreadsTest, EmbeddingMatchesOneThread) {
  // 1100 columns: several of the backward's column chunks; repeated indices accumulate.
  constexpr std::size_t kTable = 50, kWidth = 1100, kTokens = 400;
  std::vector<std::int64_t> ids(kTokens);
  for (std::size_t i = 0; i < kTokens; ++i)
    ids[i] = static_cast<std::int64_t>((i * 7) % (kTable + 10));  // some outside the slice
  Buffer indices(kTokens, DType::i64, Device::cpu);
  std::copy(ids.begin(), ids.end(), indices.data_as<std::int64_t>());
  const Buffer weight = random(kTable * kWidth, 1), dout = random(kTokens * kWidth, 2);
  Buffer out = empty(kTokens * kWidth), dweight = empty(kTable * kWidth);
  expect_same_bits("embedding forward and backward", {&out, &dweight}, [&] {
    embedding_forward(weight, kWidth, indices, 5, out);
    fill(dweight, 0.0);
    embedding_backward(dout, indices, 5, kWidth, dweight);
  });
}

TEST_P(ThreadsTest, CrossEntropyMatchesOneThread) {
  constexpr std::size_t kVocab = 1500, kUsed = 1450, kTokens = 300;
  Buffer targets(kTokens, DType::i32, Device::cpu);
  for (std::size_t i = 0; i < kTokens; ++i) {  // every 7th target ignored
    targets.data_as<std::int32_t>()[i] = i % 7 == 3 ? static_cast<std::int32_t>(kIgnoreTarget)
                                                    : static_cast<std::int32_t>((i * 37) % 1600);
  }
  const Buffer logits = random(kTokens * kVocab, 1, -6.0, 6.0), dloss = random(1, 2);
  Buffer maxima = empty(kTokens), sum_exp = empty(kTokens), target_logit = empty(kTokens);
  Buffer loss = empty(1), dlogits = empty(kTokens * kVocab);
  expect_same_bits("cross-entropy stats, loss and backward (a vocabulary slice)",
                   {&maxima, &sum_exp, &target_logit, &loss, &dlogits}, [&] {
                     row_max(logits, kVocab, kUsed, maxima);
                     cross_entropy_stats(logits, kVocab, kUsed, targets, 100, maxima, sum_exp,
                                         target_logit);
                     cross_entropy_loss(maxima, sum_exp, target_logit, targets, 1000.0, loss);
                     cross_entropy_backward(logits, kVocab, kUsed, targets, 100, maxima, sum_exp,
                                            dloss, 1000.0, dlogits);
                   });
}

TEST_P(ThreadsTest, AdamWMatchesOneThread) {
  const Buffer param0 = random(kN, 1), grad = random(kN, 2), m0 = random(kN, 3);
  const Buffer v0 = random(kN, 4, 0.0, 1.0);
  Buffer param = empty(kN), m = empty(kN), v = empty(kN);
  expect_same_bits("adamw_update", {&param, &m, &v}, [&] {
    copy(param0, param);
    copy(m0, m);
    copy(v0, v);
    adamw_update(param, grad, m, v, 1e-3, 0.9, 0.95, 1e-8, 0.1, 3);
  });
}

struct GemmShape {
  std::size_t batch, m, n, k;
};

// The products of a GPT step (512 tokens: the train example's hidden 256, and GPT-2's 768 with
// its MLP's 3072), cut by columns, by rows or both (cpu/gemm.cpp's grid); a batch of
// attention-sized ones; odd sizes, whose last row tile is long (1000 rows: 480 + 520 at 2
// threads) or short, or, where the provider cuts them (mpitron's), whose last column tile is
// long (148 = 64 + 84 at 2 threads) or short (100 = 64 + 36 at 4); columns that OpenBLAS must
// not cut (201 and 321 end in a partial micro-kernel: cut, float64 took other bits); a
// one-column last panel (513); products too small to split (200 x 100 x 60, a few multiply-adds
// per row); one column or one row.
const GemmShape kGemmShapes[] = {
    {1, 512, 768, 256}, {1, 512, 256, 1024}, {1, 256, 1024, 512}, {1, 512, 768, 3072},
    {6, 128, 128, 64},  {1, 1000, 300, 200}, {1, 1000, 300, 77},  {1, 96, 148, 3000},
    {1, 96, 100, 3000}, {1, 96, 201, 1000},  {1, 274, 321, 286},  {2, 400, 513, 33},
    {1, 200, 100, 60},  {1, 3000, 1, 64},    {1, 1, 3000, 64},    {1, 97, 40, 300}};

TEST_P(ThreadsTest, GemmMatchesOneThreadForEveryProvider) {
  std::vector<GemmProvider> providers = {GemmProvider::eigen};
  if (gemm_blas_available()) providers.push_back(GemmProvider::blas);
  providers.push_back(GemmProvider::mpitron);
  const GemmProvider before = gemm_provider();
  for (const GemmProvider provider : providers) {
    set_gemm_provider(provider);
    for (const GemmShape s : kGemmShapes) {
      const Buffer a = random(s.batch * s.m * s.k, 1), b = random(s.batch * s.k * s.n, 2);
      const Buffer c0 = random(s.batch * s.m * s.n, 3);
      Buffer c = empty(s.batch * s.m * s.n);
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          for (const double beta : {0.0, 0.5}) {
            expect_same_bits(to_string(provider) + " gemm_batched " + std::to_string(s.batch) +
                                 " x [" + std::to_string(s.m) + ", " + std::to_string(s.n) + ", " +
                                 std::to_string(s.k) + "] trans_a " + std::to_string(ta) +
                                 " trans_b " + std::to_string(tb) + " beta " + std::to_string(beta),
                             {&c}, [&] {
                               copy(c0, c);
                               gemm_batched(ta, tb, s.batch, s.m, s.n, s.k, 1.0, a, s.m * s.k, b,
                                            s.k * s.n, beta, c, s.m * s.n);
                             });
          }
        }
      }
    }
  }
  set_gemm_provider(before);
}

// The bfloat16 kernels on float32 data: the conversion, and the bfloat16 GEMM (the path of this
// CPU, whatever the provider) into float32 C (overwrite and accumulate) and bfloat16 C, on the
// non-batched shapes above; outputs compared as float32 (bfloat16 C widened exactly).
TEST_P(ThreadsTest, Bf16ConvertAndGemmMatchOneThread) {
  if (GetParam() != DType::f32) GTEST_SKIP() << "bfloat16 kernels take float32 data only";
  const Buffer x = random(kN, 1);
  Buffer h(kN, DType::bf16, Device::cpu), back = empty(kN);
  expect_same_bits("convert float32 -> bfloat16 -> float32", {&back}, [&] {
    convert(x, h);
    convert(h, back);
  });
  for (const GemmShape s : kGemmShapes) {
    if (s.batch != 1) continue;
    Buffer a(s.m * s.k, DType::bf16, Device::cpu), b(s.k * s.n, DType::bf16, Device::cpu);
    convert(random(s.m * s.k, 2), a);
    convert(random(s.k * s.n, 3), b);
    const Buffer c0 = random(s.m * s.n, 4);
    Buffer c = empty(s.m * s.n), rounded(s.m * s.n, DType::bf16, Device::cpu);
    Buffer widened = empty(s.m * s.n);
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        expect_same_bits("gemm_bf16 [" + std::to_string(s.m) + ", " + std::to_string(s.n) + ", " +
                             std::to_string(s.k) + "] trans_a " + std::to_string(ta) + " trans_b " +
                             std::to_string(tb),
                         {&c, &widened}, [&] {
                           copy(c0, c);
                           gemm_bf16(ta, tb, s.m, s.n, s.k, 1.0, a, b, 1.0, c);
                           gemm_bf16(ta, tb, s.m, s.n, s.k, 1.0, a, b, 0.0, rounded);
                           convert(rounded, widened);
                         });
      }
    }
  }
}

TEST(CpuThreads, RejectsCountsOutsideTheRange) {
  EXPECT_THROW(set_cpu_threads(0), std::invalid_argument);
  EXPECT_THROW(set_cpu_threads(kMaxCpuThreads + 1), std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::test
