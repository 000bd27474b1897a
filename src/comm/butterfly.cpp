#include "comm/butterfly.h"

#include <mpi.h>

#include <cstring>
#include <vector>

#include "comm/collective_steps.h"
#include "comm/mpi_util.h"
#include "comm/ring_all_reduce.h"

namespace mpitron::comm {

using kernels::Buffer;

bool is_butterfly_group(const Communicator& comm) {
  const int p = comm.size();
  return p > 1 && (p & (p - 1)) == 0;
}

bool uses_rabenseifner_all_reduce(const Communicator& comm, const Buffer& buffer) {
  return is_butterfly_group(comm) && uses_large_all_reduce(comm, buffer) &&
         buffer.bytes() < kRabenseifnerMaxBytes;
}

namespace {

// Where element g of the [n] buffer lives: (*buffer)[offset + g - origin].
struct Place {
  const Buffer* buffer = nullptr;
  std::size_t offset = 0;
  std::size_t origin = 0;

  std::size_t at(std::size_t g) const { return offset + g - origin; }
};

}  // namespace

void halving_reduce_scatter(const Communicator& comm, const Buffer& in, std::size_t in_offset,
                            std::size_t n, Buffer& out, std::size_t out_offset, ReduceOp op,
                            const Operation& wait_op) {
  const auto p = static_cast<std::size_t>(comm.size());
  const auto r = static_cast<std::size_t>(comm.rank());
  const Range own = even_chunks(n, p, r);
  const bool in_place = &in == &out && out_offset == in_offset + own.offset;
  const std::size_t half = even_chunks(n, p, 0, p / 2).count;  // the most a step keeps
  // The partial results between the first and the last step, unless they stay in place.
  Buffer held(in_place || p == 2 ? 0 : half, in.dtype(), kernels::Device::cpu);
  std::vector<MPI_Request> requests;
  Place source{&in, in_offset, 0};
  std::size_t low = 0;  // the first chunk of the 2d held
  for (std::size_t d = p / 2; d >= 1; d /= 2) {
    const std::size_t partner = r ^ d;
    const std::size_t kept = (r & d) != 0 ? low + d : low, given = (r & d) != 0 ? low : low + d;
    const Range keep = even_chunks(n, p, kept, d), give = even_chunks(n, p, given, d);
    const bool last = d == 1 || in_place;
    Buffer& target_buffer = last ? out : held;
    const Place target = last                     ? Place{&out, out_offset, own.offset}
                         : source.buffer == &held ? source
                                                  : Place{&held, 0, keep.offset};
    exchange_and_combine(comm, *source.buffer, {source.at(give.offset), give.count},
                         static_cast<int>(partner), static_cast<int>(partner),
                         {source.buffer, source.at(keep.offset), &target_buffer,
                          target.at(keep.offset), keep.count, partner < r, op},
                         requests, wait_op);
    source = target;
    low = kept;
  }
}

void doubling_all_gather(const Communicator& comm, const Buffer& in, std::size_t in_offset,
                         Buffer& out, std::size_t out_offset, std::size_t n,
                         std::size_t eager_below, const Operation& wait_op) {
  const auto p = static_cast<std::size_t>(comm.size());
  const auto r = static_cast<std::size_t>(comm.rank());
  // The 2^s chunks rank q holds before step s, as a range of `out`.
  const auto held = [&](std::size_t q, std::size_t s) {
    const std::size_t bit = std::size_t{1} << s;
    const Range chunks = even_chunks(n, p, q & ~(bit - 1), bit);
    return Range{out_offset + chunks.offset, chunks.count};
  };
  const Range own = held(r, 0);
  // This rank's chunk is copied before the first exchange, not while it is in flight: 256 KiB
  // all_gather on 2 ranks 1.13-1.19 -> 1.00 of MPI_Allgather's time (bench comm, three runs
  // each), no change from 1 MiB on or on 3 and 4 ranks. Step 0 still sends it from `in`.
  void* copy = element(out, own.offset);
  const void* original = element(in, in_offset);
  if (copy != original) std::memcpy(copy, original, own.count * kernels::dtype_size(in.dtype()));
  std::vector<MPI_Request> requests;
  for (std::size_t s = 0; (std::size_t{1} << s) < p; ++s) {
    const int peer = static_cast<int>(r ^ (std::size_t{1} << s));
    const Buffer& source = s == 0 ? in : out;
    const Range sent = s == 0 ? Range{in_offset, own.count} : held(r, s);
    exchange(comm, source, sent, peer, out, held(r ^ (std::size_t{1} << s), s), peer, requests,
             wait_op, eager_below);
  }
}

void rabenseifner_all_reduce(const Communicator& comm, Buffer& buffer, ReduceOp op) {
  const std::size_t n = buffer.numel();
  const Range own =
      even_chunks(n, static_cast<std::size_t>(comm.size()), static_cast<std::size_t>(comm.rank()));
  const Operation operation{"all_reduce (rabenseifner)", -1, buffer.bytes()};
  halving_reduce_scatter(comm, buffer, 0, n, buffer, own.offset, op, operation);
  doubling_all_gather(comm, buffer, own.offset, buffer, 0, n, kEagerPiecesBelowBytes, operation);
}

}  // namespace mpitron::comm
