#include "comm/p2p_gather_scatter.h"

#include <mpi.h>

#include <cstring>
#include <vector>

#include "comm/butterfly.h"
#include "comm/collective_steps.h"
#include "comm/mpi_util.h"
#include "comm/staging.h"
#include "kernels/fault_injection.h"

namespace mpitron::comm {

using kernels::Buffer;

bool uses_p2p_reduce_scatter(const Communicator& comm, const Buffer& buffer) {
  return comm.size() > 1 && buffer.device() == kernels::Device::cpu && mpi_visible(comm, buffer);
}

void p2p_all_gather(const Communicator& comm, const Buffer& in, std::size_t in_offset, Buffer& out,
                    std::size_t out_offset, std::size_t count, Algorithm algorithm,
                    const Operation& op) {
  const auto p = static_cast<std::size_t>(comm.size());
  const std::size_t block_bytes = count * kernels::dtype_size(in.dtype());
  if (algorithm == Algorithm::recursive_doubling) {
    doubling_all_gather(comm, in, in_offset, out, out_offset, p * count,
                        kEagerPiecesBelowBytesForCopies, op);
    return;
  }
  const auto r = static_cast<std::size_t>(comm.rank());
  const int next = static_cast<int>((r + 1) % p), prev = static_cast<int>((r + p - 1) % p);
  // Step s passes block r - s to rank r + 1 and takes block r - s - 1 from rank r - 1.
  const auto block = [&](std::size_t q) { return Range{out_offset + (q % p) * count, count}; };
  // This rank's block is copied before the exchanges start (see doubling_all_gather); step 0
  // sends it from `in`.
  std::memcpy(element(out, block(r).offset), element(in, in_offset), block_bytes);
  std::vector<MPI_Request> requests;
  for (std::size_t s = 0; s + 1 < p; ++s) {
    const Buffer& source = s == 0 ? in : out;
    const Range sent = s == 0 ? Range{in_offset, count} : block(r + p - s);
    const std::size_t wrong = kernels::fault_active(kernels::Fault::ring_all_gather_wrong_block);
    exchange(comm, source, sent, next, out, block(r + 2 * p - s - 1 - wrong), prev, requests, op,
             kEagerPiecesBelowBytesForCopies);
  }
}

void p2p_reduce_scatter(const Communicator& comm, const Buffer& in, std::size_t in_offset,
                        Buffer& out, std::size_t out_offset, std::size_t count, ReduceOp op,
                        Algorithm algorithm, const Operation& wait_op) {
  const auto p = static_cast<std::size_t>(comm.size());
  if (algorithm == Algorithm::recursive_halving) {
    halving_reduce_scatter(comm, in, in_offset, p * count, out, out_offset, op, wait_op);
    return;
  }
  const auto r = static_cast<std::size_t>(comm.rank());
  const int next = static_cast<int>((r + 1) % p), prev = static_cast<int>((r + p - 1) % p);
  const auto own = [&](std::size_t q) { return in_offset + (q % p) * count; };
  // Step s sends the partial result of step s - 1 while the next one is combined into the other
  // half, so no piece is overwritten before it has been sent.
  Buffer partials(p > 2 ? 2 * count : 0, in.dtype(), kernels::Device::cpu);
  std::vector<MPI_Request> requests;
  for (std::size_t s = 0; s + 1 < p; ++s) {
    const std::size_t sent = r + 2 * p - 1 - s, arriving = r + 2 * p - 2 - s;
    const bool last = s + 2 == p;
    const Buffer& source = s == 0 ? in : partials;
    const std::size_t source_offset = s == 0 ? own(sent) : (s - 1) % 2 * count;
    exchange_and_combine(comm, source, {source_offset, count}, next, prev,
                         {&in, own(arriving), last ? &out : &partials,
                          last ? out_offset : s % 2 * count, count, false, op},
                         requests, wait_op);
  }
}

}  // namespace mpitron::comm
