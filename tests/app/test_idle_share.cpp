// Each pipeline stage's idle share from the ranks' (app/report/idle_share.h): ranks grouped by
// stage in the topology's numbering, and the percentages line.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "app/report/idle_share.h"

namespace mpitron::app {
namespace {

TEST(IdleShare, RanksAreAveragedPerStage) {
  // tp 2, pp 2, dp 2: ranks 0, 1, 4, 5 are stage 0; 2, 3, 6, 7 stage 1.
  const std::vector<double> by_rank{0.1, 0.3, 0.5, 0.7, 0.1, 0.3, 0.5, 0.7};
  const std::vector<double> stages = mean_by_stage(by_rank, 2, 2);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_DOUBLE_EQ(stages[0], 0.2);
  EXPECT_DOUBLE_EQ(stages[1], 0.6);
  EXPECT_EQ(mean_by_stage({0.25, 0.5, 0.75, 1.0}, 1, 4),
            (std::vector<double>{0.25, 0.5, 0.75, 1.0}));
  ASSERT_EQ(mean_by_stage({0.2, 0.4}, 1, 1).size(), 1u);
  EXPECT_DOUBLE_EQ(mean_by_stage({0.2, 0.4}, 1, 1)[0], 0.3);
}

TEST(IdleShare, RanksThatDoNotSplitAreRejected) {
  EXPECT_THROW(mean_by_stage({0.1, 0.2, 0.3}, 1, 2), std::invalid_argument);
  EXPECT_THROW(mean_by_stage({}, 1, 1), std::invalid_argument);
  EXPECT_THROW(mean_by_stage({0.1}, 0, 1), std::invalid_argument);
}

TEST(IdleShare, PercentagesAreWholeNumbers) {
  EXPECT_EQ(percentages({0.12, 0.034, 1.0}), "12 %, 3 %, 100 %");
  EXPECT_EQ(percentages({}), "");
}

}  // namespace
}  // namespace mpitron::app
