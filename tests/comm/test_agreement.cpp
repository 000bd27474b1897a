// Agreement helpers (comm/agreement.h): the scalar collectives and ranks_where with rank-valued
// data (expected results are closed-form in the rank), on the world and on a split communicator
// whose world ranks differ from its local ones.
#include <gtest/gtest.h>

#include <vector>

#include "comm/agreement.h"
#include "mpi_test_main.h"

namespace mpitron::comm {
namespace {

TEST(Agreement, ScalarReductionsAndGatherAreExactOnRankValues) {
  const Communicator& world = test::world();
  const int n = world.size(), r = world.rank();
  EXPECT_EQ(all_reduce_scalar(world, r + 1.0, ReduceOp::sum), n * (n + 1) / 2.0);
  EXPECT_EQ(all_reduce_scalar(world, r, ReduceOp::max), n - 1.0);
  EXPECT_EQ(all_reduce_scalar(world, r, ReduceOp::min), 0.0);
  EXPECT_EQ(all_reduce_values(world, {r + 1.0, -1.0 * r, r == 1 ? 7.0 : 0.0}, ReduceOp::max),
            (std::vector<double>{1.0 * n, 0.0, n > 1 ? 7.0 : 0.0}));
  std::vector<double> expected;
  for (int i = 0; i < n; ++i)
    expected.push_back(10.0 * i);
  EXPECT_EQ(all_gather_scalar(world, 10.0 * r), expected);
}

TEST(Agreement, RanksWhereListsWorldRanksInOrderOnEveryRank) {
  const Communicator& world = test::world();
  std::vector<int> odd;
  for (int r = 1; r < world.size(); r += 2)
    odd.push_back(r);
  EXPECT_EQ(ranks_where(world, world.rank() % 2 == 1), odd);
  EXPECT_TRUE(ranks_where(world, false).empty());
  // Odd and even world ranks in two groups: the flag of local rank 0 names its world rank.
  const Communicator half = world.split(world.rank() % 2, world.rank(), "half");
  EXPECT_EQ(ranks_where(half, half.rank() == 0), std::vector<int>{world.rank() % 2});
}

TEST(RankText, ListsAndPhrases) {
  const std::vector<int> one{3}, two{1, 3}, many{0, 1, 2, 3, 4};
  EXPECT_EQ(rank_list(two), "1, 3");
  EXPECT_EQ(rank_list(many, 3), "0, 1, 2, ...");
  EXPECT_EQ(rank_list(many, 5), "0, 1, 2, 3, 4");
  EXPECT_EQ(rank_list(std::vector<int>{}), "");
  EXPECT_EQ(ranks_phrase(one), "rank 3");
  EXPECT_EQ(ranks_phrase(two), "ranks 1, 3");
}

}  // namespace
}  // namespace mpitron::comm
