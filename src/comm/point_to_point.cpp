#include "comm/point_to_point.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "comm/eager.h"
#include "comm/errors.h"
#include "comm/mpi_util.h"
#include "comm/staging.h"
#include "comm/traffic.h"
#include "comm/transfer.h"

namespace mpitron::comm {

using kernels::Buffer;
using transfer::Header;

std::string shape_to_string(std::span<const std::int64_t> shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  }
  return text + "]";
}

struct SendRequest::State {
  Communicator comm;  // kept for the deadline message; shares the MPI communicator
  int peer = -1;
  std::size_t bytes = 0;
  Header header;
  transfer::MessageMemory message;  // the header and an inline payload (transfer.h), else empty
  Buffer staged;                    // the payload's host copy when it is staged, else empty
  transfer::Requests requests;
};

SendRequest::SendRequest() = default;
SendRequest::SendRequest(std::unique_ptr<State> state) : state_(std::move(state)) {}
SendRequest::SendRequest(SendRequest&& other) noexcept = default;

SendRequest& SendRequest::operator=(SendRequest&& other) noexcept {
  SendRequest previous(std::move(*this));  // finished by its destructor
  state_ = std::move(other.state_);
  return *this;
}

SendRequest::~SendRequest() {
  if (!pending()) return;
  if (std::uncaught_exceptions() == 0) {
    try {
      wait();
      return;
    } catch (const MpiError&) {
      // released below, as while unwinding
    }
  }
  for (MPI_Request& request : state_->requests.all()) {
    if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  }
  transfer::keep_forever(std::move(state_));  // MPI may still read the header and staged copy
}

bool SendRequest::test() {
  if (!pending()) return true;
  int done = 0;
  const std::span<MPI_Request> requests = state_->requests.all();
  check_mpi(
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
      "MPI_Testall");
  if (done != 0) state_.reset();
  return done != 0;
}

void SendRequest::wait() {
  if (!pending()) return;
  wait_all(state_->comm, state_->requests.all(), Operation{"send to", state_->peer, state_->bytes});
  state_.reset();
}

void wait_all(std::span<SendRequest> requests) {
  for (SendRequest& request : requests)
    request.wait();
}

SendRequest isend(const Communicator& comm, const Buffer& buffer,
                  std::span<const std::int64_t> shape, int dst, int tag) {
  transfer::check_arguments("send", comm, buffer, shape, dst, tag);
  count_traffic(comm, buffer.bytes());
  auto state = std::make_unique<SendRequest::State>();
  state->comm = comm;
  state->peer = dst;
  state->bytes = buffer.bytes();
  const std::size_t numel = buffer.numel();
  // A small payload in host memory travels as eager pieces (eager.h), the first inside the
  // header's message (transfer.h); a larger one, or one MPI reads from device memory, in
  // messages of its own after the header.
  const bool pieces = mpi_space(comm, buffer) == kernels::Device::cpu &&
                      buffer.bytes() < kEagerPiecesBelowBytesForCopies;
  const std::size_t element_bytes = kernels::dtype_size(buffer.dtype());
  const std::size_t limit =
      pieces ? std::min(comm.max_message_elements(), kEagerMessageBytes / element_bytes)
             : comm.max_message_elements();
  const std::size_t inline_count =
      pieces ? std::min({numel, limit, transfer::kInlinePayloadBytes / element_bytes}) : 0;
  state->header = Header::describe(shape, buffer.dtype(), limit, inline_count * element_bytes);
  if (inline_count < numel) state->staged = stage_copy(comm, buffer);
  const Buffer& image = state->staged.empty() ? buffer : state->staged;
  if (inline_count > 0) {
    state->message = transfer::MessageMemory::take();
    Buffer& message = state->message.buffer();
    std::memcpy(message.data(), state->header.words.data(), transfer::kHeaderBytes);
    kernels::copy_bytes(image, 0, message, transfer::kHeaderBytes, inline_count * element_bytes);
  }
  const std::size_t rest = numel - inline_count;
  const std::size_t messages = message_count(rest, limit);
  state->requests.assign(1 + messages);
  SendRequest request(std::move(state));  // from here on, a failure releases what was started
  SendRequest::State& s = *request.state_;
  const void* first = inline_count > 0 ? s.message.buffer().data() : s.header.words.data();
  const std::size_t first_bytes = transfer::kHeaderBytes + inline_count * element_bytes;
  check_mpi(MPI_Isend(first, static_cast<int>(first_bytes), MPI_BYTE, dst,
                      transfer::header_tag(tag), comm.native(), &s.requests[0]),
            "MPI_Isend");
  for (std::size_t i = 0; i < messages; ++i) {
    const Range range = message_range(rest, limit, i);
    check_mpi(MPI_Isend(element(image, inline_count + range.offset), mpi_count(range.count),
                        mpi_type(image.dtype()), dst, transfer::payload_tag(tag), comm.native(),
                        &s.requests[1 + i]),
              "MPI_Isend");
  }
  return request;
}

void send(const Communicator& comm, const Buffer& buffer, std::span<const std::int64_t> shape,
          int dst, int tag) {
  isend(comm, buffer, shape, dst, tag).wait();
}

void recv(const Communicator& comm, Buffer& buffer, std::span<const std::int64_t> expected_shape,
          int src, int tag) {
  irecv(comm, buffer, expected_shape, src, tag).wait();
}

}  // namespace mpitron::comm
