#include "comm/collective_steps.h"

#include <algorithm>
#include <array>

#include "comm/errors.h"
#include "comm/mpi_util.h"

namespace mpitron::comm {

using kernels::Buffer;

namespace {

// The most elements one message of a `count`-element transfer carries (see exchange).
std::size_t piece_limit(const Communicator& comm, kernels::DType dtype, std::size_t count,
                        std::size_t eager_below) {
  const std::size_t element_bytes = kernels::dtype_size(dtype);
  if (count * element_bytes >= eager_below) return comm.max_message_elements();
  return std::min(comm.max_message_elements(), kEagerMessageBytes / element_bytes);
}

// Appends one request per message of the `range.count`-element transfer at `range.offset`, cut
// at `limit` elements; start(offset, count, request) posts each one.
template <class Start>
void post_messages(Range range, std::size_t limit, std::vector<MPI_Request>& requests,
                   Start start) {
  const std::size_t messages = message_count(range.count, limit);
  for (std::size_t i = 0; i < messages; ++i) {
    const Range part = message_range(range.count, limit, i);
    requests.push_back(MPI_REQUEST_NULL);
    start(range.offset + part.offset, part.count, requests.back());
  }
}

}  // namespace

void exchange(const Communicator& comm, const Buffer& buffer, Range send, int to, Buffer& into,
              Range recv, int from, std::vector<MPI_Request>& requests, const Operation& op,
              std::size_t eager_below) {
  const MPI_Datatype type = mpi_type(buffer.dtype());
  requests.clear();
  post_messages(recv, piece_limit(comm, into.dtype(), recv.count, eager_below), requests,
                [&](std::size_t offset, std::size_t count, MPI_Request& request) {
                  check_mpi(MPI_Irecv(element(into, offset), mpi_count(count), type, from,
                                      kCollectiveTag, comm.native(), &request),
                            "MPI_Irecv");
                });
  post_messages(send, piece_limit(comm, buffer.dtype(), send.count, eager_below), requests,
                [&](std::size_t offset, std::size_t count, MPI_Request& request) {
                  check_mpi(MPI_Isend(element(buffer, offset), mpi_count(count), type, to,
                                      kCollectiveTag, comm.native(), &request),
                            "MPI_Isend");
                });
  wait_all(comm, requests, op);
}

namespace {

// The most elements one message of a `count`-element transfer that its receiver combines
// carries (see exchange_and_combine).
std::size_t combine_piece_limit(const Communicator& comm, kernels::DType dtype, std::size_t count) {
  const std::size_t element_bytes = kernels::dtype_size(dtype);
  if (count * element_bytes < kCombinePiecesFromBytes) {
    return piece_limit(comm, dtype, count, kEagerPiecesBelowBytes);
  }
  return std::min(comm.max_message_elements(), kCombinePieceBytes / element_bytes);
}

}  // namespace

void exchange_and_combine(const Communicator& comm, const Buffer& buffer, Range send, int to,
                          int from, const Combination& combination,
                          std::vector<MPI_Request>& requests, const Operation& op) {
  const kernels::DType dtype = buffer.dtype();
  const MPI_Datatype type = mpi_type(dtype);
  const std::size_t count = combination.count;
  const std::size_t limit = combine_piece_limit(comm, dtype, count);
  const bool on_arrival = count * kernels::dtype_size(dtype) >= kCombinePiecesFromBytes;
  // All pieces land in `scratch` at once, or in turn in its two halves.
  Buffer scratch(on_arrival ? 2 * limit : count, dtype, kernels::Device::cpu);
  const auto receive = [&](std::size_t offset, std::size_t n, MPI_Request& request) {
    check_mpi(MPI_Irecv(element(scratch, offset), mpi_count(n), type, from, kCollectiveTag,
                        comm.native(), &request),
              "MPI_Irecv");
  };
  const auto combine_into = [&](std::size_t offset, const void* theirs, std::size_t n) {
    const void* mine = element(*combination.mine, combination.mine_offset + offset);
    combine(dtype, element(*combination.target, combination.target_offset + offset),
            combination.theirs_first ? theirs : mine, combination.theirs_first ? mine : theirs, n,
            combination.op);
  };
  requests.clear();
  if (!on_arrival) post_messages({0, count}, limit, requests, receive);
  post_messages(send, combine_piece_limit(comm, dtype, send.count), requests,
                [&](std::size_t offset, std::size_t n, MPI_Request& request) {
                  check_mpi(MPI_Isend(element(buffer, offset), mpi_count(n), type, to,
                                      kCollectiveTag, comm.native(), &request),
                            "MPI_Isend");
                });
  if (!on_arrival) {
    wait_all(comm, requests, op);
    combine_into(0, scratch.data(), count);
    return;
  }
  const std::size_t pieces = message_count(count, limit);
  std::array<MPI_Request, 2> arriving{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  const auto post_piece = [&](std::size_t i) {
    receive(i % 2 * limit, message_range(count, limit, i).count, arriving[i % 2]);
  };
  post_piece(0);
  post_piece(1);
  for (std::size_t i = 0; i < pieces; ++i) {
    wait_one(comm, arriving[i % 2], op);
    const Range piece = message_range(count, limit, i);
    combine_into(piece.offset, element(scratch, i % 2 * limit), piece.count);
    if (i + 2 < pieces) post_piece(i + 2);
  }
  wait_all(comm, requests, op);
}

namespace {

template <class T>
void combine_typed(T* out, const T* first, const T* second, std::size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (std::size_t i = 0; i < count; ++i)
        out[i] = first[i] + second[i];
      return;
    case ReduceOp::max:
      for (std::size_t i = 0; i < count; ++i)
        out[i] = std::max(first[i], second[i]);
      return;
    case ReduceOp::min:
      for (std::size_t i = 0; i < count; ++i)
        out[i] = std::min(first[i], second[i]);
      return;
  }
}

}  // namespace

void combine(kernels::DType dtype, void* out, const void* first, const void* second,
             std::size_t count, ReduceOp op) {
  if (dtype == kernels::DType::bf16) {
    combine_bf16(static_cast<kernels::bf16*>(out), static_cast<const kernels::bf16*>(first),
                 static_cast<const kernels::bf16*>(second), count, op);
    return;
  }
  kernels::dispatch_any(dtype, [&](auto zero) {
    using T = decltype(zero);
    combine_typed(static_cast<T*>(out), static_cast<const T*>(first), static_cast<const T*>(second),
                  count, op);
  });
}

}  // namespace mpitron::comm
