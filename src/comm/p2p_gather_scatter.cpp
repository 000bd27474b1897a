#include "comm/p2p_gather_scatter.h"

#include <mpi.h>

#include <bit>
#include <cstring>
#include <vector>

#include "comm/collective_steps.h"
#include "comm/mpi_util.h"
#include "comm/staging.h"

namespace mpitron::comm {

using kernels::Buffer;

bool uses_p2p_all_gather(const Communicator& comm, const Buffer& image) {
  return comm.size() > 1 && image.device() == kernels::Device::cpu;
}

bool uses_p2p_reduce_scatter(const Communicator& comm, const Buffer& buffer) {
  return comm.size() > 1 && buffer.device() == kernels::Device::cpu && mpi_visible(comm, buffer);
}

void p2p_all_gather(const Communicator& comm, const Buffer& in, std::size_t in_offset, Buffer& out,
                    std::size_t out_offset, std::size_t count, const Operation& op) {
  const auto p = static_cast<std::size_t>(comm.size());
  const auto r = static_cast<std::size_t>(comm.rank());
  const bool doubling = (p & (p - 1)) == 0;
  const auto block = [&](std::size_t q) { return Range{out_offset + (q % p) * count, count}; };
  // Step s: doubling exchanges the 2^s blocks held with rank r xor 2^s; the ring passes block
  // r - s to rank r + 1 and takes block r - s - 1 from rank r - 1.
  const auto peer = [&](std::size_t s, bool to) {
    if (doubling) return static_cast<int>(r ^ (std::size_t{1} << s));
    return static_cast<int>(to ? (r + 1) % p : (r + p - 1) % p);
  };
  const auto sent = [&](std::size_t q, std::size_t s) {
    if (!doubling) return block(q + p - s);
    const std::size_t bit = std::size_t{1} << s;
    return Range{block(q & ~(bit - 1)).offset, bit * count};
  };
  const auto received = [&](std::size_t s) {
    return doubling ? sent(r ^ (std::size_t{1} << s), s) : block(r + 2 * p - s - 1);
  };
  std::vector<MPI_Request> requests;
  // Step 0 sends this rank's block from `in` (not from the copy just written into `out`, which
  // the peer would read out of this core's cache) while the block is copied.
  post_exchange(comm, in, {in_offset, count}, peer(0, true), out, received(0), peer(0, false),
                requests, kEagerPiecesBelowBytesForCopies);
  std::memcpy(element(out, block(r).offset), element(in, in_offset),
              count * kernels::dtype_size(in.dtype()));
  wait_all(comm, requests, op);
  const std::size_t steps = doubling ? static_cast<std::size_t>(std::countr_zero(p)) : p - 1;
  for (std::size_t s = 1; s < steps; ++s) {
    exchange(comm, out, sent(r, s), peer(s, true), out, received(s), peer(s, false), requests, op);
  }
}

namespace {

// Recursive halving on a power-of-two p (see p2p_reduce_scatter): the half of the held range
// without rank r goes to rank r xor d, the other half is combined with what arrives.
void reduce_scatter_by_halving(const Communicator& comm, const Buffer& in, std::size_t in_offset,
                               Buffer& out, std::size_t out_offset, std::size_t count, ReduceOp op,
                               const Operation& wait_op) {
  const auto p = static_cast<std::size_t>(comm.size());
  const auto r = static_cast<std::size_t>(comm.rank());
  Buffer received(p / 2 * count, in.dtype(), kernels::Device::cpu);
  Buffer held(p > 2 ? p / 2 * count : 0, in.dtype(), kernels::Device::cpu);  // partials
  std::vector<MPI_Request> requests;
  const Buffer* source = &in;  // block b of the held range at source_offset + (b - low) * count
  std::size_t source_offset = in_offset, low = 0;
  for (std::size_t d = p / 2; d >= 1; d /= 2) {
    const std::size_t partner = r ^ d;
    const std::size_t kept = (r & d) != 0 ? low + d : low, given = (r & d) != 0 ? low : low + d;
    exchange(comm, *source, {source_offset + (given - low) * count, d * count},
             static_cast<int>(partner), received, {0, d * count}, static_cast<int>(partner),
             requests, wait_op);
    const void* mine = element(*source, source_offset + (kept - low) * count);
    void* target = d == 1 ? element(out, out_offset) : held.data();
    const bool partner_first = partner < r;
    combine(in.dtype(), target, partner_first ? received.data() : mine,
            partner_first ? mine : received.data(), d * count, op);
    source = &held;
    source_offset = 0;
    low = kept;
  }
}

}  // namespace

void p2p_reduce_scatter(const Communicator& comm, const Buffer& in, std::size_t in_offset,
                        Buffer& out, std::size_t out_offset, std::size_t count, ReduceOp op,
                        const Operation& wait_op) {
  const auto p = static_cast<std::size_t>(comm.size());
  if ((p & (p - 1)) == 0) {
    reduce_scatter_by_halving(comm, in, in_offset, out, out_offset, count, op, wait_op);
    return;
  }
  const auto r = static_cast<std::size_t>(comm.rank());
  const int next = static_cast<int>((r + 1) % p), prev = static_cast<int>((r + p - 1) % p);
  const auto own = [&](std::size_t q) { return in_offset + (q % p) * count; };
  Buffer received(count, in.dtype(), kernels::Device::cpu);
  Buffer partial(count, in.dtype(), kernels::Device::cpu);  // what this rank sends next
  std::vector<MPI_Request> requests;
  for (std::size_t s = 0; s + 1 < p; ++s) {
    const std::size_t sent = r + 2 * p - 1 - s, arriving = r + 2 * p - 2 - s;
    if (s == 0) {
      exchange(comm, in, {own(sent), count}, next, received, {0, count}, prev, requests, wait_op);
    } else {
      exchange(comm, partial, {0, count}, next, received, {0, count}, prev, requests, wait_op);
    }
    void* target = s + 2 == p ? element(out, out_offset) : partial.data();
    combine(in.dtype(), target, element(in, own(arriving)), received.data(), count, op);
  }
}

}  // namespace mpitron::comm
