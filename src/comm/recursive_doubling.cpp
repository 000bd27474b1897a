#include "comm/recursive_doubling.h"

#include <mpi.h>

#include <vector>

#include "comm/collective_steps.h"
#include "comm/staging.h"

namespace mpitron::comm {

using kernels::Buffer;

bool uses_recursive_doubling(const Communicator& comm, const Buffer& buffer) {
  return comm.size() > 1 && buffer.device() == kernels::Device::cpu && !buffer.empty() &&
         buffer.bytes() < kRecursiveDoublingMaxBytes && mpi_visible(comm, buffer);
}

void recursive_doubling_all_reduce(const Communicator& comm, Buffer& buffer, ReduceOp op) {
  const int p = comm.size(), r = comm.rank();
  int p2 = 1;
  while (p2 * 2 <= p)
    p2 *= 2;
  const int folded = p - p2;  // ranks 0, 2, .., 2 (folded - 1) sit out the doubling
  const std::size_t n = buffer.numel();
  const Range all{0, n}, none{0, 0};
  Buffer& scratch = comm.staging().workspace(Slot::recv, kernels::Device::cpu, buffer.dtype(), n);
  std::vector<MPI_Request> requests;
  const Operation operation{"all_reduce", -1, buffer.bytes()};
  void* mine = buffer.data();
  const void* theirs = scratch.data();
  if (r < 2 * folded) {
    if (r % 2 == 0) {
      exchange(comm, buffer, all, r + 1, scratch, none, MPI_PROC_NULL, requests, operation);
      exchange(comm, buffer, none, MPI_PROC_NULL, buffer, all, r + 1, requests, operation);
      return;
    }
    exchange(comm, buffer, none, MPI_PROC_NULL, scratch, all, r - 1, requests, operation);
    combine(buffer.dtype(), mine, theirs, mine, n, op);
  }
  const int number = r < 2 * folded ? r / 2 : r - folded;
  for (int bit = 1; bit < p2; bit <<= 1) {
    const int partner_number = number ^ bit;
    const int partner = partner_number < folded ? 2 * partner_number + 1 : partner_number + folded;
    exchange(comm, buffer, all, partner, scratch, all, partner, requests, operation);
    if (partner_number < number) {
      combine(buffer.dtype(), mine, theirs, mine, n, op);
    } else {
      combine(buffer.dtype(), mine, mine, theirs, n, op);
    }
  }
  if (r < 2 * folded) {
    exchange(comm, buffer, all, r - 1, scratch, none, MPI_PROC_NULL, requests, operation);
  }
}

}  // namespace mpitron::comm
