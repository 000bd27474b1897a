// The rule that chooses how idle OpenMP threads wait (src/kernels/cpu/openmp_wait_rule.h): the
// launcher variables that say how many ranks share a host, a cgroup's CPU list, whether threads
// have cores of their own, and the spin count for a time.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/cpu/openmp_wait_rule.h"

namespace mpitron::test {
namespace {

using kernels::ranks_on_this_host;
using kernels::slurm_tasks_on_node;
using kernels::spin_count;
using kernels::threads_have_own_cores;

TEST(SlurmTasksOnNode, ExpandsRepeatedCounts) {
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 0), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("1,8(x2)", 2), 8);
}

TEST(SlurmTasksOnNode, RejectsMalformedTextAndMissingNodes) {
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", -1), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("", 0), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("2(x3", 0), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("two", 0), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("0", 0), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("2(x0)", 0), std::nullopt);
}

TEST(RanksOnThisHost, PrefersOpenMpiThenHydraThenSlurm) {
  EXPECT_EQ(ranks_on_this_host("3", "5", "7", "0"), 3);
  EXPECT_EQ(ranks_on_this_host(nullptr, "5", "7", "0"), 5);
  EXPECT_EQ(ranks_on_this_host(nullptr, nullptr, "2(x2),6", "2"), 6);
  EXPECT_EQ(ranks_on_this_host("bad", nullptr, "2(x2),6", "1"), 2);
}

TEST(RanksOnThisHost, IsOneWithoutALauncher) {
  EXPECT_EQ(ranks_on_this_host(nullptr, nullptr, nullptr, nullptr), 1);
  EXPECT_EQ(ranks_on_this_host(nullptr, nullptr, "4", nullptr), 1);
  EXPECT_EQ(ranks_on_this_host(nullptr, nullptr, "4", "x"), 1);
  EXPECT_EQ(ranks_on_this_host("0", "-2", "4", "9"), 1);
}

TEST(CpuListCount, CountsRangesAndSingles) {
  EXPECT_EQ(kernels::cpu_list_count("0-3,8-11\n"), 8);
  EXPECT_EQ(kernels::cpu_list_count("5"), 1);
  EXPECT_EQ(kernels::cpu_list_count("0,2,4-5"), 4);
  EXPECT_EQ(kernels::cpu_list_count(""), std::nullopt);
  EXPECT_EQ(kernels::cpu_list_count("3-1"), std::nullopt);
  EXPECT_EQ(kernels::cpu_list_count("0-"), std::nullopt);
  EXPECT_EQ(kernels::cpu_list_count("a"), std::nullopt);
}

TEST(ThreadsHaveOwnCores, TheRanksOfTheHostMustFitItsCpus) {
  EXPECT_TRUE(threads_have_own_cores(2, 1, 2, 2));
  EXPECT_TRUE(threads_have_own_cores(4, 4, 16, 16));
  EXPECT_FALSE(threads_have_own_cores(2, 2, 2, 2));  // 4 threads on 2 CPUs (or a 2-CPU cpuset)
  EXPECT_FALSE(threads_have_own_cores(3, 1, 2, 2));
  EXPECT_FALSE(threads_have_own_cores(4, 32, 32, 64));  // Open MPI binding to a socket
}

TEST(ThreadsHaveOwnCores, ABoundRankNeedsAsManyCpusAsThreads) {
  EXPECT_TRUE(threads_have_own_cores(8, 2, 8, 16));   // --map-by slot:PE=8 --bind-to core
  EXPECT_FALSE(threads_have_own_cores(2, 2, 1, 16));  // --bind-to core, one core each
  EXPECT_TRUE(threads_have_own_cores(2, 64, 2, 128));
}

TEST(ThreadsHaveOwnCores, HugeCountsDoNotOverflow) {
  constexpr std::int64_t kHuge = std::int64_t{1} << 62;
  EXPECT_FALSE(threads_have_own_cores(kHuge, kHuge, 1 << 20, 1 << 20));
  EXPECT_FALSE(threads_have_own_cores(2, kHuge, 64, 64));
}

TEST(CpuMaskWarningText, NamesTheBindingOrTheHost) {
  EXPECT_EQ(kernels::cpu_mask_warning_text(2, 2, 16), std::nullopt);
  EXPECT_EQ(kernels::cpu_mask_warning_text(1, 1, 16), std::nullopt);
  EXPECT_EQ(kernels::cpu_mask_warning_text(2, 1, 16),
            "2 threads per rank, but this rank is bound to 1 CPU, so its threads take turns: bind "
            "each rank to as many cores as threads (mpirun --map-by slot:PE=2 --bind-to core) or "
            "not at all (--bind-to none); see docs/cluster.md");
  EXPECT_EQ(kernels::cpu_mask_warning_text(3, 2, 2),
            "3 threads per rank, but only 2 CPUs are available here, so its threads take turns: "
            "run at most 2 threads per rank (--threads)");
}

TEST(SpinCount, CountsSpinsForTheTime) {
  EXPECT_EQ(spin_count(100.0, 12.5), 8000);
  EXPECT_EQ(spin_count(100.0, 50.0), 2000);
  EXPECT_EQ(spin_count(100.0, 0.0), 1);
  EXPECT_EQ(spin_count(0.0, 10.0), 1);
  EXPECT_EQ(kernels::kOwnCoresSpinMicroseconds, 50.0);
}

}  // namespace
}  // namespace mpitron::test
