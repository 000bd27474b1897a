// Reductions in bfloat16 (comm/bf16_reduction.h): exact where every partial sum is a bfloat16
// value, one rounding per combination where it is not, and float32 gradients reduced on a
// bfloat16 wire by PendingReduction (Wire::bf16) against the rounding done by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "comm/bf16_reduction.h"
#include "comm/chunking.h"
#include "comm/collectives.h"
#include "comm/pending_reduction.h"
#include "comm/topology.h"
#include "comm_test_support.h"
#include "kernels/ops.h"
#include "mpi_test_main.h"

namespace mpitron::test {
namespace {

using comm::Communicator;
using comm::ReduceOp;
using kernels::Buffer;
using kernels::DType;

// A bfloat16 buffer on `kind`'s device holding `values` (rounded to bfloat16).
Buffer bf16_buffer(const std::vector<double>& values, const BufferKind& kind) {
  const Buffer wide = make_buffer(values, {DType::f32, kind.device, kind.staged_host});
  Buffer narrow(values.size(), DType::bf16, kind.device);
  kernels::convert(wide, narrow);
  return narrow;
}

// A bfloat16 buffer's values (exact in float32).
std::vector<double> bf16_values(const Buffer& narrow) {
  Buffer wide(narrow.numel(), DType::f32, narrow.device());
  kernels::convert(narrow, wide);
  return host_values(wide);
}

// x rounded to bfloat16 (kernels/bf16.h's rule; the conversion is checked bit for bit by
// tests/kernels and validate).
double rounded(double x) {
  return kernels::bf16_to_float(kernels::to_bf16(static_cast<float>(x)));
}

class Bf16ReductionTest : public BufferKindTest {};

// Rank r holds 4 (r + 1) + i % 8: every partial sum over up to 8 ranks stays at most 200, an
// integer below 256 and so a bfloat16 value, and avg's results are integers too: every
// algorithm (recursive doubling, MPI's with the user-defined op, staged or not) must give the
// closed forms exactly, on the world and the groups, with messages cut small.
TEST_P(Bf16ReductionTest, AllReduceAndReduceScatterAreExactOnBfloat16Integers) {
  SettingsGuard guard(world());
  const int n_world = world().size();
  const comm::ParallelTopology topology(world(), n_world >= 2 ? 2 : 1, 1,
                                        n_world >= 2 ? n_world / 2 : 1);
  for (const std::size_t limit : {comm::kMaxMessageElements, std::size_t{3}}) {
    world().set_max_message_elements(limit);
    for (const Communicator* comm : {&topology.world(), &topology.tp_comm(), &topology.dp_comm()}) {
      SCOPED_TRACE(comm->name() + " communicator, message limit " + std::to_string(limit));
      const double n = comm->size(), r = comm->rank();
      const std::size_t count = 8 * static_cast<std::size_t>(comm->size());
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
        std::vector<double> mine(count), expected(count);
        for (std::size_t i = 0; i < count; ++i) {
          const double k = static_cast<double>(i % 8);
          mine[i] = 4 * (r + 1) + k;
          expected[i] = op == ReduceOp::sum   ? 2 * n * (n + 1) + n * k
                        : op == ReduceOp::avg ? 2 * (n + 1) + k
                        : op == ReduceOp::max ? 4 * n + k
                                              : 4 + k;
        }
        Buffer buffer = bf16_buffer(mine, GetParam());
        comm::all_reduce(*comm, buffer, op);
        EXPECT_EQ(bf16_values(buffer), expected) << "all_reduce " << comm::to_string(op);

        const Buffer in = bf16_buffer(mine, GetParam());
        Buffer out = bf16_buffer(std::vector<double>(8, -1.0), GetParam());
        comm::reduce_scatter(*comm, in, out, 1, op);
        const auto begin = expected.begin() + static_cast<std::ptrdiff_t>(8 * comm->rank());
        EXPECT_EQ(bf16_values(out), std::vector<double>(begin, begin + 8))
            << "reduce_scatter " << comm::to_string(op);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, Bf16ReductionTest,
                         ::testing::Values(BufferKind{DType::bf16, kernels::Device::cpu},
                                           BufferKind{DType::bf16, kernels::Device::cpu, true},
                                           BufferKind{DType::bf16, kernels::Device::cuda}),
                         kind_name);

// One combination rounds once, to nearest even: 1 + 2^-8 is the tie between 1 and 1 + 2^-7 and
// goes to 1; 1 + 3 2^-8 goes to 1 + 2^-6; the largest finite value doubled overflows to inf.
TEST(Bf16Reduction, OneCombinationRoundsOnceToNearestEven) {
  const std::vector<float> first = {1.0f, 1.0f, 3.3895313892515355e38f};
  const std::vector<float> second = {0x1p-8f, 0x3p-8f, 3.3895313892515355e38f};
  std::vector<kernels::bf16> a, b, out(first.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    a.push_back(kernels::to_bf16(first[i]));
    b.push_back(kernels::to_bf16(second[i]));
  }
  comm::combine_bf16(out.data(), a.data(), b.data(), out.size(), ReduceOp::sum);
  EXPECT_EQ(kernels::bf16_to_float(out[0]), 1.0f);
  EXPECT_EQ(kernels::bf16_to_float(out[1]), 1.015625f);
  EXPECT_TRUE(std::isinf(kernels::bf16_to_float(out[2])));
}

// Float32 values that are not bfloat16 values, reduced by PendingReduction on a bfloat16 wire:
// each rank's values are rounded once, combined with a rounding each, and averaged in float32.
// On 2 ranks there is one combination, so the result is known bit for bit; on more the error
// against the exact mean stays within (n + 1) 2^-8 of the mean of |x| (one rounding of each
// input and at most n - 1 of the partial sums, each at most 2^-8 relative), and the ranks agree.
TEST(Bf16Reduction, PendingReductionOnABfloat16WireRoundsLikeTheHandComputation) {
  const Communicator& comm = world();
  const double n = comm.size(), r = comm.rank();
  constexpr std::size_t kCount = 64;
  // Rank q's element i: a float32 value with more significant bits than bfloat16 keeps.
  const auto value = [](double q, std::size_t i) {
    return static_cast<double>(
        static_cast<float>(std::sin(1.7 * q + 0.37 * static_cast<double>(i)) * (1.0 + q)));
  };
  std::vector<double> mine(kCount), exact(kCount, 0.0), magnitude(kCount, 0.0);
  for (std::size_t i = 0; i < kCount; ++i) {
    mine[i] = value(r, i);
    for (int q = 0; q < comm.size(); ++q) {
      exact[i] += value(q, i) / n;
      magnitude[i] += std::abs(value(q, i)) / n;
    }
  }
  Buffer buffer = make_buffer(mine, {DType::f32, kernels::Device::cpu});
  comm::PendingReduction reduction;
  reduction.start_all_reduce(comm, buffer, ReduceOp::avg, comm::Wire::bf16);
  reduction.wait();
  const std::vector<double> got = host_values(buffer);
  for (std::size_t i = 0; i < kCount; ++i) {
    EXPECT_NEAR(got[i], exact[i], (n + 1) * 0x1p-8 * magnitude[i]) << "element " << i;
    EXPECT_EQ(got[i], rounded(got[i] * n) / n) << "element " << i << " is no bfloat16 sum / n";
  }
  if (comm.size() == 2) {
    for (std::size_t i = 0; i < kCount; ++i) {
      const double sum = rounded(rounded(value(0, i)) + rounded(value(1, i)));
      EXPECT_EQ(got[i], sum * 0.5) << "element " << i;
    }
  }
  Buffer all(kCount * static_cast<std::size_t>(comm.size()), DType::f32, kernels::Device::cpu);
  comm::all_gather(comm, buffer, all, 1);
  const std::vector<double> gathered = host_values(all);
  for (int q = 0; q < comm.size(); ++q) {
    EXPECT_EQ(
        std::vector<double>(gathered.begin() + q * kCount, gathered.begin() + (q + 1) * kCount),
        got)
        << "rank " << q << " differs";
  }
}

// The reduce-scatter form: rank r's block is the bfloat16 sum of every rank's block r.
TEST(Bf16Reduction, PendingReduceScatterOnABfloat16WireFillsOnlyTheOwnedBlock) {
  const Communicator& comm = world();
  const auto n = static_cast<std::size_t>(comm.size());
  const auto r = static_cast<std::size_t>(comm.rank());
  constexpr std::size_t kBlock = 6;
  std::vector<double> mine(kBlock * n);
  for (std::size_t i = 0; i < mine.size(); ++i)
    mine[i] = static_cast<double>((r + 1) * 4 + i % kBlock);  // small integers: exact
  Buffer buffer = make_buffer(mine, {DType::f32, kernels::Device::cpu});
  comm::PendingReduction reduction;
  reduction.start_reduce_scatter(comm, buffer, kBlock, 1, kBlock - 2, ReduceOp::sum,
                                 comm::Wire::bf16);
  reduction.wait();
  const std::vector<double> got = host_values(buffer);
  const double dn = static_cast<double>(n);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::size_t k = i % kBlock;
    const bool reduced = i / kBlock == r && k >= 1 && k + 1 < kBlock;
    EXPECT_EQ(got[i], reduced ? 2 * dn * (dn + 1) + dn * static_cast<double>(k) : mine[i])
        << "element " << i;
  }
}

TEST(Bf16Reduction, ABfloat16WireNeedsAFloat32Buffer) {
  Buffer buffer = make_buffer({1.0, 2.0}, {DType::f64, kernels::Device::cpu});
  comm::PendingReduction reduction;
  EXPECT_THROW(reduction.start_all_reduce(world(), buffer, ReduceOp::sum, comm::Wire::bf16),
               std::invalid_argument);
  EXPECT_FALSE(reduction.active());
}

}  // namespace
}  // namespace mpitron::test
