// exchange_and_combine (collective_steps.h), the reduction step of the ring, recursive-halving
// and Rabenseifner collectives, on its own: ranks 2k and 2k + 1 exchange and combine transfers on
// both sides of kCombinePiecesFromBytes (all at once, and pieces combined on arrival), with and
// without a message limit; every result element must equal mine op theirs, in the requested
// operand order, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "comm/chunking.h"
#include "comm/collective_steps.h"
#include "comm_test_support.h"
#include "mpi_test_main.h"

namespace mpitron::test {
namespace {

using comm::ReduceOp;
using kernels::DType;
using test::world;

// Rank `rank`'s element i: floats of many magnitudes, so a misplaced operand shows, and every
// third one a zero signed by the rank's parity, so max shows a swapped operand order (max of -0
// and +0 is its first operand).
float operand(int rank, std::size_t i) {
  if (i % 3 == 0) return rank % 2 == 0 ? 0.0f : -0.0f;
  const auto h = static_cast<int>((static_cast<std::size_t>(rank) * 7919 + i * 104729) % 65521);
  return std::ldexp(static_cast<float>(h % 2001 - 1000), h % 41 - 20);
}

float apply(ReduceOp op, float first, float second) {
  return op == ReduceOp::max ? std::max(first, second) : first + second;
}

TEST(ExchangeAndCombine, EveryPieceIsCombinedInTheRequestedOrder) {
  const int r = world().rank(), peer = r ^ 1;
  if (peer >= world().size()) GTEST_SKIP() << "rank " << r << " has no partner";
  SettingsGuard guard(world());
  // Sizes below and above kCombinePiecesFromBytes (the latter not a whole number of pieces);
  // the transfer is sent from the second half of `data` and combined into its first half.
  const std::size_t on_arrival = comm::kCombinePiecesFromBytes / sizeof(float) + 12345;
  for (const std::size_t limit : {comm::kMaxMessageElements, std::size_t{40000}}) {
    world().set_max_message_elements(limit);
    for (const std::size_t count : {std::size_t{1000}, std::size_t{300000}, on_arrival}) {
      for (const auto& [op, theirs_first] :
           {std::pair{ReduceOp::sum, false}, {ReduceOp::max, false}, {ReduceOp::max, true}}) {
        SCOPED_TRACE("limit " + std::to_string(limit) + ", " + std::to_string(count) +
                     " elements, " + comm::to_string(op) +
                     (theirs_first ? ", theirs first" : ", mine first"));
        kernels::Buffer data(2 * count, DType::f32, kernels::Device::cpu);
        kernels::Buffer result(count, DType::f32, kernels::Device::cpu);
        for (std::size_t i = 0; i < 2 * count; ++i)
          data.data_as<float>()[i] = operand(r, i);
        std::vector<MPI_Request> requests;
        comm::exchange_and_combine(world(), data, {count, count}, peer, peer,
                                   {&data, 0, &result, 0, count, theirs_first, op}, requests,
                                   {"test", peer, count * sizeof(float)});
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < count; ++i) {
          const float mine = operand(r, i), theirs = operand(peer, count + i);
          const float want = theirs_first ? apply(op, theirs, mine) : apply(op, mine, theirs);
          mismatches += std::memcmp(&want, &result.data_as<float>()[i], sizeof(float)) != 0;
        }
        EXPECT_EQ(mismatches, 0u);
      }
    }
  }
}

}  // namespace
}  // namespace mpitron::test
