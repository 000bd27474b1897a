// irecv / RecvRequest: receives started before the peer sends deliver exact rank-valued data on
// every buffer kind (staged included), transfers of different tags complete whatever order their
// receives are started and finished in, a mismatch raises recv's one-line error (from wait or
// from test, also when the wait finds the header at its first poll) without touching the buffer
// and leaves the next transfer of that tag intact, more transfers in flight than a thread keeps
// spare message memory for stay apart, and tags outside [0, kMaxTransferTag] are rejected. The
// deadline of a receive whose peer never sends is the ctest comm_deadline_irecv_never_sent
// (fault_program.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/chunking.h"
#include "comm/collectives.h"
#include "comm/point_to_point.h"
#include "comm/transfer.h"
#include "comm_test_support.h"
#include "mpi_test_main.h"

namespace mpitron::test {
namespace {

using test::world;

// Transfer k from rank s carries s * 1000 + k * 100 + i.
std::vector<double> payload_of(int rank, int k, std::size_t count) {
  return numbered(rank * 1000.0 + k * 100.0, count);
}

using RecvRequestTest = BufferKindTest;

// Every rank starts its receive from the previous rank of the ring, then sends to the next one,
// polls its receive while "computing", and only then waits.
TEST_P(RecvRequestTest, ReceiveStartedBeforeTheSendDeliversEveryElement) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::vector<std::int64_t> shape{3, 7};
  SettingsGuard guard(world());
  for (std::size_t limit : message_limits()) {
    world().set_max_message_elements(limit);
    const auto [next, previous] = ring_neighbours(world());
    kernels::Buffer received = filled_buffer(21, -1, GetParam());
    comm::RecvRequest request = comm::irecv(world(), received, shape, previous, 9);
    EXPECT_TRUE(request.pending());
    const kernels::Buffer mine = make_buffer(payload_of(world().rank(), 9, 21), GetParam());
    comm::SendRequest sent = comm::isend(world(), mine, shape, next, 9);
    for (int poll = 0; poll < 3 && !request.test(); ++poll)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    request.wait();
    sent.wait();
    EXPECT_FALSE(request.pending());
    EXPECT_EQ(host_values(received), payload_of(previous, 9, 21)) << "message limit " << limit;
  }
}

// Rank 0 sends tags 5, 6 and 7 in that order; rank 1 starts their receives in the order 7, 5, 6
// and finishes them in the order 6, 7, 5 (tag 5 by polling). Payloads span several messages.
TEST_P(RecvRequestTest, TagsKeepTransfersApartInAnyOrder) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::vector<std::int64_t> shape{2, 5};
  SettingsGuard guard(world());
  world().set_max_message_elements(4);
  if (world().rank() == 0) {
    std::vector<kernels::Buffer> payloads;
    std::vector<comm::SendRequest> requests;
    for (int tag : {5, 6, 7}) {
      payloads.push_back(make_buffer(payload_of(0, tag, 10), GetParam()));
      requests.push_back(comm::isend(world(), payloads.back(), shape, 1, tag));
    }
    comm::wait_all(requests);
  } else if (world().rank() == 1) {
    std::vector<kernels::Buffer> buffers;
    for (int k = 0; k < 3; ++k)
      buffers.push_back(filled_buffer(10, -1, GetParam()));
    comm::RecvRequest seven = comm::irecv(world(), buffers[2], shape, 0, 7);
    comm::RecvRequest five = comm::irecv(world(), buffers[0], shape, 0, 5);
    comm::RecvRequest six = comm::irecv(world(), buffers[1], shape, 0, 6);
    six.wait();
    seven.wait();
    while (!five.test())
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    for (int tag : {5, 6, 7}) {
      EXPECT_EQ(host_values(buffers[static_cast<std::size_t>(tag - 5)]), payload_of(0, tag, 10))
          << "tag " << tag;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, RecvRequestTest, ::testing::ValuesIn(all_buffer_kinds()),
                         kind_name);

// The error text a rejected receive raises, or "accepted".
template <class Receive>
std::string rejection(Receive receive) {
  try {
    receive();
    return "accepted";
  } catch (const std::runtime_error& error) {
    return error.what();
  }
}

// Rank 0 sends, all with tag 3: [4, 3] (more elements than rank 1 expects, so its payload would
// overflow a receive posted for [3, 2]), [2, 3] float64, then the [3, 2] float32 rank 1 expects;
// and a [3, 2] with tag 4 in between. Rank 1 starts its first receives before rank 0 sends (the
// barrier and the pause make that the likely order).
TEST(RecvRequest, MismatchNamesBothShapesAndTheNextTransferOfTheTagArrives) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const BufferKind f32{kernels::DType::f32, kernels::Device::cpu};
  const BufferKind f64{kernels::DType::f64, kernels::Device::cpu};
  const std::vector<std::int64_t> expected{3, 2};
  SettingsGuard guard(world());
  for (std::size_t limit : {comm::kMaxMessageElements, std::size_t{4}}) {
    world().set_max_message_elements(limit);
    comm::barrier(world());
    if (world().rank() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const kernels::Buffer payloads[] = {
          make_buffer(payload_of(0, 1, 12), f32), make_buffer(payload_of(0, 2, 6), f32),
          make_buffer(payload_of(0, 3, 6), f64), make_buffer(payload_of(0, 4, 6), f32)};
      const std::vector<std::int64_t> bigger{4, 3}, transposed{2, 3};
      std::vector<comm::SendRequest> requests;
      requests.push_back(comm::isend(world(), payloads[0], bigger, 1, 3));
      requests.push_back(comm::isend(world(), payloads[1], expected, 1, 4));
      requests.push_back(comm::isend(world(), payloads[2], transposed, 1, 3));
      requests.push_back(comm::isend(world(), payloads[3], expected, 1, 3));
      comm::wait_all(requests);
    } else if (world().rank() == 1) {
      kernels::Buffer first = filled_buffer(6, -1, f32);
      kernels::Buffer other_tag = filled_buffer(6, -1, f32);
      comm::RecvRequest bigger = comm::irecv(world(), first, expected, 0, 3);
      comm::RecvRequest four = comm::irecv(world(), other_tag, expected, 0, 4);
      EXPECT_EQ(rejection([&] { bigger.wait(); }),
                "recv on the world communicator: rank 1 expected [3, 2] float32 from rank 0, but "
                "rank 0 sent [4, 3] float32");
      EXPECT_FALSE(bigger.pending());
      EXPECT_EQ(host_values(first), std::vector<double>(6, -1)) << "a rejected payload was written";
      comm::RecvRequest wider = comm::irecv(world(), first, expected, 0, 3);
      EXPECT_EQ(rejection([&] {
                  while (!wider.test())
                    std::this_thread::sleep_for(std::chrono::microseconds(100));
                }),
                "recv on the world communicator: rank 1 expected [3, 2] float32 from rank 0, but "
                "rank 0 sent [2, 3] float64");
      EXPECT_FALSE(wider.pending());
      EXPECT_EQ(host_values(first), std::vector<double>(6, -1)) << "a rejected payload was written";
      comm::recv(world(), first, expected, 0, 3);
      EXPECT_EQ(host_values(first), payload_of(0, 4, 6)) << "limit " << limit;
      four.wait();
      EXPECT_EQ(host_values(other_tag), payload_of(0, 2, 6)) << "limit " << limit;
    }
  }
}

// The header (and a payload that rides in it) is already there when rank 1 starts receiving, so
// the wait finds it at its first poll: a wrong shape is still rejected with recv's error, the
// payload (inline at 6 floats, its own message at 16 KiB) leaves the buffer alone, and the next
// transfer arrives intact.
TEST(RecvRequest, AMismatchFoundAtTheFirstPollIsReported) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const BufferKind f32{kernels::DType::f32, kernels::Device::cpu};
  for (const std::int64_t rows : {2, 2048}) {
    const std::vector<std::int64_t> sent{rows, 3}, expected{3, rows};
    const auto count = static_cast<std::size_t>(rows * 3);
    std::vector<comm::SendRequest> requests;
    const kernels::Buffer wrong = make_buffer(payload_of(0, 1, count), f32);
    const kernels::Buffer right = make_buffer(payload_of(0, 2, count), f32);
    if (world().rank() == 0) {
      requests.push_back(comm::isend(world(), wrong, sent, 1));
      requests.push_back(comm::isend(world(), right, expected, 1));
    }
    comm::barrier(world());
    if (world().rank() == 1) {
      kernels::Buffer buffer = filled_buffer(count, -1, f32);
      EXPECT_EQ(rejection([&] { comm::recv(world(), buffer, expected, 0); }),
                "recv on the world communicator: rank 1 expected " +
                    comm::shape_to_string(expected) + " float32 from rank 0, but rank 0 sent " +
                    comm::shape_to_string(sent) + " float32");
      EXPECT_EQ(host_values(buffer), std::vector<double>(count, -1))
          << "a rejected payload was written";
      comm::recv(world(), buffer, expected, 0);
      EXPECT_EQ(host_values(buffer), payload_of(0, 2, count)) << rows << " rows";
    }
    comm::wait_all(requests);
  }
}

// Header messages a sender could never make are rejected as malformed before anything is copied:
// one whose inline bytes exceed its own shape (12 bytes for [2] float32), and one that claims the
// 8 inline bytes of [2] float32 but ends after the header. The next transfer of the tag then
// arrives intact.
TEST(RecvRequest, HeaderMessagesThatContradictThemselvesAreMalformed) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const BufferKind f32{kernels::DType::f32, kernels::Device::cpu};
  const std::vector<std::int64_t> shape{2};
  constexpr int kTag = 5;
  struct Lie {
    std::size_t claimed_bytes, sent_bytes;
  };
  for (const Lie lie : {Lie{12, 16}, Lie{8, 0}}) {
    if (world().rank() == 0) {
      const comm::transfer::Header header = comm::transfer::Header::describe(
          shape, kernels::DType::f32, comm::kMaxMessageElements, lie.claimed_bytes);
      std::vector<std::int64_t> message(header.words.begin(), header.words.end());
      message.resize(message.size() + lie.sent_bytes / sizeof(std::int64_t), 0);
      ASSERT_EQ(MPI_Send(message.data(), static_cast<int>(message.size() * sizeof(std::int64_t)),
                         MPI_BYTE, 1, comm::transfer::header_tag(kTag), world().native()),
                MPI_SUCCESS);
      comm::send(world(), make_buffer(payload_of(0, 1, 2), f32), shape, 1, kTag);
    } else if (world().rank() == 1) {
      kernels::Buffer buffer = filled_buffer(2, -1, f32);
      EXPECT_EQ(rejection([&] { comm::recv(world(), buffer, shape, 0, kTag); }),
                "recv on the world communicator: rank 1 expected [2] float32 from rank 0, but "
                "received a malformed header")
          << lie.claimed_bytes << " bytes claimed, " << lie.sent_bytes << " sent";
      EXPECT_EQ(host_values(buffer), std::vector<double>(2, -1))
          << "a rejected payload was written";
      comm::recv(world(), buffer, shape, 0, kTag);
      EXPECT_EQ(host_values(buffer), payload_of(0, 1, 2));
    }
  }
}

// More transfers in flight at once than a thread keeps spare header messages for (4), inline
// (1 KiB) and not (16 KiB: an inline head and four eager pieces), received in the reverse order,
// three rounds (the later ones reuse the spares): each keeps its own memory.
TEST(RecvRequest, ManyTransfersInFlightEachKeepTheirOwnMessages) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const BufferKind f32{kernels::DType::f32, kernels::Device::cpu};
  constexpr int kInFlight = 7;
  const auto count = [](int k) -> std::size_t { return k % 2 == 0 ? 256 : 4096; };
  for (int round = 0; round < 3; ++round) {
    if (world().rank() == 0) {
      std::vector<kernels::Buffer> payloads;
      std::vector<comm::SendRequest> requests;
      for (int k = 0; k < kInFlight; ++k) {
        payloads.push_back(make_buffer(payload_of(round, k, count(k)), f32));
        const std::vector<std::int64_t> shape{static_cast<std::int64_t>(count(k))};
        requests.push_back(comm::isend(world(), payloads.back(), shape, 1, k));
      }
      comm::wait_all(requests);
    } else if (world().rank() == 1) {
      std::vector<kernels::Buffer> buffers;
      std::vector<comm::RecvRequest> requests;
      for (int k = 0; k < kInFlight; ++k)
        buffers.push_back(filled_buffer(count(k), -1, f32));
      for (int k = 0; k < kInFlight; ++k) {
        const std::vector<std::int64_t> shape{static_cast<std::int64_t>(count(k))};
        requests.push_back(comm::irecv(world(), buffers[k], shape, 0, k));
      }
      for (int k = kInFlight - 1; k >= 0; --k) {
        requests[k].wait();
        EXPECT_EQ(host_values(buffers[k]), payload_of(round, k, count(k)))
            << "round " << round << ", transfer " << k;
      }
    }
  }
}

// Destroying a pending request waits for it; assigning over one finishes the old one first.
TEST(RecvRequest, DestroyingOrReplacingAPendingRequestCompletesIt) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const BufferKind f64{kernels::DType::f64, kernels::Device::cpu};
  const std::vector<std::int64_t> shape{4};
  if (world().rank() == 0) {
    for (int k = 0; k < 3; ++k)
      comm::send(world(), make_buffer(payload_of(0, k, 4), f64), shape, 1, k);
  } else if (world().rank() == 1) {
    kernels::Buffer a = filled_buffer(4, -1, f64), b = filled_buffer(4, -1, f64);
    kernels::Buffer c = filled_buffer(4, -1, f64);
    { const comm::RecvRequest scoped = comm::irecv(world(), a, shape, 0, 0); }
    EXPECT_EQ(host_values(a), payload_of(0, 0, 4));
    comm::RecvRequest request = comm::irecv(world(), b, shape, 0, 1);
    request = comm::irecv(world(), c, shape, 0, 2);
    EXPECT_EQ(host_values(b), payload_of(0, 1, 4));
    comm::RecvRequest moved = std::move(request);
    EXPECT_FALSE(request.pending());
    moved.wait();
    EXPECT_EQ(host_values(c), payload_of(0, 2, 4));
  }
  comm::RecvRequest nothing;
  EXPECT_FALSE(nothing.pending());
  EXPECT_TRUE(nothing.test());
  nothing.wait();
}

TEST(RecvRequest, TagsOutsideTheRangeAreRejected) {
  const BufferKind f32{kernels::DType::f32, kernels::Device::cpu};
  kernels::Buffer buffer = filled_buffer(2, 0, f32);
  const std::vector<std::int64_t> shape{2};
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int other = world().rank() == 0 ? 1 : 0;
  for (int tag : {-1, comm::kMaxTransferTag + 1}) {
    EXPECT_THROW(comm::irecv(world(), buffer, shape, other, tag), std::invalid_argument);
    EXPECT_THROW(comm::isend(world(), buffer, shape, other, tag), std::invalid_argument);
  }
  // The largest tag works (its MPI tags are the highest the comm layer uses).
  if (world().rank() < 2) {
    const kernels::Buffer mine = make_buffer({7.0 + world().rank(), 9.0}, f32);
    comm::SendRequest sent = comm::isend(world(), mine, shape, other, comm::kMaxTransferTag);
    comm::recv(world(), buffer, shape, other, comm::kMaxTransferTag);
    sent.wait();
    EXPECT_EQ(host_values(buffer), (std::vector<double>{7.0 + other, 9.0}));
  }
}

}  // namespace
}  // namespace mpitron::test
