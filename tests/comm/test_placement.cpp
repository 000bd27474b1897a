// The placement line of every rank_<N>.log: CPU ranges and the text, from fixed facts.
#include <gtest/gtest.h>

#include "comm/placement.h"

namespace mpitron::comm {
namespace {

TEST(Placement, CpuRangesJoinRuns) {
  EXPECT_EQ(cpu_ranges({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(cpu_ranges({5}), "5");
  EXPECT_EQ(cpu_ranges({}), "");
}

TEST(Placement, TextNamesHostProcessRanksCpusAndGpu) {
  Placement p{"node3", 4711, 5, {1, 4}, {0, 1, 2, 3}, 2, 1, "1"};
  EXPECT_EQ(placement_text(p),
            "host node3, pid 4711, world rank 5, local rank 1 of 4, CPUs 0-3 (on 2), GPU: CUDA "
            "device 0 of 1 visible (CUDA_VISIBLE_DEVICES=1)");
  p = Placement{"node3", 1, 0, {0, 1}, {}, -1, 0, ""};
  EXPECT_EQ(placement_text(p),
            "host node3, pid 1, world rank 0, local rank 0 of 1, CPUs ?, GPU: none visible");
}

}  // namespace
}  // namespace mpitron::comm
