#include "comm/collective_steps.h"

#include <algorithm>

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

}  // namespace

void exchange(const Communicator& comm, const Buffer& buffer, Range send, int to, Buffer& into,
              Range recv, int from, std::vector<MPI_Request>& requests, const Operation& op,
              std::size_t eager_below) {
  post_exchange(comm, buffer, send, to, into, recv, from, requests, eager_below);
  wait_all(comm, requests, op);
}

void post_exchange(const Communicator& comm, const Buffer& buffer, Range send, int to, Buffer& into,
                   Range recv, int from, std::vector<MPI_Request>& requests,
                   std::size_t eager_below) {
  const MPI_Datatype type = mpi_type(buffer.dtype());
  requests.clear();
  const std::size_t recv_limit = piece_limit(comm, into.dtype(), recv.count, eager_below);
  const std::size_t receives = message_count(recv.count, recv_limit);
  for (std::size_t i = 0; i < receives; ++i) {
    const Range part = message_range(recv.count, recv_limit, i);
    requests.push_back(MPI_REQUEST_NULL);
    check_mpi(MPI_Irecv(element(into, recv.offset + part.offset), mpi_count(part.count), type, from,
                        kCollectiveTag, comm.native(), &requests.back()),
              "MPI_Irecv");
  }
  const std::size_t send_limit = piece_limit(comm, buffer.dtype(), send.count, eager_below);
  const std::size_t sends = message_count(send.count, send_limit);
  for (std::size_t i = 0; i < sends; ++i) {
    const Range part = message_range(send.count, send_limit, i);
    requests.push_back(MPI_REQUEST_NULL);
    check_mpi(MPI_Isend(element(buffer, send.offset + part.offset), mpi_count(part.count), type, to,
                        kCollectiveTag, comm.native(), &requests.back()),
              "MPI_Isend");
  }
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
  kernels::dispatch_any(dtype, [&](auto zero) {
    using T = decltype(zero);
    combine_typed(static_cast<T*>(out), static_cast<const T*>(first), static_cast<const T*>(second),
                  count, op);
  });
}

}  // namespace mpitron::comm
