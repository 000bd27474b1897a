// The algorithm table on several ranks: a table that forces each algorithm of each collective
// makes that algorithm run, with exact closed-form results (rank-valued integers, exact in any
// order) on the world and the groups of a topology; and the start-up agreement installs rank 0's
// file on every rank, ends every rank with the same error for a bad file, and ignores a table of
// another world size with a note.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include "comm/algorithm_choice.h"
#include "comm/algorithm_table.h"
#include "comm/butterfly.h"
#include "comm/chunking.h"
#include "comm/collectives.h"
#include "comm/errors.h"
#include "comm/p2p_gather_scatter.h"
#include "comm/ring_all_reduce.h"
#include "comm/topology.h"
#include "comm_test_support.h"
#include "kernels/ops.h"
#include "mpi_test_main.h"

namespace mpitron::test {
namespace {

using comm::Algorithm;
using comm::Collective;
using comm::Communicator;
using comm::ReduceOp;

// Makes `algorithm` run `op` on groups of `ranks` at every size.
void force(Collective op, int ranks, Algorithm algorithm) {
  auto table = std::make_shared<comm::AlgorithmTable>();
  table->world_size = world().size();
  table->choices.push_back({op, ranks, 0, std::numeric_limits<std::size_t>::max(), algorithm});
  world().set_algorithm_table(std::move(table));
}

// The communicators of more than one rank of a topology that fits the world: the world and its
// tp (2 ranks) and dp groups (the rest).
std::vector<Communicator> groups() {
  const int n = world().size();
  if (n < 2) return {};
  if (n % 2 != 0) return {world()};
  const comm::ParallelTopology topology(world(), 2, 1, n / 2);
  std::vector<Communicator> found{topology.world(), topology.tp_comm()};
  if (topology.dp_comm().size() > 1 && topology.dp_comm().size() != n)
    found.push_back(topology.dp_comm());
  return found;
}

// Sizes per rank that cross the built-in thresholds: 10 elements, and 70001 (273 KiB of float32,
// above kRecursiveDoublingMaxBytes; odd, so chunks are uneven).
constexpr std::size_t kCounts[] = {10, 70001};

const BufferKind kF32{kernels::DType::f32, kernels::Device::cpu};
const BufferKind kI64{kernels::DType::i64, kernels::Device::cpu};

// Calls body(comm, algorithm, kind, count) for every group, every algorithm of `collective`
// forced by a table, both message limits (the default and 4093 elements), every kind of `kinds`
// and kCounts, under a trace naming them.
template <class Body>
void for_each_forced_case(Collective collective, std::initializer_list<BufferKind> kinds,
                          Body body) {
  for (const Communicator& comm : groups()) {
    for (const Algorithm algorithm : comm::algorithms_for(collective)) {
      force(collective, comm.size(), algorithm);
      for (const std::size_t limit : {comm::kMaxMessageElements, std::size_t{4093}}) {
        world().set_max_message_elements(limit);
        for (const BufferKind& kind : kinds) {
          for (const std::size_t count : kCounts) {
            SCOPED_TRACE(comm.name() + " communicator, " + std::string(comm::to_string(algorithm)) +
                         ", " + std::to_string(count) + " elements, limit " +
                         std::to_string(limit));
            body(comm, algorithm, kind, count);
          }
        }
      }
    }
  }
}

TEST(AlgorithmChoice, ATableForcingEachAllReduceAlgorithmIsExact) {
  SettingsGuard guard(world());
  for_each_forced_case(
      Collective::all_reduce, {kF32, kI64},
      [](const Communicator& comm, Algorithm algorithm, const BufferKind& kind, std::size_t count) {
        const double n = comm.size(), r = comm.rank();
        std::vector<double> mine(count), expected(count);
        for (std::size_t i = 0; i < count; ++i) {
          const double di = static_cast<double>(i % 1000);
          mine[i] = (r + 1) * 100 + di;
          expected[i] = 50 * n * (n + 1) + n * di;
        }
        kernels::Buffer buffer = make_buffer(mine, kind);
        const bool runs = comm::applicable(Collective::all_reduce, algorithm, comm.size(), count,
                                           kernels::is_floating(kind.dtype));
        const Algorithm taken = comm::all_reduce_algorithm(comm, buffer);
        if (runs) {
          EXPECT_EQ(taken, algorithm);
        } else {
          EXPECT_NE(taken, algorithm);  // the built-in rule instead
        }
        comm::all_reduce(comm, buffer, ReduceOp::sum);
        EXPECT_EQ(host_values(buffer), expected);
        // Every rank ends with rank 0's bits.
        kernels::Buffer root = make_buffer(host_values(buffer), kind);
        comm::broadcast(comm, root, 0);
        EXPECT_EQ(std::memcmp(root.data(), buffer.data(), buffer.bytes()), 0);
      });
}

// The same for bfloat16 buffers, which every all-reduce algorithm takes (ring and Rabenseifner
// combine them in float32, bf16_reduction.h): rank r holds 4 (r + 1) + i % 8, so every partial
// sum over up to 8 ranks is an integer of at most 200, a bfloat16 value, and any order of
// combination gives the closed form exactly.
TEST(AlgorithmChoice, ATableForcingEachAllReduceAlgorithmIsExactInBfloat16) {
  SettingsGuard guard(world());
  for_each_forced_case(
      Collective::all_reduce, {kF32},  // the kind only counts the cases: the buffers are bfloat16
      [](const Communicator& comm, Algorithm algorithm, const BufferKind&, std::size_t count) {
        const double n = comm.size(), r = comm.rank();
        std::vector<double> mine(count), expected(count);
        for (std::size_t i = 0; i < count; ++i) {
          const double k = static_cast<double>(i % 8);
          mine[i] = 4 * (r + 1) + k;
          expected[i] = 2 * n * (n + 1) + n * k;
        }
        kernels::Buffer buffer(count, kernels::DType::bf16, kernels::Device::cpu);
        kernels::convert(make_buffer(mine, kF32), buffer);
        EXPECT_EQ(comm::all_reduce_algorithm(comm, buffer) == algorithm,
                  comm::applicable(Collective::all_reduce, algorithm, comm.size(), count, true));
        comm::all_reduce(comm, buffer, ReduceOp::sum);
        kernels::Buffer widened(count, kernels::DType::f32, kernels::Device::cpu);
        kernels::convert(buffer, widened);
        EXPECT_EQ(host_values(widened), expected);
      });
}

// Without a table a bfloat16 all-reduce takes the algorithm a float32 one of as many bytes takes:
// from kRingAllReduceMinBytes a large-buffer one (Rabenseifner below kRabenseifnerMaxBytes on a
// power-of-two group, else the ring).
TEST(AlgorithmChoice, ABfloat16AllReduceTakesTheAlgorithmOfItsBytes) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  SettingsGuard guard(world());
  world().set_algorithm_table(nullptr);
  for (const std::size_t bytes :
       {std::size_t{1024}, comm::kRingAllReduceMinBytes, 2 * comm::kRabenseifnerMaxBytes}) {
    const kernels::Buffer narrow(bytes / 2, kernels::DType::bf16, kernels::Device::cpu);
    const kernels::Buffer wide(bytes / 4, kernels::DType::f32, kernels::Device::cpu);
    const Algorithm taken = comm::all_reduce_algorithm(world(), narrow);
    EXPECT_EQ(taken, comm::all_reduce_algorithm(world(), wide)) << bytes << " bytes";
    if (bytes >= comm::kRingAllReduceMinBytes) {
      EXPECT_TRUE(taken == Algorithm::rabenseifner || taken == Algorithm::ring)
          << bytes << " bytes: " << comm::to_string(taken);
    }
  }
}

TEST(AlgorithmChoice, ATableForcingEachAllGatherAlgorithmIsExact) {
  SettingsGuard guard(world());
  for_each_forced_case(
      Collective::all_gather, {kF32},
      [](const Communicator& comm, Algorithm algorithm, const BufferKind&, std::size_t count) {
        const auto n = static_cast<std::size_t>(comm.size());
        // rank s holds s * 1000 + i % 997
        std::vector<double> mine(count), expected;
        for (std::size_t i = 0; i < count; ++i)
          mine[i] = comm.rank() * 1000.0 + static_cast<double>(i % 997);
        for (std::size_t s = 0; s < n; ++s) {
          for (std::size_t i = 0; i < count; ++i)
            expected.push_back(static_cast<double>(s) * 1000.0 + static_cast<double>(i % 997));
        }
        const kernels::Buffer in = make_buffer(mine, kF32);
        kernels::Buffer out(n * count, kF32.dtype, kF32.device);
        if (comm::applicable(Collective::all_gather, algorithm, comm.size(), n, true)) {
          EXPECT_EQ(comm::all_gather_algorithm(comm, in), algorithm);
        }
        comm::all_gather(comm, in, out, 1);
        EXPECT_EQ(host_values(out), expected);
      });
}

TEST(AlgorithmChoice, ATableForcingEachReduceScatterAlgorithmIsExact) {
  SettingsGuard guard(world());
  for_each_forced_case(
      Collective::reduce_scatter, {kF32, kI64},
      [](const Communicator& comm, Algorithm algorithm, const BufferKind& kind, std::size_t count) {
        const auto n = static_cast<std::size_t>(comm.size());
        const auto r = static_cast<std::size_t>(comm.rank());
        // in[i] = (rank + 1) * 100 + i % 991 over [n * count]; out[i] sums element
        // r * count + i of every rank.
        std::vector<double> mine(n * count), expected(count);
        for (std::size_t i = 0; i < n * count; ++i)
          mine[i] = (static_cast<double>(r) + 1) * 100 + static_cast<double>(i % 991);
        for (std::size_t i = 0; i < count; ++i) {
          const double di = static_cast<double>((r * count + i) % 991);
          expected[i] = 50.0 * static_cast<double>(n * (n + 1)) + static_cast<double>(n) * di;
        }
        const kernels::Buffer in = make_buffer(mine, kind);
        kernels::Buffer out(count, kind.dtype, kind.device);
        if (comm::applicable(Collective::reduce_scatter, algorithm, comm.size(), n, true)) {
          EXPECT_EQ(comm::reduce_scatter_algorithm(comm, in), algorithm);
        }
        comm::reduce_scatter(comm, in, out, 1, ReduceOp::sum);
        EXPECT_EQ(host_values(out), expected);
      });
}

// A choice for another group size, or that cannot run the call, leaves it to the built-in rule.
TEST(AlgorithmChoice, RowsThatDoNotApplyLeaveTheBuiltInRule) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  SettingsGuard guard(world());
  kernels::Buffer small = make_buffer(std::vector<double>(10, 1.0), kF32);
  force(Collective::all_reduce, world().size() == 2 ? 2 : world().size() - 1, Algorithm::ring);
  if (world().size() > 2) {
    EXPECT_EQ(comm::all_reduce_algorithm(world(), small), Algorithm::recursive_doubling);
  }
  force(Collective::all_reduce, world().size(), Algorithm::ring);
  kernels::Buffer integers = make_buffer(std::vector<double>(10, 1.0), kI64);
  EXPECT_EQ(comm::all_reduce_algorithm(world(), integers), Algorithm::recursive_doubling);
}

// Without a table, all-gathers of less than kMpiAllGatherBelowBytes in all go to MPI's collective
// on more than 2 ranks and stay mpitron's on 2; from the threshold mpitron's algorithms run.
TEST(AlgorithmChoice, SmallAllGathersBeyondTwoRanksAreMpis) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const auto p = static_cast<std::size_t>(world().size());
  const std::size_t below = comm::kMpiAllGatherBelowBytes / p - 4;  // a float short, in all
  const std::size_t from = (comm::kMpiAllGatherBelowBytes + p - 1) / p;
  const Algorithm small = comm::all_gather_algorithm(world(), kernels::Device::cpu, below);
  EXPECT_EQ(small == Algorithm::mpi, p > 2) << comm::to_string(small);
  EXPECT_NE(comm::all_gather_algorithm(world(), kernels::Device::cpu, from), Algorithm::mpi);
}

// The file of `text`, written by rank 0 (the only rank that reads it).
std::string table_file(const std::string& name, const std::string& text) {
  const std::string path =
      ::testing::TempDir() + "mpitron_" + name + "_np" + std::to_string(world().size()) + ".json";
  if (world().rank() == 0) std::ofstream(path, std::ios::trunc) << text;
  return path;
}

// What agree_on_algorithm_table throws, or "note: <its note>".
std::string agreement(const std::string& path) {
  try {
    return "note: " + comm::agree_on_algorithm_table(world(), path);
  } catch (const comm::ConfigError& error) {
    return error.what();
  }
}

TEST(AlgorithmTableAgreement, RankZerosTableIsInstalledOnEveryRank) {
  SettingsGuard guard(world());
  comm::AlgorithmTable table;
  table.world_size = world().size();
  if (world().size() > 1)
    table.choices.push_back({Collective::all_gather, world().size(), 0, 4096, Algorithm::ring});
  const std::string path = table_file("agreed", table.to_json());
  // Only rank 0's path counts: the others name a file that does not exist.
  EXPECT_EQ(agreement(world().rank() == 0 ? path : "/nonexistent/table.json"), "note: ");
  ASSERT_NE(world().algorithm_table(), nullptr);
  EXPECT_EQ(world().algorithm_table()->choices, table.choices);
  EXPECT_EQ(world().algorithm_table()->source, path);
  // No path on rank 0: nothing is installed or changed, and nothing is said.
  world().set_algorithm_table(nullptr);
  EXPECT_EQ(agreement(world().rank() == 0 ? "" : path), "note: ");
  EXPECT_EQ(world().algorithm_table(), nullptr);
}

TEST(AlgorithmTableAgreement, ATableOfAnotherWorldSizeIsIgnoredWithANote) {
  SettingsGuard guard(world());
  world().set_algorithm_table(nullptr);
  comm::AlgorithmTable table;
  table.world_size = world().size() + 1;
  const std::string path = table_file("other_world", table.to_json());
  EXPECT_EQ(agreement(path), "note: comm table " + path + " was measured on a world of " +
                                 std::to_string(world().size() + 1) + " ranks, this one has " +
                                 std::to_string(world().size()) +
                                 ": the built-in rule chooses every algorithm");
  EXPECT_EQ(world().algorithm_table(), nullptr);
}

TEST(AlgorithmTableAgreement, ABadFileIsTheSameErrorOnEveryRank) {
  SettingsGuard guard(world());
  const std::string path = table_file("bad", "{\"mpitron_comm_table\": 1, ");
  EXPECT_EQ(agreement(path), "--comm-table " + path + ": not a JSON document");
  EXPECT_EQ(agreement(path + ".missing"),
            "--comm-table " + path + ".missing: cannot read the file");
  const std::string folder = std::filesystem::path(path).parent_path().string();
  EXPECT_EQ(agreement(folder), "--comm-table " + folder + ": cannot read the file");
  try {
    comm::agree_on_algorithm_table(world(), path, /*from_variable=*/true);
    ADD_FAILURE() << "accepted";
  } catch (const comm::ConfigError& error) {
    EXPECT_EQ(std::string(error.what()), "MPITRON_COMM_TABLE " + path + ": not a JSON document");
  }
}

}  // namespace
}  // namespace mpitron::test
