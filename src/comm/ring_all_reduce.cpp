#include "comm/ring_all_reduce.h"

#include <mpi.h>

#include <algorithm>
#include <vector>

#include "comm/chunking.h"
#include "comm/errors.h"
#include "comm/mpi_util.h"
#include "comm/wait.h"

namespace mpitron::comm {

using kernels::Buffer;

namespace {

// Tag of the ring's messages, apart from point_to_point's header and payload tags.
constexpr int kRingTag = 7303;

// Chunk c of n elements cut into p: the first n % p chunks have one element more.
Range chunk(std::size_t n, std::size_t p, std::size_t c) {
  const std::size_t base = n / p, extra = n % p;
  return {c * base + std::min(c, extra), base + (c < extra ? 1 : 0)};
}

template <class T>
void reduce_into(T* into, const T* from, std::size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (std::size_t i = 0; i < count; ++i)
        into[i] += from[i];
      return;
    case ReduceOp::max:
      for (std::size_t i = 0; i < count; ++i)
        into[i] = std::max(into[i], from[i]);
      return;
    case ReduceOp::min:
      for (std::size_t i = 0; i < count; ++i)
        into[i] = std::min(into[i], from[i]);
      return;
  }
}

// One ring step: sends `send` of `buffer` to `next` while receiving `recv.count` elements from
// `prev` into `into` (at element offset `into_offset`), both as messages of at most the
// communicator's limit, then waits for all of them.
void exchange(const Communicator& comm, const Buffer& buffer, Range send, Buffer& into,
              std::size_t into_offset, Range recv, int next, int prev,
              std::vector<MPI_Request>& requests) {
  const std::size_t limit = comm.max_message_elements();
  const MPI_Datatype type = mpi_type(buffer.dtype());
  requests.clear();
  for (const Range& part : split_count(recv.count, limit)) {
    requests.push_back(MPI_REQUEST_NULL);
    check_mpi(MPI_Irecv(element(into, into_offset + part.offset), mpi_count(part.count), type, prev,
                        kRingTag, comm.native(), &requests.back()),
              "MPI_Irecv");
  }
  for (const Range& part : split_count(send.count, limit)) {
    requests.push_back(MPI_REQUEST_NULL);
    check_mpi(MPI_Isend(element(buffer, send.offset + part.offset), mpi_count(part.count), type,
                        next, kRingTag, comm.native(), &requests.back()),
              "MPI_Isend");
  }
  wait_all(comm, requests, {"all_reduce (ring)", -1, buffer.bytes()});
}

}  // namespace

bool uses_ring_all_reduce(const Communicator& comm, const Buffer& buffer) {
  return comm.size() > 1 && buffer.device() == kernels::Device::cpu &&
         kernels::is_floating(buffer.dtype()) && buffer.bytes() >= kRingAllReduceMinBytes &&
         buffer.numel() >= static_cast<std::size_t>(comm.size());
}

void ring_all_reduce(const Communicator& comm, Buffer& buffer, ReduceOp op) {
  const auto p = static_cast<std::size_t>(comm.size());
  const auto r = static_cast<std::size_t>(comm.rank());
  const int next = static_cast<int>((r + 1) % p), prev = static_cast<int>((r + p - 1) % p);
  const std::size_t n = buffer.numel();
  Buffer scratch(chunk(n, p, 0).count, buffer.dtype(), kernels::Device::cpu);
  std::vector<MPI_Request> requests;
  for (std::size_t s = 0; s + 1 < p; ++s) {
    const Range send = chunk(n, p, (r + p - s) % p), recv = chunk(n, p, (r + 2 * p - s - 1) % p);
    exchange(comm, buffer, send, scratch, 0, recv, next, prev, requests);
    kernels::dispatch(buffer.dtype(), [&](auto zero) {
      using T = decltype(zero);
      reduce_into(static_cast<T*>(element(buffer, recv.offset)),
                  static_cast<const T*>(element(scratch, 0)), recv.count, op);
    });
  }
  for (std::size_t s = 0; s + 1 < p; ++s) {
    const Range send = chunk(n, p, (r + 1 + p - s) % p), recv = chunk(n, p, (r + p - s) % p);
    exchange(comm, buffer, send, buffer, recv.offset, recv, next, prev, requests);
  }
}

}  // namespace mpitron::comm
