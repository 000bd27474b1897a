// Launch sanity as a pure function of the environment: which variable speaks for the launcher,
// and when a world of one contradicts it. The environments are those each launcher really sets
// (mpirun, srun steps, the shells of salloc/sbatch, mpirun inside an allocation).
#include <gtest/gtest.h>

#include <cstdlib>

#include "comm/launch.h"

namespace mpitron::comm {
namespace {

TEST(LauncherClaim, NoLauncherVariablesMeansNoClaim) {
  EXPECT_EQ(launcher_claim({}), std::nullopt);
  EXPECT_EQ(launcher_claim({{"HOME", "/root"}, {"SLURM_JOB_ID", "7"}}), std::nullopt);
}

TEST(LauncherClaim, OpenMpiAndPmiSizes) {
  EXPECT_EQ(launcher_claim({{"OMPI_COMM_WORLD_SIZE", "4"}}),
            (LauncherClaim{"OMPI_COMM_WORLD_SIZE", 4}));
  EXPECT_EQ(launcher_claim({{"PMI_SIZE", "6"}}), (LauncherClaim{"PMI_SIZE", 6}));
  // The innermost launcher wins: mpirun inside an srun step of one task.
  EXPECT_EQ(launcher_claim({{"OMPI_COMM_WORLD_SIZE", "8"},
                            {"PMI_SIZE", "3"},
                            {"SLURM_STEP_ID", "0"},
                            {"SLURM_STEP_NUM_TASKS", "1"}}),
            (LauncherClaim{"OMPI_COMM_WORLD_SIZE", 8}));
}

TEST(LauncherClaim, SlurmCountsOnlyInsideAStep) {
  // The shell of `salloc -n 4` or an `sbatch -n 4` script: an allocation, not a launch.
  EXPECT_EQ(launcher_claim({{"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "12"}}), std::nullopt);
  EXPECT_EQ(launcher_claim({{"SLURM_STEP_NUM_TASKS", "4"}}), std::nullopt);
  // `srun -n 2` inside an allocation of 8: the step's count, not the allocation's.
  EXPECT_EQ(launcher_claim(
                {{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_NTASKS", "8"}}),
            (LauncherClaim{"SLURM_STEP_NUM_TASKS", 2}));
  EXPECT_EQ(launcher_claim({{"SLURM_STEP_ID", "3"}, {"SLURM_NTASKS", "5"}}),
            (LauncherClaim{"SLURM_NTASKS", 5}));
}

TEST(LauncherClaim, MalformedValuesAreSkipped) {
  for (const char* bad : {"", "0", "-4", "4x", " 4", "abc", "99999999999"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(launcher_claim({{"OMPI_COMM_WORLD_SIZE", bad}, {"PMI_SIZE", "3"}}),
              (LauncherClaim{"PMI_SIZE", 3}));
    EXPECT_EQ(launcher_claim(
                  {{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", bad}, {"SLURM_NTASKS", "2"}}),
              (LauncherClaim{"SLURM_NTASKS", 2}));
  }
}

TEST(LaunchMismatch, SingletonsUnderSrunAreReported) {
  const EnvironmentMap srun{{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}};
  const std::optional<std::string> message = launch_mismatch(srun, 1);
  ASSERT_TRUE(message.has_value());
  EXPECT_NE(message->find("the launcher started 4 tasks (SLURM_STEP_NUM_TASKS=4)"),
            std::string::npos)
      << *message;
  EXPECT_NE(message->find("MPI sees a world of 1"), std::string::npos) << *message;
  EXPECT_NE(message->find("srun --mpi=pmix -n 4"), std::string::npos) << *message;
  EXPECT_NE(message->find("mpirun -np 4"), std::string::npos) << *message;
}

TEST(LaunchMismatch, SingletonsUnderOtherLaunchersAreReported) {
  const auto open_mpi = launch_mismatch({{"OMPI_COMM_WORLD_SIZE", "2"}}, 1);
  ASSERT_TRUE(open_mpi.has_value());
  EXPECT_NE(open_mpi->find("(OMPI_COMM_WORLD_SIZE=2)"), std::string::npos) << *open_mpi;
  const auto pmi = launch_mismatch({{"PMI_SIZE", "8"}}, 1);
  ASSERT_TRUE(pmi.has_value());
  EXPECT_NE(pmi->find("(PMI_SIZE=8)"), std::string::npos) << *pmi;
}

TEST(LaunchMismatch, ConsistentLaunchesPass) {
  // mpirun -np 4, srun --mpi=pmix -n 4, and a hand-started single process.
  EXPECT_EQ(launch_mismatch({{"OMPI_COMM_WORLD_SIZE", "4"}}, 4), std::nullopt);
  EXPECT_EQ(launch_mismatch({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}}, 4),
            std::nullopt);
  EXPECT_EQ(launch_mismatch({}, 1), std::nullopt);
  // srun -n 1, and mpirun -np 1.
  EXPECT_EQ(launch_mismatch({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}}, 1),
            std::nullopt);
  EXPECT_EQ(launch_mismatch({{"OMPI_COMM_WORLD_SIZE", "1"}}, 1), std::nullopt);
}

TEST(LaunchMismatch, PlainMpirunInsideAnAllocationPasses) {
  // `salloc -n 4 mpirun ...`: the allocation's SLURM_NTASKS, plus the variables of the srun step
  // Open MPI starts its daemon with, plus its own size.
  const EnvironmentMap inside{{"SLURM_NTASKS", "4"},
                              {"SLURM_STEP_ID", "0"},
                              {"SLURM_STEP_NUM_TASKS", "1"},
                              {"OMPI_COMM_WORLD_SIZE", "4"}};
  EXPECT_EQ(launch_mismatch(inside, 4), std::nullopt);
  // `mpirun -np 1` there, and a single process started in the batch script itself.
  EXPECT_EQ(launch_mismatch({{"SLURM_NTASKS", "4"}, {"OMPI_COMM_WORLD_SIZE", "1"}}, 1),
            std::nullopt);
  EXPECT_EQ(launch_mismatch({{"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "9"}}, 1), std::nullopt);
}

TEST(LaunchMismatch, OnlyAWorldOfOneIsQuestioned) {
  // MPI sees several ranks: it knows better than any variable (e.g. a nested launcher's).
  EXPECT_EQ(launch_mismatch({{"OMPI_COMM_WORLD_SIZE", "4"}}, 2), std::nullopt);
  EXPECT_EQ(launch_mismatch({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}}, 8),
            std::nullopt);
}

TEST(LauncherRank, EachLaunchersRankVariable) {
  EXPECT_EQ(launcher_rank({}), 0);  // started by hand
  EXPECT_EQ(launcher_rank({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}}), 3);
  EXPECT_EQ(launcher_rank({{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}}), 5);
  EXPECT_EQ(launcher_rank({{"PMIX_RANK", "2"}}), 2);
  // mpirun sets PMIX_RANK beside its own variable; they agree, and Open MPI's is read first.
  EXPECT_EQ(launcher_rank({{"OMPI_COMM_WORLD_RANK", "1"}, {"PMIX_RANK", "1"}}), 1);
  EXPECT_EQ(launcher_rank({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "7"}}), 7);
}

TEST(LauncherRank, SlurmProcidCountsOnlyInsideAStep) {
  // The batch script of `sbatch`: SLURM_PROCID describes the script's task, not a launch.
  EXPECT_EQ(launcher_rank({{"SLURM_PROCID", "4"}, {"SLURM_JOB_ID", "12"}}), 0);
}

TEST(LauncherRank, MalformedValuesAreSkipped) {
  EXPECT_EQ(launcher_rank({{"OMPI_COMM_WORLD_RANK", "-1"}, {"PMI_RANK", "2"}}), 2);
  EXPECT_EQ(launcher_rank({{"OMPI_COMM_WORLD_RANK", "1x"}}), 0);
  EXPECT_EQ(launcher_rank({{"PMI_RANK", ""}}), 0);
}

TEST(LaunchedAlone, ByHandOrOneTaskIsAlone) {
  EXPECT_TRUE(launched_alone({}));
  EXPECT_TRUE(launched_alone({{"OMPI_COMM_WORLD_SIZE", "1"}}));
  EXPECT_TRUE(launched_alone({{"SLURM_NTASKS", "8"}}));  // an allocation's shell
  EXPECT_FALSE(launched_alone({{"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_FALSE(launched_alone({{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}}));
}

TEST(LauncherEnvironment, ReadsTheProcessEnvironment) {
  const char* previous = std::getenv("PMI_SIZE");
  const std::string saved = previous ? previous : "";
  ASSERT_EQ(setenv("PMI_SIZE", "5", 1), 0);
  const EnvironmentMap environment = launcher_environment();
  if (previous) {
    setenv("PMI_SIZE", saved.c_str(), 1);
  } else {
    unsetenv("PMI_SIZE");
  }
  ASSERT_TRUE(environment.contains("PMI_SIZE"));
  EXPECT_EQ(environment.at("PMI_SIZE"), "5");
  EXPECT_FALSE(environment.contains("HOME"));
}

}  // namespace
}  // namespace mpitron::comm
