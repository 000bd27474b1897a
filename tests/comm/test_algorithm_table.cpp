// The algorithm table as pure functions: its file format both ways, its lookup, which algorithm
// can run what, and how bench comm --tune turns timings into rows.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "comm/algorithm_table.h"
#include "comm/errors.h"
#include "kernels/device.h"

namespace mpitron::test {
namespace {

using comm::Algorithm;
using comm::AlgorithmChoice;
using comm::AlgorithmTable;
using comm::AlgorithmTiming;
using comm::Collective;

constexpr std::size_t kNoEnd = std::numeric_limits<std::size_t>::max();

AlgorithmTable sample() {
  AlgorithmTable table;
  table.world_size = 4;
  table.measured_on = "host, AMD EPYC, Open MPI v4.1.4, 2026-12-03";
  table.choices = {{Collective::all_reduce, 2, 0, 8192, Algorithm::mpi},
                   {Collective::all_reduce, 2, 8192, kNoEnd, Algorithm::ring},
                   {Collective::all_gather, 4, 0, kNoEnd, Algorithm::recursive_doubling},
                   {Collective::reduce_scatter, 4, 1024, 4096, Algorithm::recursive_halving}};
  return table;
}

TEST(AlgorithmTable, JsonRoundTrip) {
  const AlgorithmTable table = sample();
  const std::string text = table.to_json();
  EXPECT_NE(text.find("\"mpitron_comm_table\": 1"), std::string::npos) << text;
  EXPECT_NE(text.find(R"({"op":"all-reduce","ranks":2,"from_bytes":8192,"algorithm":"ring"})"),
            std::string::npos)
      << text;
  const AlgorithmTable back = AlgorithmTable::parse(text);
  EXPECT_EQ(back.world_size, 4);
  EXPECT_EQ(back.measured_on, table.measured_on);
  EXPECT_EQ(back.choices, table.choices);
}

TEST(AlgorithmTable, LookupTakesTheFirstRowThatCoversTheCall) {
  const AlgorithmTable table = sample();
  EXPECT_EQ(table.lookup(Collective::all_reduce, 2, 0), Algorithm::mpi);
  EXPECT_EQ(table.lookup(Collective::all_reduce, 2, 8191), Algorithm::mpi);
  EXPECT_EQ(table.lookup(Collective::all_reduce, 2, 8192), Algorithm::ring);
  EXPECT_EQ(table.lookup(Collective::all_reduce, 2, std::size_t{1} << 40), Algorithm::ring);
  EXPECT_EQ(table.lookup(Collective::all_reduce, 4, 100), std::nullopt);  // no row for 4 ranks
  EXPECT_EQ(table.lookup(Collective::reduce_scatter, 4, 1023), std::nullopt);
  EXPECT_EQ(table.lookup(Collective::reduce_scatter, 4, 1024), Algorithm::recursive_halving);
  EXPECT_EQ(table.lookup(Collective::reduce_scatter, 4, 4096), std::nullopt);
}

TEST(AlgorithmTable, WhatEachAlgorithmCanRun) {
  EXPECT_TRUE(comm::applicable(Collective::all_reduce, Algorithm::recursive_doubling, 3, 1, false));
  EXPECT_TRUE(comm::applicable(Collective::all_reduce, Algorithm::ring, 3, 3, true));
  EXPECT_FALSE(comm::applicable(Collective::all_reduce, Algorithm::ring, 3, 2, true));
  EXPECT_FALSE(comm::applicable(Collective::all_reduce, Algorithm::ring, 3, 3, false));
  EXPECT_TRUE(comm::applicable(Collective::all_reduce, Algorithm::rabenseifner, 4, 4, true));
  EXPECT_FALSE(comm::applicable(Collective::all_reduce, Algorithm::rabenseifner, 6, 6, true));
  EXPECT_FALSE(comm::applicable(Collective::all_reduce, Algorithm::recursive_halving, 4, 4, true));
  EXPECT_TRUE(comm::applicable(Collective::all_gather, Algorithm::recursive_doubling, 8, 8, false));
  EXPECT_FALSE(comm::applicable(Collective::all_gather, Algorithm::recursive_doubling, 6, 6, true));
  EXPECT_TRUE(comm::applicable(Collective::all_gather, Algorithm::ring, 6, 6, false));
  EXPECT_FALSE(comm::applicable(Collective::all_gather, Algorithm::rabenseifner, 4, 4, true));
  EXPECT_TRUE(comm::applicable(Collective::reduce_scatter, Algorithm::ring, 3, 3, false));
  EXPECT_FALSE(
      comm::applicable(Collective::reduce_scatter, Algorithm::recursive_halving, 3, 3, true));
  for (Collective op : comm::kCollectives) {
    EXPECT_EQ(comm::algorithms_for(op).front(), Algorithm::mpi);
    EXPECT_TRUE(comm::applicable(op, Algorithm::mpi, 3, 1, false));
  }
}

// The large all-reduce algorithms combine float32, float64 and bfloat16 (in float32); integer
// buffers keep MPI's reduction.
TEST(AlgorithmTable, FloatingPointDtypesIncludeBfloat16) {
  using kernels::DType;
  for (const DType dtype : {DType::f32, DType::f64, DType::bf16})
    EXPECT_TRUE(comm::reduces_in_floating_point(dtype)) << kernels::to_string(dtype);
  for (const DType dtype : {DType::i32, DType::i64})
    EXPECT_FALSE(comm::reduces_in_floating_point(dtype)) << kernels::to_string(dtype);
}

// Every way a file can be wrong is one ConfigError naming the problem.
TEST(AlgorithmTable, BadFilesAreNamed) {
  const auto error = [](const std::string& text) -> std::string {
    try {
      AlgorithmTable::parse(text);
      return "accepted";
    } catch (const comm::ConfigError& e) {
      return e.what();
    }
  };
  const auto with_choice = [](const std::string& choice) {
    return R"({"mpitron_comm_table": 1, "world_size": 4, "choices": [)" + choice + "]}";
  };
  EXPECT_EQ(error("{\"mpitron_comm_table\": 1, "), "not a JSON document");
  EXPECT_EQ(error("[1, 2]"), "not a JSON object");
  EXPECT_EQ(error(R"({"world_size": 4, "choices": []})"),
            "not an mpitron comm table (\"mpitron_comm_table\": 1 is missing)");
  EXPECT_EQ(error(R"({"mpitron_comm_table": 1, "world_size": 0, "choices": []})"),
            "\"world_size\" must be a positive integer");
  EXPECT_EQ(error(R"({"mpitron_comm_table": 1, "world_size": 2})"), "\"choices\" must be an array");
  EXPECT_EQ(error(with_choice(R"({"op": "broadcast", "ranks": 2, "algorithm": "mpi"})")),
            "choice 0: unknown op \"broadcast\" (all-reduce, all-gather or reduce-scatter)");
  EXPECT_EQ(
      error(with_choice(R"({"op": "all-gather", "ranks": 2, "algorithm": "rabenseifner"})")),
      "choice 0: all-gather has no algorithm \"rabenseifner\" (mpi, recursive-doubling, ring)");
  EXPECT_EQ(error(with_choice(R"({"op": "all-reduce", "ranks": 8, "algorithm": "ring"})")),
            "choice 0: \"ranks\" must be in [2, world_size 4], got 8");
  EXPECT_EQ(error(with_choice(
                R"({"op": "reduce-scatter", "ranks": 3, "algorithm": "recursive-halving"})")),
            "choice 0: recursive-halving needs a power-of-two group, not 3 ranks");
  EXPECT_EQ(
      error(with_choice(
          R"({"op": "all-reduce", "ranks": 2, "from_bytes": 10, "below_bytes": 10, "algorithm": "mpi"})")),
      "choice 0: \"from_bytes\" 10 is not below \"below_bytes\" 10");
  EXPECT_EQ(error(with_choice(R"({"op": "all-reduce", "ranks": -2, "algorithm": "mpi"})")),
            "choice 0: \"ranks\" must be a non-negative integer, got -2");
  EXPECT_EQ(error(with_choice(R"({"ranks": 2, "algorithm": "mpi"})")),
            "choice 0 needs \"op\" as a string");
  EXPECT_EQ(error(with_choice(
                R"({"op": "all-reduce", "ranks": 2, "below_byte": 8, "algorithm": "mpi"})")),
            "choice 0: unknown key \"below_byte\"");
  EXPECT_EQ(error(R"({"mpitron_comm_table": 1, "world_size": 2, "choices": [], "world": 2})"),
            "unknown key \"world\"");
  EXPECT_EQ(error(with_choice(
                R"({"op": "all-reduce", "ranks": 2, "below_bytes": 32768, "algorithm": "mpi"},)"
                R"({"op": "all-reduce", "ranks": 4, "from_bytes": 1000, "algorithm": "ring"},)"
                R"({"op": "all-reduce", "ranks": 2, "from_bytes": 1000, "algorithm": "ring"})")),
            "choice 2: its sizes overlap those of choice 0 (all-reduce on 2 ranks)");
}

TEST(AlgorithmTable, FastestPrefersMpiWithinTheMargin) {
  AlgorithmTiming t{Collective::all_reduce,
                    2,
                    4096,
                    {Algorithm::mpi, Algorithm::recursive_doubling, Algorithm::ring},
                    {1.0, 0.5, 0.6}};
  EXPECT_EQ(comm::fastest(t), Algorithm::recursive_doubling);
  t.seconds = {1.0, 0.92, 1.5};  // faster, but within the margin
  EXPECT_EQ(comm::fastest(t), Algorithm::mpi);
  t.seconds = {1.0, 1.2, 0.89};
  EXPECT_EQ(comm::fastest(t), Algorithm::ring);
  t.algorithms = {Algorithm::ring};
  t.seconds = {2.0};
  EXPECT_EQ(comm::fastest(t), Algorithm::ring);  // MPI's was not timed
}

TEST(AlgorithmTable, TimingsBecomeRangesBetweenTheMeasuredSizes) {
  const auto timing = [](Collective op, int ranks, std::size_t bytes, double mpi, double ring) {
    return AlgorithmTiming{op, ranks, bytes, {Algorithm::mpi, Algorithm::ring}, {mpi, ring}};
  };
  const std::vector<AlgorithmTiming> timings{
      timing(Collective::all_gather, 2, 4096, 1.0, 2.0),   // mpi
      timing(Collective::all_gather, 2, 16384, 1.0, 1.5),  // mpi: merged with the row before
      timing(Collective::all_gather, 2, 65536, 1.0, 0.5),  // ring
      timing(Collective::all_gather, 4, 4096, 1.0, 0.5),   // another group size: from 0 again
      timing(Collective::reduce_scatter, 4, 4096, 1.0, 2.0)};
  const std::vector<AlgorithmChoice> expected{
      {Collective::all_gather, 2, 0, 32768, Algorithm::mpi},
      {Collective::all_gather, 2, 32768, 131072, Algorithm::ring},  // to twice the last size
      {Collective::all_gather, 4, 0, 8192, Algorithm::ring},
      {Collective::reduce_scatter, 4, 0, 8192, Algorithm::mpi}};
  EXPECT_EQ(comm::choices_from(timings), expected);
}

}  // namespace
}  // namespace mpitron::test
