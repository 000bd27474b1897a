// Context-parallel attention (ring and all-gather) against the dense causal attention, on a cp
// group spanning the world: every rank's output rows and its q, k and v gradient rows must equal
// the dense ones at the positions its zigzag shard holds.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "comm/traffic.h"
#include "gpt_test_support.h"
#include "kernels/ops.h"
#include "nn/data/zigzag.h"
#include "nn/fault_injection.h"
#include "nn/layers/context_parallel_attention.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::DType;
using autograd::Tensor;

constexpr std::int64_t kBatch = 2, kHeads = 3, kHeadDim = 8;

struct Result {
  Tensor out, dq, dk, dv;  // [batch, seq or seq/cp, heads, head_dim]
};

// [batch, seq, heads, head_dim] tensors as the attention's [batch, heads, seq, head_dim].
Tensor per_head(const Tensor& x) {
  return autograd::transpose(x, 1, 2);
}

// out = attention(q, k, v) of [batch, seq, heads, head_dim] inputs, and the gradients of
// sum(out * w).
template <class Attend>
Result run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& w, Attend attend) {
  Tensor qg = q.clone().set_requires_grad(), kg = k.clone().set_requires_grad(),
         vg = v.clone().set_requires_grad();
  const Tensor out = autograd::transpose(attend(per_head(qg), per_head(kg), per_head(vg)), 1, 2);
  autograd::sum(autograd::mul(out, w)).backward();
  return {out.detach(), qg.grad(), kg.grad(), vg.grad()};
}

struct Case {
  std::int64_t chunk;  // positions per zigzag chunk
  CpComm how;
  bool prefetch;
};

// The largest |cp - dense| of the output and the three gradients, on this rank's rows.
double worst_difference(const Case& c, DType dtype) {
  const comm::Communicator& cp = test::world();
  const std::int64_t seq = 2 * cp.size() * c.chunk;
  const autograd::Shape shape{kBatch, seq, kHeads, kHeadDim};
  const Tensor q = autograd::randn(shape, 11, 1.0, dtype),
               k = autograd::randn(shape, 12, 1.0, dtype),
               v = autograd::randn(shape, 13, 1.0, dtype),
               w = autograd::randn(shape, 14, 1.0, dtype);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  const Result dense = run(q, k, v, w, [&](const Tensor& qh, const Tensor& kh, const Tensor& vh) {
    return autograd::scaled_dot_product_attention(qh, kh, vh, /*causal=*/true, scale);
  });
  const int rank = cp.rank(), size = cp.size();
  const auto shard = [&](const Tensor& x) { return zigzag_shard(x, size, rank); };
  const Result mine =
      run(shard(q), shard(k), shard(v), shard(w),
          [&](const Tensor& qh, const Tensor& kh, const Tensor& vh) {
            return context_parallel_attention(qh, kh, vh, cp, c.how, scale, c.prefetch);
          });
  double worst = 0.0;
  const std::pair<Tensor, Tensor> pairs[] = {
      {mine.out, dense.out}, {mine.dq, dense.dq}, {mine.dk, dense.dk}, {mine.dv, dense.dv}};
  for (const auto& [got, want] : pairs) {
    const std::vector<double> a = got.to_vector(), b = shard(want).to_vector();
    EXPECT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
      worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst;
}

const Case kCases[] = {{3, CpComm::ring, true},
                       {3, CpComm::ring, false},
                       {3, CpComm::all_gather, true},
                       {40, CpComm::ring, true},
                       {40, CpComm::all_gather, true}};

// float64: the blocks and their merge reorder sums of O(1) terms over at most 2 seq keys, so
// the rows agree to a few ulps of their magnitude: 1e-12 leaves three orders of margin.
TEST(ContextParallelAttention, EqualsDenseCausalAttentionOnTheZigzagRowsInFloat64) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(cp_comm_name(c.how) + " chunk " + std::to_string(c.chunk));
    EXPECT_LT(worst_difference(c, DType::f64), 1e-12);
  }
}

// float32: the same sums in float32, whose rounding (2^-24 relative per operation, over sums of
// up to 2 seq = 640 terms of O(1)) stays below 1e-4 absolute.
TEST(ContextParallelAttention, EqualsDenseCausalAttentionOnTheZigzagRowsInFloat32) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(cp_comm_name(c.how) + " chunk " + std::to_string(c.chunk));
    EXPECT_LT(worst_difference(c, DType::f32), 1e-4);
  }
}

// Each planted bug moves the rows by far more than the float64 tolerance: a merge without the
// log-sum-exp correction (every rank has a chunk that sees two blocks), swapped zigzag chunks and,
// across ranks, key/value gradients that never return to their owner.
TEST(ContextParallelAttention, PlantedBugsAreSeen) {
  const Case ring{3, CpComm::ring, true}, gather{3, CpComm::all_gather, true};
  std::vector<Fault> faults = {Fault::ring_attention_no_lse_correction,
                               Fault::cp_zigzag_chunks_swapped};
  if (test::world().size() > 1) faults.push_back(Fault::ring_attention_dkv_not_returned);
  for (Fault fault : faults) {
    inject_fault(fault);
    const double ring_error = worst_difference(ring, DType::f64);
    const double gather_error = worst_difference(gather, DType::f64);
    inject_fault(Fault::none);
    EXPECT_GT(ring_error, 1e-3) << static_cast<int>(fault);
    EXPECT_GT(gather_error, 1e-3) << static_cast<int>(fault);
  }
}

// Under bfloat16 GEMM operands (train --bf16) the keys and values cross the wire as bfloat16, and
// the cp group counts 2 bytes fewer for every key/value element sent (the ring sends a rank's
// shard cp - 1 times in forward and again in backward, the all-gather once each; the key/value
// gradients travel in float32 either way). On inputs that hold bfloat16 values (what
// context_parallel_attention_core passes there) the results differ from the float32 run's by
// the fused kernel's bfloat16 arithmetic alone (its products' operands P, dS and dO rounded to
// bfloat16, and backward reading the output rounded): up to 9.4e-3 of a tensor's scale at 1, 2
// and 4 ranks (dk at 1 rank, where each chunk is 3 positions; 2-core Zen 5, 2026-12-07), bounded
// at 2e-2 (about 10 bfloat16 unit roundoffs, 2^-9 each; tests/kernels/test_attention.cpp derives
// 8 for the kernel alone). A merge or a transfer gone wrong moves them by O(1).
TEST(ContextParallelAttention, Bf16OperandsSendKeysAndValuesAsBfloat16) {
  const comm::Communicator& cp = test::world();
  const int rank = cp.rank(), size = cp.size();
  constexpr std::int64_t kChunk = 3;
  constexpr double kBf16AttentionRtol = 2e-2;
  const autograd::Shape shape{kBatch, 2 * size * kChunk, kHeads, kHeadDim};
  const auto rounded_shard = [&](std::uint64_t seed) {
    return zigzag_shard(autograd::read_as_bf16(autograd::randn(shape, seed)).detach(), size, rank);
  };
  const Tensor q = rounded_shard(21), k = rounded_shard(22), v = rounded_shard(23),
               w = zigzag_shard(autograd::randn(shape, 24), size, rank);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  const auto kv_elements = static_cast<std::uint64_t>(2 * k.numel());
  for (const CpComm how : {CpComm::ring, CpComm::all_gather}) {
    SCOPED_TRACE(cp_comm_name(how));
    Result results[2];
    std::uint64_t bytes[2];
    for (const int bf16 : {0, 1}) {
      const kernels::GemmOperandsScope operands(bf16 ? kernels::GemmOperands::bfloat16
                                                     : kernels::GemmOperands::float32);
      const comm::Traffic before = comm::traffic();
      results[bf16] = run(q, k, v, w, [&](const Tensor& qh, const Tensor& kh, const Tensor& vh) {
        return context_parallel_attention(qh, kh, vh, cp, how, scale, true);
      });
      bytes[bf16] = comm::traffic_since(before, comm::traffic())[cp.name()];
    }
    const std::pair<const Tensor*, const Tensor*> results_of[] = {
        {&results[1].out, &results[0].out},
        {&results[1].dq, &results[0].dq},
        {&results[1].dk, &results[0].dk},
        {&results[1].dv, &results[0].dv}};
    for (const auto& [got, want] : results_of)
      EXPECT_LT(test::max_rel_error(*got, *want), kBf16AttentionRtol);
    EXPECT_NE(results[1].out.to_vector(), results[0].out.to_vector()) << "P is rounded";
    const std::uint64_t sends = how == CpComm::ring ? 2 * (size - 1) : (size > 1 ? 2 : 0);
    EXPECT_EQ(bytes[0] - bytes[1], sends * kv_elements * 2);
  }
}

TEST(ContextParallelAttention, RefusesAnOddShard) {
  const Tensor x = Tensor::zeros({1, 1, 3, 4}, DType::f64);
  EXPECT_THROW(context_parallel_attention(x, x, x, test::world(), CpComm::ring, 1.0),
               std::invalid_argument);
}

TEST(ContextParallelAttention, ParsesItsCommunicationNames) {
  EXPECT_EQ(parse_cp_comm("ring"), CpComm::ring);
  EXPECT_EQ(parse_cp_comm("all-gather"), CpComm::all_gather);
  EXPECT_FALSE(parse_cp_comm("allgather").has_value());
  EXPECT_EQ(cp_comm_name(CpComm::all_gather), "all-gather");
}

}  // namespace
}  // namespace mpitron::nn
