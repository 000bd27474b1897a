#include "app/validate/cp_checks.h"

#include <cmath>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/data/zigzag.h"
#include "nn/layers/context_parallel_attention.h"

namespace mpitron::app {

using autograd::Tensor;

namespace {

constexpr std::int64_t kCpBatch = 2, kCpHeads = 2, kCpChunk = 5, kCpHeadDim = 8;

// The output and the q, k, v gradients of sum(attend(q, k, v) * w), all [batch, seq, heads,
// head_dim] (the attention sees them as [batch, heads, seq, head_dim]).
struct AttentionRun {
  Tensor out, dq, dk, dv;
};

template <class Attend>
AttentionRun differentiate(const std::vector<Tensor>& qkvw, Attend attend) {
  std::vector<Tensor> inputs;
  for (int i = 0; i < 3; ++i)
    inputs.push_back(qkvw[static_cast<std::size_t>(i)].clone().set_requires_grad());
  const auto heads_first = [](const Tensor& x) { return autograd::transpose(x, 1, 2); };
  const Tensor out = autograd::transpose(
      attend(heads_first(inputs[0]), heads_first(inputs[1]), heads_first(inputs[2])), 1, 2);
  autograd::sum(autograd::mul(out, qkvw[3])).backward();
  return {out.detach(), inputs[0].grad(), inputs[1].grad(), inputs[2].grad()};
}

void expect_same(Comparison& comparison, const AttentionRun& actual, const AttentionRun& expected) {
  comparison.expect_close(actual.out, expected.out);
  comparison.expect_close(actual.dq, expected.dq);
  comparison.expect_close(actual.dk, expected.dk);
  comparison.expect_close(actual.dv, expected.dv);
}

}  // namespace

std::vector<LocalCheck> check_context_parallel(const ValidateContext& ctx) {
  const comm::Communicator& ring = ctx.topology.world();
  const int cp = ring.size(), rank = ring.rank();
  const std::int64_t seq = 2 * cp * kCpChunk;
  std::vector<Tensor> full, shard;
  for (std::uint64_t i = 0; i < 4; ++i) {
    full.push_back(autograd::randn({kCpBatch, seq, kCpHeads, kCpHeadDim}, ctx.seed + 900 + i, 1.0,
                                   autograd::DType::f32, ctx.device));
    shard.push_back(nn::zigzag_shard(full.back(), cp, rank));
  }

  LocalCheck zigzag{"CP: zigzag shards round trip and hold their positions",
                    Comparison(ctx.tolerance), ""};
  std::vector<Tensor> every_shard;
  for (int c = 0; c < cp; ++c)
    every_shard.push_back(nn::zigzag_shard(full[0], cp, c));
  zigzag.comparison.expect_close(nn::zigzag_unshard(every_shard), full[0]);
  std::vector<Tensor> rows;
  for (const std::int64_t position : nn::zigzag_positions(seq, cp, rank))
    rows.push_back(autograd::narrow(full[0], 1, position, 1));
  zigzag.comparison.expect_close(shard[0], autograd::concat(rows, 1));

  const double scale = 1.0 / std::sqrt(static_cast<double>(kCpHeadDim));
  const AttentionRun dense =
      differentiate(full, [&](const Tensor& q, const Tensor& k, const Tensor& v) {
        return autograd::scaled_dot_product_attention(q, k, v, /*causal=*/true, scale);
      });
  const auto sharded = [&](nn::CpComm how) {
    return differentiate(shard, [&](const Tensor& q, const Tensor& k, const Tensor& v) {
      return nn::context_parallel_attention(q, k, v, ring, how, scale);
    });
  };
  const AttentionRun by_ring = sharded(nn::CpComm::ring);
  const auto own_rows = [&](const Tensor& x) { return nn::zigzag_shard(x, cp, rank); };
  LocalCheck ring_check{"CP: ring attention forward and backward match dense causal attention",
                        Comparison(ctx.tolerance), ""};
  expect_same(ring_check.comparison, by_ring,
              {own_rows(dense.out), own_rows(dense.dq), own_rows(dense.dk), own_rows(dense.dv)});

  LocalCheck gather_check{"CP: all-gather attention equals ring attention",
                          Comparison(ctx.tolerance), trivial_at("cp", cp)};
  expect_same(gather_check.comparison, sharded(nn::CpComm::all_gather), by_ring);
  return {zigzag, ring_check, gather_check};
}

}  // namespace mpitron::app
