// math::lane_max, whose whole groups run on one vector in CPU builds (math::lane_max_groups),
// against its documented order run element by element here: lane j takes elements i + j of each
// whole group of kSumLanes, the rest go to lane 0, then the lanes meet in a fixed tree, each
// step `a > b ? a : b`. That order decides the result only for NaN and signed zeros, which the
// cases hold; on everything else the result must also be the plain maximum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/math.h"

namespace {

using mpitron::kernels::math::kSumLanes;
using mpitron::kernels::math::lane_max;

template <class T>
T documented_lane_max(const std::vector<T>& x, T init) {
  T lanes[kSumLanes];
  std::fill(lanes, lanes + kSumLanes, init);
  const std::size_t whole = x.size() / kSumLanes * kSumLanes;
  for (std::size_t i = 0; i < x.size(); ++i) {
    T& lane = lanes[i < whole ? i % kSumLanes : 0];
    lane = x[i] > lane ? x[i] : lane;
  }
  for (std::size_t width = kSumLanes / 2; width > 0; width /= 2) {
    for (std::size_t j = 0; j < width; ++j)
      lanes[j] = lanes[j + width] > lanes[j] ? lanes[j + width] : lanes[j];
  }
  return lanes[0];
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

template <class T>
void check_lane_max() {
  std::mt19937 gen(7);
  std::uniform_real_distribution<T> value(-4, 4);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  for (const std::size_t n : {0, 1, 7, 8, 9, 64, 67, 300}) {
    std::vector<T> x(n);
    for (T& v : x)
      v = value(gen);
    SCOPED_TRACE(::testing::Message() << "n " << n);
    if (n > 0) {
      EXPECT_EQ(lane_max(x.data(), n, -inf), *std::max_element(x.begin(), x.end()));
    }
    std::vector<T> special = x;
    for (std::size_t i = 0; i < n; ++i) {
      if (i % 5 == 1) special[i] = nan;
      if (i % 7 == 2) special[i] = T(0);
      if (i % 7 == 3) special[i] = -T(0);
      if (i % 11 == 4) special[i] = -inf;
    }
    std::vector<T> zeros(n);
    for (std::size_t i = 0; i < n; ++i)
      zeros[i] = i % 3 == 0 ? -T(0) : T(0);
    for (const auto* cases : {&special, &zeros}) {
      for (const T init : {-inf, -T(0), T(0), nan}) {
        const T got = lane_max(cases->data(), n, init);
        const T want = documented_lane_max(*cases, init);
        EXPECT_TRUE(same_bits(got, want) || (std::isnan(got) && std::isnan(want)))
            << got << " against " << want << " from init " << init;
      }
    }
  }
}

TEST(LaneMax, FollowsItsDocumentedOrderInFloat) {
  check_lane_max<float>();
}

TEST(LaneMax, FollowsItsDocumentedOrderInDouble) {
  check_lane_max<double>();
}

}  // namespace
