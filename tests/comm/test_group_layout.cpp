// The pure rank layout, for many (tp, pp, dp) shapes, against brute-force enumeration of the
// defining formulas; no MPI involved.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "comm/errors.h"
#include "comm/group_layout.h"

namespace mpitron::comm {
namespace {

struct Shape {
  int tp;
  int pp;
  int dp;
};

std::vector<Shape> shapes() {
  std::vector<Shape> all;
  for (int tp = 1; tp <= 4; ++tp) {
    for (int pp = 1; pp <= 4; ++pp) {
      for (int dp = 1; dp <= 4; ++dp)
        all.push_back({tp, pp, dp});
    }
  }
  for (Shape s :
       {Shape{8, 1, 1}, Shape{1, 1, 8}, Shape{1, 8, 1}, Shape{3, 5, 7}, Shape{16, 2, 3}}) {
    all.push_back(s);
  }
  return all;
}

TEST(GroupLayout, SpecExampleWorld8) {
  const GroupLayout layout(2, 2, 2);
  const std::vector<std::vector<int>> tp{{0, 1}, {0, 1}, {2, 3}, {2, 3},
                                         {4, 5}, {4, 5}, {6, 7}, {6, 7}};
  const std::vector<std::vector<int>> pp{{0, 2}, {1, 3}, {0, 2}, {1, 3},
                                         {4, 6}, {5, 7}, {4, 6}, {5, 7}};
  const std::vector<std::vector<int>> dp{{0, 4}, {1, 5}, {2, 6}, {3, 7},
                                         {0, 4}, {1, 5}, {2, 6}, {3, 7}};
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(layout.group(Axis::tp, rank), tp[rank]) << rank;
    EXPECT_EQ(layout.group(Axis::pp, rank), pp[rank]) << rank;
    EXPECT_EQ(layout.group(Axis::dp, rank), dp[rank]) << rank;
  }
  EXPECT_EQ(layout.previous_stage(2), 0);
  EXPECT_EQ(layout.next_stage(5), 7);
  EXPECT_EQ(layout.previous_stage(5), -1);
  EXPECT_EQ(layout.next_stage(7), -1);
}

TEST(GroupLayout, EveryShapeMatchesBruteForce) {
  for (const Shape& s : shapes()) {
    SCOPED_TRACE("tp=" + std::to_string(s.tp) + " pp=" + std::to_string(s.pp) +
                 " dp=" + std::to_string(s.dp));
    const GroupLayout layout(s.tp, s.pp, s.dp);
    ASSERT_EQ(layout.world_size(), s.tp * s.pp * s.dp);
    // color -> (key -> rank) for each axis, straight from the colour/key definitions.
    std::map<int, std::map<int, int>> tp_groups, pp_groups, dp_groups;
    for (int d = 0; d < s.dp; ++d) {
      for (int p = 0; p < s.pp; ++p) {
        for (int t = 0; t < s.tp; ++t) {
          const int rank = d * (s.pp * s.tp) + p * s.tp + t;
          EXPECT_EQ(layout.coordinates(rank), (Coordinates{t, p, d}));
          EXPECT_EQ(layout.rank_of({t, p, d}), rank);
          EXPECT_EQ(layout.split(Axis::tp, rank), (SplitKey{d * s.pp + p, t}));
          EXPECT_EQ(layout.split(Axis::pp, rank), (SplitKey{d * s.tp + t, p}));
          EXPECT_EQ(layout.split(Axis::dp, rank), (SplitKey{p * s.tp + t, d}));
          tp_groups[d * s.pp + p][t] = rank;
          pp_groups[d * s.tp + t][p] = rank;
          dp_groups[p * s.tp + t][d] = rank;
          EXPECT_EQ(layout.previous_stage(rank), p > 0 ? rank - s.tp : -1);
          EXPECT_EQ(layout.next_stage(rank), p + 1 < s.pp ? rank + s.tp : -1);
        }
      }
    }
    const auto check = [&](Axis axis, const std::map<int, std::map<int, int>>& groups) {
      EXPECT_EQ(static_cast<int>(groups.size()), layout.world_size() / layout.size(axis));
      for (const auto& [color, members] : groups) {
        std::vector<int> expected;
        for (const auto& [key, rank] : members)
          expected.push_back(rank);
        ASSERT_EQ(static_cast<int>(expected.size()), layout.size(axis));
        for (int i = 0; i < layout.size(axis); ++i) {
          EXPECT_EQ(layout.group(axis, expected[i]), expected);
          EXPECT_EQ(layout.coordinate(axis, expected[i]), i);
        }
      }
    };
    check(Axis::tp, tp_groups);
    check(Axis::pp, pp_groups);
    check(Axis::dp, dp_groups);
  }
}

TEST(GroupLayout, EmbeddingGroupsJoinTheFirstAndLastStage) {
  const GroupLayout layout(2, 4, 2);  // ranks d*8 + p*2 + t
  EXPECT_EQ(layout.embedding_group(0), (std::vector<int>{0, 6}));
  EXPECT_EQ(layout.embedding_group(7), (std::vector<int>{1, 7}));
  EXPECT_EQ(layout.embedding_group(14), (std::vector<int>{8, 14}));
  EXPECT_TRUE(layout.embedding_group(2).empty());
  EXPECT_FALSE(layout.embedding_split(5).has_value());
  EXPECT_EQ(GroupLayout(2, 1, 1).embedding_group(1), (std::vector<int>{1}));
  for (const Shape& s : shapes()) {
    SCOPED_TRACE("tp=" + std::to_string(s.tp) + " pp=" + std::to_string(s.pp) +
                 " dp=" + std::to_string(s.dp));
    const GroupLayout layout(s.tp, s.pp, s.dp);
    std::map<int, std::map<int, int>> groups;  // color -> (key -> rank)
    for (int rank = 0; rank < layout.world_size(); ++rank) {
      const Coordinates c = layout.coordinates(rank);
      const bool member = c.p == 0 || c.p == s.pp - 1;
      const std::optional<SplitKey> key = layout.embedding_split(rank);
      ASSERT_EQ(key.has_value(), member);
      if (!member) {
        EXPECT_TRUE(layout.embedding_group(rank).empty());
        continue;
      }
      EXPECT_TRUE(groups[key->color].emplace(key->key, rank).second) << "duplicate key";
      std::vector<int> expected{layout.rank_of({c.t, 0, c.d})};
      if (s.pp > 1) expected.push_back(layout.rank_of({c.t, s.pp - 1, c.d}));
      EXPECT_EQ(layout.embedding_group(rank), expected) << rank;
    }
    // The split keys give exactly those groups, ordered first stage then last stage.
    EXPECT_EQ(groups.size(), static_cast<std::size_t>(s.tp * s.dp));
    for (const auto& [color, members] : groups) {
      std::vector<int> ranks;
      for (const auto& [key, rank] : members)
        ranks.push_back(rank);
      EXPECT_EQ(layout.embedding_group(ranks.front()), ranks);
    }
  }
}

TEST(GroupLayout, OutOfRangeRanksAndCoordinates) {
  const GroupLayout layout(2, 3, 1);
  EXPECT_THROW(layout.coordinates(6), std::out_of_range);
  EXPECT_THROW(layout.coordinates(-1), std::out_of_range);
  EXPECT_THROW(layout.rank_of({2, 0, 0}), std::out_of_range);
  EXPECT_THROW(layout.rank_of({0, 0, 1}), std::out_of_range);
}

std::string config_error(int tp, int pp, int dp, int world) {
  try {
    validate_sizes(tp, pp, dp, world);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

TEST(ValidateSizes, NamesTheNumbers) {
  EXPECT_EQ(config_error(2, 2, 2, 4), "tp*pp*dp = 2*2*2 = 8, but the world size is 4");
  EXPECT_EQ(config_error(4, 1, 1, 8), "tp*pp*dp = 4*1*1 = 4, but the world size is 8");
  EXPECT_EQ(config_error(0, 2, 2, 4),
            "tp, pp and dp must each be at least 1, got tp=0, pp=2, dp=2");
  EXPECT_EQ(config_error(1, -1, 4, 4),
            "tp, pp and dp must each be at least 1, got tp=1, pp=-1, dp=4");
  EXPECT_EQ(config_error(65536, 65536, 2, 4),
            "tp*pp*dp = 65536*65536*2 = 8589934592, but the world size is 4");
  EXPECT_EQ(config_error(2, 2, 2, 8), "no error");
  EXPECT_THROW(GroupLayout(1, 0, 1), ConfigError);
  EXPECT_THROW(GroupLayout(65536, 65536, 1), ConfigError);
}

TEST(Axis, Names) {
  EXPECT_EQ(to_string(Axis::tp), "tp");
  EXPECT_EQ(to_string(Axis::pp), "pp");
  EXPECT_EQ(to_string(Axis::dp), "dp");
}

}  // namespace
}  // namespace mpitron::comm
