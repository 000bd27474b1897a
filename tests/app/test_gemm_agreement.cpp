// `--gemm auto` across ranks (app/common/gemm_agreement.h): every rank is given other rates
// through MPITRON_GEMM_RATES (no clock involved), and every rank must install world rank 0's
// choice; a malformed variable on rank 0 ends every rank with a ConfigError.
#include "app/common/gemm_agreement.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "comm/errors.h"
#include "kernels/ops.h"
#include "mpi_test_main.h"

namespace mpitron::test {
namespace {

using kernels::GemmProvider;

// Rank 0 finds Eigen fastest; every other rank finds mpitron's GEMM fastest.
void give_rank_rates(int rank) {
  ::setenv("MPITRON_GEMM_RATES", rank == 0 ? "eigen=100,mpitron=50" : "eigen=50,mpitron=100", 1);
}

TEST(GemmAgreement, EveryRankInstallsRankZerosChoice) {
  const comm::Communicator& world = test::world();
  give_rank_rates(world.rank());
  kernels::set_cpu_threads(3);  // a count no other test installs a choice for
  const kernels::GemmChoice choice = app::agree_auto_gemm_provider(world, true);
  EXPECT_EQ(choice.provider, GemmProvider::eigen);
  EXPECT_EQ(choice.threads, 3);
  EXPECT_EQ(choice.source, kernels::GemmChoiceSource::given);
  EXPECT_EQ(kernels::default_gemm_provider(), GemmProvider::eigen);
  EXPECT_EQ(kernels::parse_gemm_provider("auto"), GemmProvider::eigen);
  EXPECT_EQ(app::agreed_auto_gemm_choice().provider, GemmProvider::eigen);
  EXPECT_EQ(choice.rates.size(), world.rank() == 0 ? 2U : 0U);  // only rank 0 has the rates
  if (world.rank() == 0) {
    EXPECT_EQ(app::gemm_choice_text(choice),
              "eigen (given at 3 threads: eigen 100.0, mpitron 50.0 GFLOP/s)");
  }
  kernels::set_cpu_threads(1);
  ::unsetenv("MPITRON_GEMM_RATES");
}

TEST(GemmAgreement, RankZerosResolveDecidesForEveryRank) {
  const comm::Communicator& world = test::world();
  give_rank_rates(world.rank());
  kernels::set_cpu_threads(5);
  // Only rank 0 asks for auto; the others follow it all the same.
  const kernels::GemmChoice asked = app::agree_auto_gemm_provider(world, world.rank() == 0);
  EXPECT_EQ(asked.provider, GemmProvider::eigen);
  EXPECT_EQ(kernels::default_gemm_provider(), GemmProvider::eigen);
  // Rank 0 asks for none (a pinned --gemm): nothing is measured or installed for 6 threads.
  kernels::set_cpu_threads(6);
  const kernels::GemmChoice none = app::agree_auto_gemm_provider(world, world.rank() != 0);
  EXPECT_EQ(none.source, kernels::GemmChoiceSource::fixed);
  EXPECT_EQ(kernels::default_gemm_provider(), kernels::fixed_gemm_provider());
  EXPECT_EQ(app::gemm_choice_text(none),
            kernels::to_string(kernels::fixed_gemm_provider()) + " (fixed rule at 6 threads)");
  kernels::set_cpu_threads(1);
  ::unsetenv("MPITRON_GEMM_RATES");
}

TEST(GemmAgreement, AMalformedVariableOnRankZeroFailsEveryRank) {
  const comm::Communicator& world = test::world();
  ::setenv("MPITRON_GEMM_RATES", world.rank() == 0 ? "eigen=fast" : "eigen=1", 1);
  try {
    app::agree_auto_gemm_provider(world, true);
    ADD_FAILURE() << "no ConfigError";
  } catch (const comm::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(world.rank() == 0 ? "MPITRON_GEMM_RATES" : "rank 0 could not choose"),
              std::string::npos)
        << what;
  }
  ::unsetenv("MPITRON_GEMM_RATES");
}

}  // namespace
}  // namespace mpitron::test
