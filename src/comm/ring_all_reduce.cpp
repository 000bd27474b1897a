#include "comm/ring_all_reduce.h"

#include <mpi.h>

#include <algorithm>
#include <vector>

#include "comm/collective_steps.h"
#include "comm/mpi_util.h"

namespace mpitron::comm {

using kernels::Buffer;

namespace {

// Chunk c of n elements cut into p: the first n % p chunks have one element more.
Range chunk(std::size_t n, std::size_t p, std::size_t c) {
  const std::size_t base = n / p, extra = n % p;
  return {c * base + std::min(c, extra), base + (c < extra ? 1 : 0)};
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
  const Operation operation{"all_reduce (ring)", -1, buffer.bytes()};
  for (std::size_t s = 0; s + 1 < p; ++s) {
    const Range send = chunk(n, p, (r + p - s) % p), recv = chunk(n, p, (r + 2 * p - s - 1) % p);
    exchange(comm, buffer, send, next, scratch, {0, recv.count}, prev, requests, operation);
    void* own = element(buffer, recv.offset);
    combine(buffer.dtype(), own, own, element(scratch, 0), recv.count, op);
  }
  for (std::size_t s = 0; s + 1 < p; ++s) {
    const Range send = chunk(n, p, (r + 1 + p - s) % p), recv = chunk(n, p, (r + p - s) % p);
    exchange(comm, buffer, send, next, buffer, recv, prev, requests, operation);
  }
}

}  // namespace mpitron::comm
