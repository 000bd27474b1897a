// GoogleTest main for multi-rank tests: see mpi_test_main.h.
#include "mpi_test_main.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/agreement.h"
#include "comm/environment.h"
#include "comm/guard.h"

namespace mpitron::test {

namespace {

comm::Communicator g_world;

// Prints each failed assertion with the rank, on every rank, as it happens.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}

  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] FAILED %s at %s:%d\n%s\n", rank_, test_.c_str(),
                 result.file_name() != nullptr ? result.file_name() : "?", result.line_number(),
                 result.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
  std::string test_ = "(outside a test)";
};

double timeout_from_environment() {
  const char* text = std::getenv("MPITRON_TEST_TIMEOUT_SECONDS");
  return text != nullptr ? std::stod(text) : 30.0;
}

// Every rank learns which ranks failed; rank 0 prints the verdict. Returns the exit code.
int agree_on_outcome(const comm::Communicator& world, bool failed) {
  const std::vector<int> failed_ranks = comm::ranks_where(world, failed);
  if (world.rank() == 0) {
    if (failed_ranks.empty()) {
      std::fprintf(stderr, "mpi tests passed on all %d ranks\n", world.size());
    } else {
      std::fprintf(stderr, "mpi tests FAILED on %s (of %d)\n",
                   comm::ranks_phrase(failed_ranks).c_str(), world.size());
    }
  }
  return failed_ranks.empty() ? 0 : 1;
}

}  // namespace

comm::Communicator& world() {
  return g_world;
}

}  // namespace mpitron::test

int main(int argc, char** argv) {
  using namespace mpitron;
  comm::Environment environment(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  test::g_world = environment.world();
  comm::Communicator& world = test::g_world;
  world.set_timeout(test::timeout_from_environment());

  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (world.rank() != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new test::RankFailurePrinter(world.rank()));

  const int code = comm::run_guarded(world, [&] {
    const bool failed = RUN_ALL_TESTS() != 0;
    return test::agree_on_outcome(world, failed);
  });
  test::g_world = comm::Communicator();
  return code;
}
