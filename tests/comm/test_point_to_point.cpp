// send/isend/recv: exact delivery of rank-valued data, sends in flight while their rank receives
// (the pattern of a 1F1B pipeline), shape and dtype checks that name both shapes and both ranks,
// and a wait that sleeps instead of spinning.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <thread>

#include "comm/chunking.h"
#include "comm/point_to_point.h"
#include "comm/topology.h"
#include "comm_test_support.h"
#include "kernels/ops.h"
#include "mpi_test_main.h"

namespace mpitron::test {
namespace {

using comm::Communicator;
using test::world;

// rank s sends values s * 100 + i.
std::vector<double> payload_of(int rank, std::size_t count) {
  return numbered(rank * 100.0, count);
}

using PointToPointTest = BufferKindTest;

TEST_P(PointToPointTest, RingDeliversEveryElement) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::vector<std::int64_t> shape{2, 5};
  SettingsGuard guard(world());
  for (std::size_t limit : message_limits()) {
    world().set_max_message_elements(limit);
    const auto [next, previous] = ring_neighbours(world());
    const kernels::Buffer mine = make_buffer(payload_of(world().rank(), 10), GetParam());
    kernels::Buffer received = filled_buffer(10, -1, GetParam());
    // Even ranks send first, odd ranks receive first, so large messages cannot deadlock.
    if (world().rank() % 2 == 0) {
      comm::send(world(), mine, shape, next);
      comm::recv(world(), received, shape, previous);
    } else {
      comm::recv(world(), received, shape, previous);
      comm::send(world(), mine, shape, next);
    }
    EXPECT_EQ(host_values(received), payload_of(previous, 10)) << "message limit " << limit;
  }
}

TEST_P(PointToPointTest, PipelineStagesPassActivationsForward) {
  const int n = world().size();
  const comm::ParallelTopology topology(world(), 1, n, 1);
  const Communicator& pp = topology.pp_comm();
  const std::vector<std::int64_t> shape{3, 2};
  kernels::Buffer activation = filled_buffer(6, -1, GetParam());
  if (!topology.is_first_stage()) {
    comm::recv(pp, activation, shape, topology.pp_rank() - 1);
    EXPECT_EQ(host_values(activation), payload_of(topology.prev_stage_global_rank(), 6));
  }
  if (!topology.is_last_stage()) {
    comm::send(pp, make_buffer(payload_of(world().rank(), 6), GetParam()), shape,
               topology.pp_rank() + 1);
  }
}

// Every rank starts its send to the next rank of a ring before it receives from the previous one.
// 64Ki elements are far above the eager limits of Open MPI's transports, so with sends that wait
// for delivery every rank would sit in its send and the ring would deadlock.
TEST_P(PointToPointTest, RingOfSendsStartedBeforeAnyReceive) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::vector<std::int64_t> shape{256, 256};
  const std::size_t count = 256 * 256;
  SettingsGuard guard(world());
  for (std::size_t limit : {comm::kMaxMessageElements, std::size_t{4099}}) {
    world().set_max_message_elements(limit);
    const auto [next, previous] = ring_neighbours(world());
    const kernels::Buffer mine = make_buffer(payload_of(world().rank(), count), GetParam());
    kernels::Buffer received = filled_buffer(count, -1, GetParam());
    comm::SendRequest request = comm::isend(world(), mine, shape, next);
    EXPECT_TRUE(request.pending());
    comm::recv(world(), received, shape, previous);
    request.wait();
    EXPECT_FALSE(request.pending());
    EXPECT_EQ(host_values(received), payload_of(previous, count)) << "message limit " << limit;
  }
}

// Payloads around the sizes where a transfer changes form (transfer.h): all inside the header's
// message (960 float32 = kInlinePayloadBytes), that and one element more, an inline head and
// eager pieces, and around kEagerPiecesBelowBytesForCopies (8192 float32, 4096 float64), from where
// the payload follows the header as messages of its own; for every buffer kind, at the default
// message limit and at 1000 elements (pieces and messages then cut at the limit).
TEST_P(PointToPointTest, PayloadsAroundTheInlineAndEagerSizesArriveWhole) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  SettingsGuard guard(world());
  for (std::size_t limit : {comm::kMaxMessageElements, std::size_t{1000}}) {
    world().set_max_message_elements(limit);
    for (const std::size_t count : {959, 960, 961, 4095, 4096, 8191, 8192, 65537}) {
      const auto [next, previous] = ring_neighbours(world());
      const std::vector<std::int64_t> shape{static_cast<std::int64_t>(count)};
      const kernels::Buffer mine = make_buffer(payload_of(world().rank(), count), GetParam());
      kernels::Buffer received = filled_buffer(count, -1, GetParam());
      comm::RecvRequest request = comm::irecv(world(), received, shape, previous);
      comm::SendRequest sent = comm::isend(world(), mine, shape, next);
      request.wait();
      sent.wait();
      EXPECT_EQ(host_values(received), payload_of(previous, count))
          << count << " elements, message limit " << limit;
    }
  }
}

// The 1F1B warm-up: a stage starts several sends to one neighbour before that neighbour receives
// any, in both directions at once; they arrive in the order they were started.
TEST_P(PointToPointTest, QueuedSendsToOnePeerArriveInOrder) {
  const comm::ParallelTopology topology(world(), 1, world().size(), 1);
  const Communicator& pp = topology.pp_comm();
  const std::vector<std::int64_t> shape{2, 3};
  constexpr int kQueued = 4;
  SettingsGuard guard(world());
  for (std::size_t limit : message_limits()) {
    world().set_max_message_elements(limit);
    std::vector<kernels::Buffer> sent;
    std::vector<comm::SendRequest> requests;
    const auto start = [&](int peer) {
      for (int k = 0; k < kQueued; ++k) {
        sent.push_back(make_buffer(payload_of(world().rank() * 10 + k, 6), GetParam()));
        requests.push_back(comm::isend(pp, sent.back(), shape, peer));
      }
    };
    const auto expect_from = [&](int peer, int peer_world_rank) {
      kernels::Buffer buffer = filled_buffer(6, -1, GetParam());
      for (int k = 0; k < kQueued; ++k) {
        comm::recv(pp, buffer, shape, peer);
        EXPECT_EQ(host_values(buffer), payload_of(peer_world_rank * 10 + k, 6))
            << "message " << k << ", limit " << limit;
      }
    };
    if (!topology.is_last_stage()) start(topology.pp_rank() + 1);
    if (!topology.is_first_stage()) start(topology.pp_rank() - 1);
    if (!topology.is_first_stage()) {
      expect_from(topology.pp_rank() - 1, topology.prev_stage_global_rank());
    }
    if (!topology.is_last_stage()) {
      expect_from(topology.pp_rank() + 1, topology.next_stage_global_rank());
    }
    comm::wait_all(requests);
    for (const comm::SendRequest& request : requests)
      EXPECT_FALSE(request.pending());
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, PointToPointTest, ::testing::ValuesIn(all_buffer_kinds()),
                         kind_name);

TEST(PointToPoint, ShapeMismatchNamesBothShapesAndRanksAndKeepsTheStreamInStep) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const BufferKind f32{kernels::DType::f32, kernels::Device::cpu};
  const BufferKind f64{kernels::DType::f64, kernels::Device::cpu};
  SettingsGuard guard(world());
  world().set_max_message_elements(4);  // the dropped payloads span several messages
  const std::vector<std::int64_t> sent{2, 3};
  const std::vector<std::int64_t> expected{3, 2};
  if (world().rank() == 0) {
    comm::send(world(), make_buffer(payload_of(0, 6), f32), sent, 1);
    comm::send(world(), make_buffer(payload_of(0, 6), f64), sent, 1);
    comm::send(world(), make_buffer(payload_of(0, 6), f32), sent, 1);
  } else if (world().rank() == 1) {
    kernels::Buffer buffer = filled_buffer(6, -1, f32);
    const auto rejection = [&](const std::vector<std::int64_t>& shape) -> std::string {
      try {
        comm::recv(world(), buffer, shape, 0);
        return "accepted";
      } catch (const std::runtime_error& error) {
        return error.what();
      }
    };
    EXPECT_EQ(rejection(expected),
              "recv on the world communicator: rank 1 expected [3, 2] float32 from rank 0, but "
              "rank 0 sent [2, 3] float32");
    EXPECT_EQ(rejection(sent),
              "recv on the world communicator: rank 1 expected [2, 3] float32 from rank 0, but "
              "rank 0 sent [2, 3] float64");
    EXPECT_EQ(host_values(buffer), std::vector<double>(6, -1)) << "a rejected payload was written";
    comm::recv(world(), buffer, sent, 0);
    EXPECT_EQ(host_values(buffer), payload_of(0, 6));
  }
}

TEST(PointToPoint, QueuedSendsOfAnotherShapeAreStillRejected) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const BufferKind f32{kernels::DType::f32, kernels::Device::cpu};
  SettingsGuard guard(world());
  world().set_max_message_elements(4);
  const std::vector<std::int64_t> sent{2, 3};
  const std::vector<std::int64_t> expected{6};
  if (world().rank() == 0) {
    const kernels::Buffer first = make_buffer(payload_of(0, 6), f32);
    const kernels::Buffer second = make_buffer(payload_of(1, 6), f32);
    std::vector<comm::SendRequest> requests;
    requests.push_back(comm::isend(world(), first, sent, 1));
    requests.push_back(comm::isend(world(), second, expected, 1));
    comm::wait_all(requests);
  } else if (world().rank() == 1) {
    kernels::Buffer buffer = filled_buffer(6, -1, f32);
    EXPECT_THROW(comm::recv(world(), buffer, expected, 0), std::runtime_error);
    EXPECT_EQ(host_values(buffer), std::vector<double>(6, -1)) << "a rejected payload was written";
    comm::recv(world(), buffer, expected, 0);
    EXPECT_EQ(host_values(buffer), payload_of(1, 6));
  }
}

// A staged payload is copied when the send starts, so the caller may reuse or free its buffer.
TEST(PointToPoint, AStagedPayloadBelongsToTheRequest) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const BufferKind f64{kernels::DType::f64, kernels::Device::cpu};
  SettingsGuard guard(world());
  world().set_stage_host_buffers(true);
  const std::vector<std::int64_t> shape{5};
  if (world().rank() == 0) {
    comm::SendRequest request;
    {
      kernels::Buffer payload = make_buffer(payload_of(0, 5), f64);
      request = comm::isend(world(), payload, shape, 1);
      kernels::fill(payload, -7.0);
    }
    comm::SendRequest moved = std::move(request);
    EXPECT_FALSE(request.pending());
    while (!moved.test())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_FALSE(moved.pending());
  } else if (world().rank() == 1) {
    kernels::Buffer buffer = filled_buffer(5, -1, f64);
    comm::recv(world(), buffer, shape, 0);
    EXPECT_EQ(host_values(buffer), payload_of(0, 5));
  }
  comm::SendRequest nothing;
  EXPECT_FALSE(nothing.pending());
  EXPECT_TRUE(nothing.test());
  nothing.wait();
}

TEST(PointToPoint, LocalArgumentErrors) {
  const BufferKind f32{kernels::DType::f32, kernels::Device::cpu};
  kernels::Buffer buffer = filled_buffer(6, 0, f32);
  const std::vector<std::int64_t> wrong{4, 2};
  const std::vector<std::int64_t> right{6};
  const std::vector<std::int64_t> too_many(comm::kMaxTransferDims + 1, 1);
  const int other = (world().rank() + 1) % world().size();
  EXPECT_THROW(comm::send(world(), buffer, right, world().rank()), std::invalid_argument);
  EXPECT_THROW(comm::isend(world(), buffer, right, -1), std::invalid_argument);
  EXPECT_THROW(comm::send(world(), buffer, right, world().size()), std::invalid_argument);
  EXPECT_THROW(comm::recv(world(), buffer, right, -1), std::invalid_argument);
  if (world().size() > 1) {
    EXPECT_THROW(comm::send(world(), buffer, wrong, other), std::invalid_argument);
    EXPECT_THROW(comm::recv(world(), buffer, wrong, other), std::invalid_argument);
    kernels::Buffer one = filled_buffer(1, 0, f32);
    EXPECT_THROW(comm::send(world(), one, too_many, other), std::invalid_argument);
  }
  EXPECT_EQ(comm::shape_to_string(wrong), "[4, 2]");
  EXPECT_EQ(comm::shape_to_string({}), "[]");
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

TEST(PointToPoint, WaitingSleepsInsteadOfSpinning) {
  // Rank 0 waits 400 ms for rank 1. A spinning wait would burn about as much CPU as wall time;
  // the yielding wait (sleeps of up to 1 ms) must stay below a quarter of it.
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const BufferKind f32{kernels::DType::f32, kernels::Device::cpu};
  const std::vector<std::int64_t> shape{1};
  kernels::Buffer buffer = filled_buffer(1, 5, f32);
  if (world().rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    comm::send(world(), buffer, shape, 0);
  } else if (world().rank() == 0) {
    const auto wall_start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_seconds();
    comm::recv(world(), buffer, shape, 1);
    const double cpu = process_cpu_seconds() - cpu_start;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    EXPECT_GE(wall, 0.3);
    EXPECT_LT(cpu, 0.25 * wall) << "cpu " << cpu << " s during a wait of " << wall << " s";
  }
}

}  // namespace
}  // namespace mpitron::test
