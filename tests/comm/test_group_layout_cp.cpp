// The pure 4-D rank layout with a context-parallel axis, rank = d*(pp*cp*tp) + p*(cp*tp) + c*tp +
// t, for many (tp, cp, pp, dp) shapes against brute-force enumeration; the dp×cp group; cp errors.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "comm/errors.h"
#include "comm/group_layout.h"

namespace mpitron::comm {
namespace {

struct Shape {
  int tp;
  int cp;
  int pp;
  int dp;
};

std::string text(const Shape& s) {
  return "tp=" + std::to_string(s.tp) + " cp=" + std::to_string(s.cp) +
         " pp=" + std::to_string(s.pp) + " dp=" + std::to_string(s.dp);
}

std::vector<Shape> shapes() {
  std::vector<Shape> all;
  for (int tp = 1; tp <= 3; ++tp) {
    for (int cp = 1; cp <= 4; ++cp) {
      for (int pp = 1; pp <= 3; ++pp) {
        for (int dp = 1; dp <= 3; ++dp)
          all.push_back({tp, cp, pp, dp});
      }
    }
  }
  return all;
}

// Groups from color -> (key -> rank) maps must equal layout's group lists, in key order.
void expect_groups(const std::map<int, std::map<int, int>>& groups, int group_size,
                   const std::function<std::vector<int>(int)>& group_of) {
  for (const auto& [color, members] : groups) {
    std::vector<int> expected;
    for (const auto& [key, rank] : members)
      expected.push_back(rank);
    ASSERT_EQ(static_cast<int>(expected.size()), group_size);
    for (int rank : expected)
      EXPECT_EQ(group_of(rank), expected);
  }
}

TEST(GroupLayoutCp, EveryShapeMatchesBruteForce) {
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(text(s));
    const GroupLayout layout(s.tp, s.pp, s.dp, s.cp);
    ASSERT_EQ(layout.world_size(), s.tp * s.cp * s.pp * s.dp);
    ASSERT_EQ(layout.size(Axis::cp), s.cp);
    std::map<int, std::map<int, int>> tp_groups, cp_groups, pp_groups, dp_groups, dp_cp_groups;
    for (int d = 0; d < s.dp; ++d) {
      for (int p = 0; p < s.pp; ++p) {
        for (int c = 0; c < s.cp; ++c) {
          for (int t = 0; t < s.tp; ++t) {
            const int rank = d * (s.pp * s.cp * s.tp) + p * (s.cp * s.tp) + c * s.tp + t;
            EXPECT_EQ(layout.coordinates(rank), (Coordinates{t, p, d, c}));
            EXPECT_EQ(layout.rank_of({t, p, d, c}), rank);
            EXPECT_EQ(layout.coordinate(Axis::cp, rank), c);
            // One color per combination of the other three coordinates, key the own one.
            EXPECT_TRUE(tp_groups[(d * s.pp + p) * s.cp + c].emplace(t, rank).second);
            EXPECT_TRUE(cp_groups[(d * s.pp + p) * s.tp + t].emplace(c, rank).second);
            EXPECT_TRUE(pp_groups[(d * s.cp + c) * s.tp + t].emplace(p, rank).second);
            EXPECT_TRUE(dp_groups[(p * s.cp + c) * s.tp + t].emplace(d, rank).second);
            EXPECT_TRUE(dp_cp_groups[p * s.tp + t].emplace(d * s.cp + c, rank).second);
            EXPECT_EQ(layout.split(Axis::cp, rank), (SplitKey{(d * s.pp + p) * s.tp + t, c}));
            EXPECT_EQ(layout.dp_cp_split(rank), (SplitKey{p * s.tp + t, d * s.cp + c}));
            EXPECT_EQ(layout.previous_stage(rank), p > 0 ? rank - s.cp * s.tp : -1);
            EXPECT_EQ(layout.next_stage(rank), p + 1 < s.pp ? rank + s.cp * s.tp : -1);
          }
        }
      }
    }
    for (int rank = 0; rank < layout.world_size(); ++rank) {
      for (Axis axis : {Axis::tp, Axis::cp, Axis::pp, Axis::dp}) {
        const SplitKey key = layout.split(axis, rank);
        const auto& groups = axis == Axis::tp   ? tp_groups
                             : axis == Axis::cp ? cp_groups
                             : axis == Axis::pp ? pp_groups
                                                : dp_groups;
        EXPECT_EQ(groups.at(key.color).at(key.key), rank) << to_string(axis);
      }
    }
    const auto group = [&](Axis axis) {
      return [&layout, axis](int rank) { return layout.group(axis, rank); };
    };
    expect_groups(tp_groups, s.tp, group(Axis::tp));
    expect_groups(cp_groups, s.cp, group(Axis::cp));
    expect_groups(pp_groups, s.pp, group(Axis::pp));
    expect_groups(dp_groups, s.dp, group(Axis::dp));
    expect_groups(dp_cp_groups, s.dp * s.cp, [&](int rank) { return layout.dp_cp_group(rank); });
  }
}

TEST(GroupLayoutCp, CpOneIsTheThreeDimensionalLayout) {
  for (const Shape& s : shapes()) {
    if (s.cp != 1) continue;
    const GroupLayout three(s.tp, s.pp, s.dp);
    const GroupLayout four(s.tp, s.pp, s.dp, 1);
    for (int rank = 0; rank < three.world_size(); ++rank) {
      EXPECT_EQ(four.dp_cp_group(rank), three.group(Axis::dp, rank));
      EXPECT_EQ(four.dp_cp_split(rank), three.split(Axis::dp, rank));
      EXPECT_EQ(four.group(Axis::cp, rank), std::vector<int>{rank});
    }
  }
}

TEST(GroupLayoutCp, EmbeddingGroupsStayInsideOneContextRank) {
  const GroupLayout layout(1, 2, 1, 2);  // ranks p*2 + c
  EXPECT_EQ(layout.embedding_group(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(layout.embedding_group(3), (std::vector<int>{1, 3}));
  EXPECT_EQ(layout.embedding_split(1)->color, 1);
}

std::string config_error(int tp, int pp, int dp, int world, int cp) {
  try {
    validate_sizes(tp, pp, dp, world, cp);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

TEST(GroupLayoutCp, CpNotDividingTheWorldIsOneLine) {
  EXPECT_EQ(config_error(1, 1, 1, 4, 3), "tp*cp*pp*dp = 1*3*1*1 = 3, but the world size is 4");
  EXPECT_EQ(config_error(2, 1, 2, 4, 2), "tp*cp*pp*dp = 2*2*1*2 = 8, but the world size is 4");
  EXPECT_EQ(config_error(1, 1, 1, 4, 0),
            "tp, pp, dp and cp must each be at least 1, got tp=1, pp=1, dp=1, cp=0");
  EXPECT_EQ(config_error(1, 2, 1, 4, 2), "no error");
  EXPECT_THROW(GroupLayout(1, 1, 1, 0), ConfigError);
  EXPECT_THROW(GroupLayout(1, 1, 1, 2).rank_of({0, 0, 0, 2}), std::out_of_range);
  EXPECT_EQ(to_string(Axis::cp), "cp");
}

}  // namespace
}  // namespace mpitron::comm
