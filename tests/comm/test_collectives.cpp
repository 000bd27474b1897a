// Collectives checked exactly, on every rank, with rank-valued integer data whose results have
// closed forms (sums of arithmetic series); exact in float32 because every value stays far below
// 2^24. Run on the world and on the tp/pp/dp groups of a topology that fits it, with message
// limits that force chunking and every gather/scatter tiling case.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "comm/chunking.h"
#include "comm/collectives.h"
#include "comm/ring_all_reduce.h"
#include "comm/topology.h"
#include "comm/traffic.h"
#include "comm_test_support.h"
#include "kernels/ops.h"
#include "mpi_test_main.h"

namespace mpitron::test {
namespace {

using comm::Communicator;
using comm::ReduceOp;
using test::world;

// tp 2 when there are 2 ranks or more, pp 2 when 4 or more, dp the rest.
comm::ParallelTopology topology_for_world() {
  const int n = world().size();
  const int tp = n >= 2 ? 2 : 1;
  const int pp = n >= 4 ? 2 : 1;
  return comm::ParallelTopology(world(), tp, pp, n / (tp * pp));
}

class CollectiveTest : public BufferKindTest {
 protected:
  // Runs `check` on the world and each group, for every message limit.
  template <class Check>
  void for_each_comm_and_limit(Check check) {
    SettingsGuard guard(world());
    const comm::ParallelTopology topology = topology_for_world();
    for (std::size_t limit : message_limits()) {
      world().set_max_message_elements(limit);
      for (const Communicator* comm :
           {&topology.world(), &topology.tp_comm(), &topology.pp_comm(), &topology.dp_comm()}) {
        SCOPED_TRACE(comm->name() + " communicator, message limit " + std::to_string(limit));
        check(*comm);
      }
    }
  }
};

TEST_P(CollectiveTest, AllReduceEveryOpIsExact) {
  constexpr std::size_t kCount = 10;
  for_each_comm_and_limit([&](const Communicator& comm) {
    const double n = comm.size();
    const double r = comm.rank();
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
      std::vector<double> mine(kCount);
      std::vector<double> expected(kCount);
      for (std::size_t i = 0; i < kCount; ++i) {
        const double di = static_cast<double>(i);
        mine[i] = (r + 1) * 100 + di;  // rank q holds (q + 1) * 100 + i
        switch (op) {
          case ReduceOp::sum:
            expected[i] = 50 * n * (n + 1) + n * di;
            break;
          case ReduceOp::avg:
            expected[i] = 50 * (n + 1) + di;
            break;
          case ReduceOp::max:
            expected[i] = n * 100 + di;
            break;
          case ReduceOp::min:
            expected[i] = 100 + di;
            break;
        }
      }
      kernels::Buffer buffer = make_buffer(mine, GetParam());
      if (op == ReduceOp::avg && !kernels::is_floating(GetParam().dtype)) {
        EXPECT_THROW(comm::all_reduce(comm, buffer, op), std::invalid_argument);
        continue;
      }
      comm::all_reduce(comm, buffer, op);
      EXPECT_EQ(host_values(buffer), expected) << comm::to_string(op);
    }
  });
}

// Buffers of >= 256 KiB on the CPU take the ring or, on 2, 4 and 8 ranks, Rabenseifner's
// all-reduce on point-to-point messages (ring_all_reduce.h, butterfly.h): an element count that
// the ranks do not divide (uneven chunks), with and without a message limit that cuts each step
// into several messages.
TEST_P(CollectiveTest, AllReduceOfALargeBufferIsExactThroughTheRingOrRabenseifner) {
  constexpr std::size_t kCount = 70001;
  SettingsGuard guard(world());
  const comm::ParallelTopology topology = topology_for_world();
  for (const std::size_t limit : {comm::kMaxMessageElements, std::size_t{4093}}) {
    world().set_max_message_elements(limit);
    for (const Communicator* comm : {&topology.world(), &topology.tp_comm()}) {
      SCOPED_TRACE(comm->name() + " communicator, message limit " + std::to_string(limit));
      const double n = comm->size(), r = comm->rank();
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
        if (op == ReduceOp::avg && !kernels::is_floating(GetParam().dtype)) continue;
        std::vector<double> mine(kCount), expected(kCount);
        for (std::size_t i = 0; i < kCount; ++i) {
          const double di = static_cast<double>(i % 1000);
          mine[i] = (r + 1) * 100 + di;
          expected[i] = op == ReduceOp::sum   ? 50 * n * (n + 1) + n * di
                        : op == ReduceOp::avg ? 50 * (n + 1) + di
                        : op == ReduceOp::max ? n * 100 + di
                                              : 100 + di;
        }
        kernels::Buffer buffer = make_buffer(mine, GetParam());
        EXPECT_EQ(comm::uses_large_all_reduce(*comm, buffer),
                  comm->size() > 1 && buffer.device() == kernels::Device::cpu &&
                      kernels::is_floating(buffer.dtype()));
        comm::all_reduce(*comm, buffer, op);
        EXPECT_EQ(host_values(buffer), expected) << comm::to_string(op);
      }
    }
  }
}

TEST_P(CollectiveTest, AllGatherPlacesEachRankAlongTheLastDim) {
  for_each_comm_and_limit([&](const Communicator& comm) {
    const std::size_t n = static_cast<std::size_t>(comm.size());
    for (std::size_t outer : {1, 3}) {
      for (std::size_t chunk : {1, 4}) {
        // rank s holds in[i, j] = s * 1000 + i * 10 + j
        const auto value = [](std::size_t s, std::size_t i, std::size_t j) {
          return static_cast<double>(s * 1000 + i * 10 + j);
        };
        std::vector<double> mine;
        std::vector<double> expected;
        for (std::size_t i = 0; i < outer; ++i) {
          for (std::size_t j = 0; j < chunk; ++j)
            mine.push_back(value(comm.rank(), i, j));
          for (std::size_t s = 0; s < n; ++s) {
            for (std::size_t j = 0; j < chunk; ++j)
              expected.push_back(value(s, i, j));
          }
        }
        const kernels::Buffer in = make_buffer(mine, GetParam());
        kernels::Buffer out = filled_buffer(n * outer * chunk, -1, GetParam());
        comm::all_gather(comm, in, out, outer);
        EXPECT_EQ(host_values(out), expected) << "outer " << outer << ", chunk " << chunk;
      }
    }
  });
}

TEST_P(CollectiveTest, ReduceScatterIsTheInverseLayoutReduced) {
  for_each_comm_and_limit([&](const Communicator& comm) {
    const std::size_t n = static_cast<std::size_t>(comm.size());
    const double dn = static_cast<double>(n);
    const std::size_t q = static_cast<std::size_t>(comm.rank());
    for (std::size_t outer : {1, 3}) {
      for (std::size_t chunk : {1, 4}) {
        // rank r holds in[i, k] = (r + 1) * 1000 + i * 10 + k for k in [0, n * chunk)
        std::vector<double> mine;
        for (std::size_t i = 0; i < outer; ++i) {
          for (std::size_t k = 0; k < n * chunk; ++k) {
            mine.push_back(static_cast<double>((q + 1) * 1000 + i * 10 + k));
          }
        }
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
          std::vector<double> expected;
          for (std::size_t i = 0; i < outer; ++i) {
            for (std::size_t j = 0; j < chunk; ++j) {
              const double tail = static_cast<double>(i * 10 + q * chunk + j);
              expected.push_back(op == ReduceOp::sum   ? 500 * dn * (dn + 1) + dn * tail
                                 : op == ReduceOp::avg ? 500 * (dn + 1) + tail
                                                       : dn * 1000 + tail);
            }
          }
          const kernels::Buffer in = make_buffer(mine, GetParam());
          kernels::Buffer out = filled_buffer(outer * chunk, -1, GetParam());
          if (op == ReduceOp::avg && !kernels::is_floating(GetParam().dtype)) {
            EXPECT_THROW(comm::reduce_scatter(comm, in, out, outer, op), std::invalid_argument);
            continue;
          }
          comm::reduce_scatter(comm, in, out, outer, op);
          EXPECT_EQ(host_values(out), expected)
              << comm::to_string(op) << ", outer " << outer << ", chunk " << chunk;
        }
      }
    }
  });
}

TEST_P(CollectiveTest, BroadcastFromEveryRoot) {
  constexpr std::size_t kCount = 10;
  for_each_comm_and_limit([&](const Communicator& comm) {
    for (int root = 0; root < comm.size(); ++root) {
      std::vector<double> roots(kCount);
      for (std::size_t i = 0; i < kCount; ++i)
        roots[i] = root * 100 + static_cast<double>(i) + 7;
      kernels::Buffer buffer = comm.rank() == root ? make_buffer(roots, GetParam())
                                                   : filled_buffer(kCount, -1, GetParam());
      comm::broadcast(comm, buffer, root);
      EXPECT_EQ(host_values(buffer), roots) << "root " << root;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Kinds, CollectiveTest, ::testing::ValuesIn(all_buffer_kinds()), kind_name);

// comm/traffic.h: each call adds its payload to its communicator's count (nothing on one rank):
// all_reduce its buffer, all_gather this rank's shard, reduce_scatter its whole input,
// broadcast its buffer.
TEST(Collectives, TrafficCountsEachCallsPayload) {
  const Communicator& comm = world();
  const std::size_t n = static_cast<std::size_t>(comm.size());
  const comm::Traffic before = comm::traffic();
  kernels::Buffer ten = make_buffer(numbered(0, 10), {kernels::DType::f32, kernels::Device::cpu});
  comm::all_reduce(comm, ten, ReduceOp::sum);
  kernels::Buffer three(3, kernels::DType::f64, kernels::Device::cpu);
  kernels::Buffer gathered(3 * n, kernels::DType::f64, kernels::Device::cpu);
  kernels::fill(three, 1.0);
  comm::all_gather(comm, three, gathered, 1);
  kernels::Buffer scattered(2, kernels::DType::f32, kernels::Device::cpu);
  comm::reduce_scatter(comm,
                       make_buffer(numbered(0, 2 * n), {kernels::DType::f32, kernels::Device::cpu}),
                       scattered, 1);
  comm::broadcast(comm, ten, 0);
  const std::uint64_t counted = comm::traffic_since(before, comm::traffic())[comm.name()];
  EXPECT_EQ(counted, n == 1 ? 0u : 40u + 24u + 8u * n + 40u);
}

TEST(Collectives, BarrierWaitsForTheLastRank) {
  // The last rank enters 200 ms late; everyone must leave after it entered. The 100 ms bound
  // leaves room for ranks that left the first barrier up to 100 ms apart (oversubscribed).
  comm::barrier(world());
  const auto start = std::chrono::steady_clock::now();
  if (world().rank() == world().size() - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  comm::barrier(world());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

TEST(Collectives, LocalArgumentErrorsThrowBeforeCommunicating) {
  const BufferKind cpu{kernels::DType::f32, kernels::Device::cpu};
  const kernels::Buffer in = filled_buffer(6, 1, cpu);
  kernels::Buffer wrong = filled_buffer(6 * world().size() + 1, 0, cpu);
  EXPECT_THROW(comm::all_gather(world(), in, wrong, 1), std::invalid_argument);
  kernels::Buffer part = filled_buffer(6, 0, cpu);
  EXPECT_THROW(comm::reduce_scatter(world(), wrong, part, 1), std::invalid_argument);
  kernels::Buffer out = filled_buffer(6 * world().size(), 0, cpu);
  EXPECT_THROW(comm::all_gather(world(), in, out, 4),
               std::invalid_argument);  // 4 does not divide 6
  EXPECT_THROW(comm::all_gather(world(), in, out, 0), std::invalid_argument);
  const kernels::Buffer in64 = filled_buffer(6, 1, {kernels::DType::f64, kernels::Device::cpu});
  EXPECT_THROW(comm::all_gather(world(), in64, out, 1), std::invalid_argument);
  kernels::Buffer buffer = filled_buffer(3, 0, cpu);
  EXPECT_THROW(comm::broadcast(world(), buffer, world().size()), std::invalid_argument);
  EXPECT_THROW(comm::broadcast(world(), buffer, -1), std::invalid_argument);
}

TEST(Collectives, DirectAndStagedCudaTransfersAgree) {
  if (!kernels::cuda_available()) GTEST_SKIP() << "no CUDA device";
  if (!world().mpi_cuda_aware()) GTEST_SKIP() << "the MPI library has no CUDA support";
  const BufferKind gpu{kernels::DType::f32, kernels::Device::cuda};
  const comm::TransferMode mode = world().transfer_mode();
  std::vector<std::vector<double>> results;
  for (comm::TransferMode m : {comm::TransferMode::staged, comm::TransferMode::direct}) {
    world().set_transfer_mode(m);
    kernels::Buffer buffer = make_buffer({world().rank() + 0.5, 1.0 / 3.0, -2.0}, gpu);
    comm::all_reduce(world(), buffer, ReduceOp::avg);
    results.push_back(host_values(buffer));
  }
  world().set_transfer_mode(mode);
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace mpitron::test
