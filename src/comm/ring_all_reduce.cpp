#include "comm/ring_all_reduce.h"

#include <mpi.h>

#include <algorithm>
#include <vector>

#include "comm/algorithm_table.h"
#include "comm/butterfly.h"
#include "comm/collective_steps.h"
#include "comm/mpi_util.h"
#include "kernels/fault_injection.h"

namespace mpitron::comm {

using kernels::Buffer;

bool uses_ring_all_reduce(const Communicator& comm, const Buffer& buffer) {
  return uses_large_all_reduce(comm, buffer) && !uses_rabenseifner_all_reduce(comm, buffer);
}

bool uses_large_all_reduce(const Communicator& comm, const Buffer& buffer) {
  return comm.size() > 1 && buffer.device() == kernels::Device::cpu &&
         reduces_in_floating_point(buffer.dtype()) && buffer.bytes() >= kRingAllReduceMinBytes &&
         buffer.numel() >= static_cast<std::size_t>(comm.size());
}

void ring_all_reduce(const Communicator& comm, Buffer& buffer, ReduceOp op) {
  const auto p = static_cast<std::size_t>(comm.size());
  const auto r = static_cast<std::size_t>(comm.rank());
  const int next = static_cast<int>((r + 1) % p), prev = static_cast<int>((r + p - 1) % p);
  const std::size_t n = buffer.numel();
  std::vector<MPI_Request> requests;
  const Operation operation{"all_reduce (ring)", -1, buffer.bytes()};
  for (std::size_t s = 0; s + 1 < p; ++s) {
    const Range send = even_chunks(n, p, (r + p - s) % p),
                recv = even_chunks(n, p, (r + 2 * p - s - 1) % p);
    if (kernels::fault_active(kernels::Fault::ring_all_reduce_overwrites)) {
      exchange(comm, buffer, send, next, buffer, recv, prev, requests, operation);
      continue;
    }
    exchange_and_combine(comm, buffer, send, next, prev,
                         {&buffer, recv.offset, &buffer, recv.offset, recv.count, false, op},
                         requests, operation);
  }
  for (std::size_t s = 0; s + 1 < p; ++s) {
    const Range send = even_chunks(n, p, (r + 1 + p - s) % p),
                recv = even_chunks(n, p, (r + p - s) % p);
    exchange(comm, buffer, send, next, buffer, recv, prev, requests, operation);
  }
}

}  // namespace mpitron::comm
