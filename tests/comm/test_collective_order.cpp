// mpitron's own reductions on point-to-point messages (all_reduce: recursive doubling below
// 256 KiB, from 256 KiB on float buffers Rabenseifner's on 2, 4 and 8 ranks and the ring on 3
// and 5; reduce_scatter: recursive halving or the ring) on data whose
// floating-point sums depend on the order: all_reduce leaves the same bits on every rank, and
// every result equals a reference that combines every rank's values in the order the algorithm
// documents, and lies within rounding of the reduction taken in double; all_gather places every
// block exactly. Run on
// groups of 1, 2, 3, 4, 5 and 8 ranks (split from the world of the np 1/2/4/8 runs), so the fold
// of a rank count that is not a power of two and uneven ring chunks are covered.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "comm/butterfly.h"
#include "comm/chunking.h"
#include "comm/collectives.h"
#include "comm/p2p_gather_scatter.h"
#include "comm/recursive_doubling.h"
#include "comm/ring_all_reduce.h"
#include "comm_test_support.h"
#include "mpi_test_main.h"

namespace mpitron::test {
namespace {

using comm::Communicator;
using comm::ReduceOp;
using kernels::DType;
using test::world;

// Rank `rank`'s element i: floats of mixed signs and magnitudes (10-bit integers times 2^-30 ..
// 2^40, wider than float64's 53 bits), so a sum's rounding depends on its order; integers
// small enough that no sum overflows.
template <class T>
T value_of(int rank, std::size_t i) {
  const std::uint64_t h = (static_cast<std::uint64_t>(rank) * 2654435761u + i * 40503u) % 1000003u;
  if constexpr (std::is_floating_point_v<T>) {
    const double mantissa = static_cast<double>(h % 2001) - 1000.0;
    return static_cast<T>(std::ldexp(mantissa, static_cast<int>(h % 71) - 30));
  } else {
    return static_cast<T>(h % 2001) - 1000;
  }
}

template <class T>
T apply(ReduceOp op, T first, T second) {
  switch (op) {
    case ReduceOp::max:
      return std::max(first, second);
    case ReduceOp::min:
      return std::min(first, second);
    case ReduceOp::sum:
    case ReduceOp::avg:
      break;
  }
  return static_cast<T>(first + second);
}

// Recursive doubling's order (recursive_doubling.h): rank 2j folds into rank 2j + 1 for j below
// p - p2, then blocks of numbered ranks combine lower block first.
template <class T>
T recursive_doubling_reference(int p, std::size_t i, ReduceOp op) {
  int p2 = 1;
  while (p2 * 2 <= p)
    p2 *= 2;
  const int folded = p - p2;
  std::vector<T> numbered(static_cast<std::size_t>(p2));
  for (int j = 0; j < p2; ++j) {
    numbered[j] = j < folded ? apply(op, value_of<T>(2 * j, i), value_of<T>(2 * j + 1, i))
                             : value_of<T>(j + folded, i);
  }
  for (int bit = 1; bit < p2; bit <<= 1) {
    for (int j = 0; j < p2; j += 2 * bit)
      numbered[j] = apply(op, numbered[j], numbered[j + bit]);
  }
  return numbered[0];
}

// The ring's order (ring_all_reduce.h): element i lies in chunk c (the first n % p chunks one
// element longer), which starts at rank c and passes ranks c + 1, .., c + p - 1, each combining
// its own value first with what arrived.
template <class T>
T ring_reference(int p, std::size_t n, std::size_t i, ReduceOp op) {
  const std::size_t ranks = static_cast<std::size_t>(p), base = n / ranks, extra = n % ranks;
  const std::size_t c =
      i < extra * (base + 1) ? i / (base + 1) : extra + (i - extra * (base + 1)) / base;
  T acc = value_of<T>(static_cast<int>(c), i);
  for (std::size_t k = 1; k < ranks; ++k)
    acc = apply(op, value_of<T>(static_cast<int>((c + k) % ranks), i), acc);
  return acc;
}

// The butterfly of recursive halving (butterfly.h), the order of reduce_scatter and of
// Rabenseifner's all-reduce on a power-of-two p: ranks pair across the highest bit first, the
// lower rank's operand first; `value(q)` is rank q's operand.
template <class T, class Value>
T butterfly_reference(int p, ReduceOp op, Value value) {
  std::vector<T> held(static_cast<std::size_t>(p));
  for (int q = 0; q < p; ++q)
    held[q] = value(q);
  for (int d = p / 2; d >= 1; d /= 2) {
    for (int q = 0; q < p; ++q) {
      if ((q & d) == 0) held[q] = held[q | d] = apply(op, held[q], held[q | d]);
    }
  }
  return held[0];
}

// Groups of this world's ranks: the world itself and, from 4 ranks on, a split into groups of
// 3 and 1 (4 ranks) or 5 and 3 (8 ranks).
std::vector<Communicator> groups() {
  std::vector<Communicator> comms{world()};
  const int n = world().size(), r = world().rank();
  if (n >= 4) {
    const int first = n >= 8 ? 5 : 3;
    comms.push_back(world().split(r < first ? 0 : 1, r, "group"));
  }
  return comms;
}

// Expects got[i] (i < n) to equal ordered(i) bit for bit (scaled by 1/p for avg) and to lie
// within rounding of op over term(i, q), q < p, taken in double.
template <class T, class Ordered, class Term>
void expect_reduced(const T* got, std::size_t n, int p, ReduceOp op, Ordered ordered, Term term) {
  const double scale = op == ReduceOp::avg ? 1.0 / p : 1.0;
  std::size_t mismatches = 0, first_mismatch = 0;
  for (std::size_t i = 0; i < n; ++i) {
    T want = ordered(i);
    if (op == ReduceOp::avg) want = static_cast<T>(want * static_cast<T>(scale));
    if (std::memcmp(&want, &got[i], sizeof(T)) != 0 && mismatches++ == 0) first_mismatch = i;
    // In any order, within rounding of the result in double: p - 1 float32 additions err by at
    // most (p - 1) 2^-24 of the magnitudes' sum, far below the 1e-4 of it allowed here.
    double exact = term(i, 0), magnitude = std::abs(exact);
    for (int q = 1; q < p; ++q) {
      const double v = term(i, q);
      exact = op == ReduceOp::max   ? std::max(exact, v)
              : op == ReduceOp::min ? std::min(exact, v)
                                    : exact + v;
      magnitude += std::abs(v);
    }
    ASSERT_LE(std::abs(static_cast<double>(got[i]) - exact * scale), 1e-4 * magnitude)
        << "element " << i;
  }
  EXPECT_EQ(mismatches, 0u) << mismatches << " elements differ from the reference order, first at "
                            << first_mismatch;
}

template <class T>
void check_all_reduce(const Communicator& comm, DType dtype, std::size_t n, ReduceOp op) {
  const int p = comm.size();
  kernels::Buffer buffer(n, dtype, kernels::Device::cpu);
  T* values = buffer.data_as<T>();
  for (std::size_t i = 0; i < n; ++i)
    values[i] = value_of<T>(comm.rank(), i);
  const bool ring = comm::uses_ring_all_reduce(comm, buffer);
  const bool rabenseifner = comm::uses_rabenseifner_all_reduce(comm, buffer);
  const bool doubling = comm::uses_recursive_doubling(comm, buffer);
  EXPECT_EQ(doubling, p > 1 && buffer.bytes() < comm::kRecursiveDoublingMaxBytes);
  const bool large = p > 1 && !doubling && kernels::is_floating(dtype);
  const bool butterfly = (p & (p - 1)) == 0 && buffer.bytes() < comm::kRabenseifnerMaxBytes;
  EXPECT_EQ(rabenseifner, large && butterfly);
  EXPECT_EQ(ring, large && !butterfly);
  comm::all_reduce(comm, buffer, op);

  kernels::Buffer root(n, dtype, kernels::Device::cpu);
  std::memcpy(root.data(), buffer.data(), buffer.bytes());
  comm::broadcast(comm, root, 0);
  EXPECT_EQ(std::memcmp(root.data(), buffer.data(), buffer.bytes()), 0)
      << "rank " << comm.rank() << "'s result differs from rank 0's";
  // MPI's reduction remains for one rank and for integer buffers from 256 KiB on, which are
  // exact in any order, so recursive doubling's order is their reference too.
  expect_reduced(
      values, n, p, op,
      [&](std::size_t i) {
        if (ring) return ring_reference<T>(p, n, i, op);
        if (rabenseifner) {
          return butterfly_reference<T>(p, op, [&](int q) { return value_of<T>(q, i); });
        }
        return recursive_doubling_reference<T>(p, i, op);
      },
      [&](std::size_t i, int q) { return static_cast<double>(value_of<T>(q, i)); });
}

// reduce_scatter of a [outer, p * chunk] buffer: this rank's [outer, chunk] block in the order of
// recursive halving or the ring (p2p_gather_scatter.h), whatever tiles the message limit cuts it
// into.
template <class T>
void check_reduce_scatter(const Communicator& comm, DType dtype, std::size_t outer,
                          std::size_t chunk, ReduceOp op) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t width = static_cast<std::size_t>(p) * chunk;
  kernels::Buffer in(outer * width, dtype, kernels::Device::cpu);
  kernels::Buffer out(outer * chunk, dtype, kernels::Device::cpu);
  for (std::size_t i = 0; i < in.numel(); ++i)
    in.data_as<T>()[i] = value_of<T>(r, i);
  EXPECT_EQ(comm::uses_p2p_reduce_scatter(comm, in), p > 1);
  comm::reduce_scatter(comm, in, out, outer, op);
  // Output element i is input element `wide(i)` of every rank.
  const auto wide = [&](std::size_t i) {
    return i / chunk * width + static_cast<std::size_t>(r) * chunk + i % chunk;
  };
  expect_reduced(
      out.data_as<T>(), out.numel(), p, op,
      [&](std::size_t i) {
        if ((p & (p - 1)) == 0) {
          return butterfly_reference<T>(p, op, [&](int q) { return value_of<T>(q, wide(i)); });
        }
        T acc = value_of<T>((r + 1) % p, wide(i));  // the ring, from rank r + 1 on
        for (int k = 2; k <= p; ++k)
          acc = apply(op, value_of<T>((r + k) % p, wide(i)), acc);
        return acc;
      },
      [&](std::size_t i, int q) { return static_cast<double>(value_of<T>(q, wide(i))); });
}

// Runs check(comm) on every group, with and without a message limit that cuts transfers into
// several messages, under a trace naming both.
template <class Check>
void for_each_group_and_limit(Check check) {
  SettingsGuard guard(world());
  for (const std::size_t limit : {comm::kMaxMessageElements, std::size_t{1000}}) {
    world().set_max_message_elements(limit);
    for (const Communicator& comm : groups()) {
      SCOPED_TRACE(std::to_string(comm.size()) + " ranks, message limit " + std::to_string(limit));
      check(comm);
    }
  }
}

// Runs check.template operator()<T>(dtype, op) for every reduce op on float32 and float64 and
// every op but avg on int32 and int64.
template <class Check>
void for_each_op_and_dtype(Check check) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
    SCOPED_TRACE(comm::to_string(op));
    check.template operator()<float>(DType::f32, op);
    check.template operator()<double>(DType::f64, op);
    if (op == ReduceOp::avg) continue;
    check.template operator()<std::int32_t>(DType::i32, op);
    check.template operator()<std::int64_t>(DType::i64, op);
  }
}

TEST(AllReduceOrder, EveryRankHoldsTheSameBitsInTheDocumentedOrder) {
  for_each_group_and_limit([](const Communicator& comm) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{1001},
                                std::size_t{33000}, std::size_t{65537}}) {
      SCOPED_TRACE(std::to_string(n) + " elements");
      for_each_op_and_dtype(
          [&]<class T>(DType dtype, ReduceOp op) { check_all_reduce<T>(comm, dtype, n, op); });
    }
  });
}

// From kRabenseifnerMaxBytes on every group takes the ring, power-of-two ones included.
TEST(AllReduceOrder, LargeBuffersTakeTheRingOnEveryGroup) {
  for_each_group_and_limit([](const Communicator& comm) {
    check_all_reduce<float>(comm, DType::f32, comm::kRabenseifnerMaxBytes / sizeof(float) + 3,
                            ReduceOp::sum);
  });
}

TEST(ReduceScatterOrder, EveryBlockIsReducedInTheDocumentedOrder) {
  for_each_group_and_limit([](const Communicator& comm) {
    for (const auto& [outer, chunk] :
         {std::pair<std::size_t, std::size_t>{1, 1}, {1, 1001}, {3, 7}, {1, 20000}, {3, 1999}}) {
      SCOPED_TRACE(std::to_string(outer) + " x " + std::to_string(chunk) + " per rank");
      for_each_op_and_dtype([&]<class T>(DType dtype, ReduceOp op) {
        check_reduce_scatter<T>(comm, dtype, outer, chunk, op);
      });
    }
  });
}

// all_gather on the same groups (recursive doubling on 2, 4 and 8 ranks, the ring on 3 and 5,
// and on every group from kRingAllGatherBlockBytesPerRankSquared x p^2 per block): every rank's
// [outer, chunk] block lands bit for bit in its columns.
TEST(AllGatherGroups, EveryBlockLandsInItsColumns) {
  for_each_group_and_limit([](const Communicator& comm) {
    const std::size_t p = static_cast<std::size_t>(comm.size());
    const std::size_t ring_from =
        comm::kRingAllGatherBlockBytesPerRankSquared * p * p / sizeof(float);
    for (const auto& [outer, chunk] : {std::pair<std::size_t, std::size_t>{1, 1},
                                       {1, 20000},
                                       {3, 1999},
                                       {1, ring_from - 1},
                                       {1, ring_from + 1}}) {
      SCOPED_TRACE(std::to_string(outer) + " x " + std::to_string(chunk) + " per rank");
      kernels::Buffer in(outer * chunk, DType::f32, kernels::Device::cpu);
      kernels::Buffer out(outer * p * chunk, DType::f32, kernels::Device::cpu);
      for (std::size_t i = 0; i < in.numel(); ++i)
        in.data_as<float>()[i] = value_of<float>(comm.rank(), i);
      comm::all_gather(comm, in, out, outer);
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < out.numel(); ++i) {
        const std::size_t row = i / (p * chunk), q = i % (p * chunk) / chunk;
        const float want = value_of<float>(static_cast<int>(q), row * chunk + i % chunk);
        mismatches += std::memcmp(&want, &out.data_as<float>()[i], sizeof(float)) != 0;
      }
      EXPECT_EQ(mismatches, 0u);
    }
  });
}

}  // namespace
}  // namespace mpitron::test
