// Zigzag sharding for context parallelism: the positions each rank keeps, the shard of a
// [batch, seq, ...] tensor against a brute-force gather, the round trip, token batches whose
// targets were shifted before sharding, and the one-line errors.
#include <gtest/gtest.h>

#include <functional>
#include <numeric>

#include "nn/data/zigzag.h"

namespace mpitron::nn {
namespace {

// x[b, s, i] = 1000 b + 10 s + i: every element names its place.
Tensor numbered(std::int64_t batch, std::int64_t seq, std::int64_t inner) {
  std::vector<double> values;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seq; ++s) {
      for (std::int64_t i = 0; i < inner; ++i)
        values.push_back(static_cast<double>(1000 * b + 10 * s + i));
    }
  }
  return Tensor::from_vector(values, {batch, seq, inner});
}

TEST(Zigzag, PositionsAreChunksCAndTwoCpMinusOneMinusC) {
  EXPECT_EQ(zigzag_positions(8, 2, 0), (std::vector<std::int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(zigzag_positions(8, 2, 1), (std::vector<std::int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(zigzag_positions(8, 4, 3), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(zigzag_positions(6, 1, 0), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
  // Every position is kept by exactly one rank.
  for (int cp : {1, 2, 3, 4}) {
    const std::int64_t seq = 4 * cp;
    std::vector<int> owners(static_cast<std::size_t>(seq), 0);
    for (int c = 0; c < cp; ++c) {
      for (std::int64_t p : zigzag_positions(seq, cp, c))
        ++owners[static_cast<std::size_t>(p)];
    }
    EXPECT_EQ(owners, std::vector<int>(static_cast<std::size_t>(seq), 1)) << cp;
  }
}

TEST(Zigzag, ShardGathersTheRowsOfItsPositionsAndRoundTrips) {
  for (int cp : {1, 2, 3, 4}) {
    const std::int64_t batch = 2, seq = 4 * cp, inner = 3;
    const Tensor x = numbered(batch, seq, inner);
    std::vector<Tensor> shards;
    for (int c = 0; c < cp; ++c) {
      const Tensor shard = zigzag_shard(x, cp, c);
      ASSERT_EQ(shard.shape(), (autograd::Shape{batch, seq / cp, inner}));
      const std::vector<std::int64_t> positions = zigzag_positions(seq, cp, c);
      std::vector<double> expected;
      for (std::int64_t b = 0; b < batch; ++b) {
        for (std::int64_t s : positions) {
          for (std::int64_t i = 0; i < inner; ++i)
            expected.push_back(static_cast<double>(1000 * b + 10 * s + i));
        }
      }
      EXPECT_EQ(shard.to_vector(), expected) << "cp " << cp << " rank " << c;
      shards.push_back(shard);
    }
    const Tensor back = zigzag_unshard(shards);
    EXPECT_EQ(back.shape(), x.shape());
    EXPECT_EQ(back.to_vector(), x.to_vector()) << cp;
  }
}

TEST(Zigzag, TokenBatchShiftsTargetsOnTheWholeSequence) {
  // Tokens 0..8 in one sequence: inputs 0..7, targets 1..8.
  std::vector<std::uint32_t> tokens(9);
  std::iota(tokens.begin(), tokens.end(), 0u);
  const TokenBatch global = make_token_batch(tokens, {0}, 8, Device::cpu);
  const ZigzagTokenBatch rank0 = zigzag_token_batch(global, 2, 0);
  EXPECT_EQ(rank0.tokens.inputs.to_vector(), (std::vector<double>{0, 1, 6, 7}));
  EXPECT_EQ(rank0.tokens.targets.to_vector(), (std::vector<double>{1, 2, 7, 8}));
  EXPECT_EQ(rank0.positions.to_vector(), (std::vector<double>{0, 1, 6, 7}));
  const ZigzagTokenBatch rank1 = zigzag_token_batch(global, 2, 1);
  // The last target of chunk 1 is the first input of chunk 2, which rank 1 also holds.
  EXPECT_EQ(rank1.tokens.inputs.to_vector(), (std::vector<double>{2, 3, 4, 5}));
  EXPECT_EQ(rank1.tokens.targets.to_vector(), (std::vector<double>{3, 4, 5, 6}));
  EXPECT_EQ(rank1.tokens.inputs.dtype(), kernels::DType::i64);
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "no error";
}

TEST(Zigzag, BadSizesAreOneLine) {
  EXPECT_EQ(error_of([] { zigzag_positions(10, 2, 0); }),
            "seq 10 does not split into 2*cp = 4 equal zigzag chunks");
  EXPECT_EQ(error_of([] { zigzag_shard(numbered(1, 6, 1), 2, 1); }),
            "seq 6 does not split into 2*cp = 4 equal zigzag chunks");
  EXPECT_EQ(error_of([] { zigzag_positions(8, 2, 2); }), "context rank 2 is outside [0, 2)");
  EXPECT_EQ(error_of([] { zigzag_positions(8, 0, 0); }), "cp must be at least 1, got 0");
  EXPECT_EQ(error_of([] { zigzag_shard(Tensor::zeros({8}), 2, 0); }),
            "zigzag sharding needs [batch, seq, ...], got [8]");
  EXPECT_EQ(error_of([] {
              zigzag_unshard({numbered(1, 4, 1), numbered(1, 2, 1)});
            }),
            "zigzag_unshard: shards [1, 4, 1] and [1, 2, 1] differ");
}

}  // namespace
}  // namespace mpitron::nn
