// RecvRequest and irecv (point_to_point.h): the header receive is posted at once, the payload
// receives once the header has been checked.
#include "comm/point_to_point.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "comm/errors.h"
#include "comm/guard.h"
#include "comm/mpi_util.h"
#include "comm/staging.h"
#include "comm/transfer.h"

namespace mpitron::comm {

using kernels::Buffer;
using transfer::Header;

struct RecvRequest::State {
  Communicator comm;  // kept for errors and the deadline; shares the MPI communicator
  int peer = -1;
  int tag = 0;
  Buffer* buffer = nullptr;  // the caller's
  std::array<std::int64_t, kMaxTransferDims> expected{};
  std::size_t ndim = 0;
  Header header;  // as received
  // Where the header message lands: the header, then an inline payload.
  transfer::MessageMemory landing;
  MPI_Request header_request = MPI_REQUEST_NULL;
  bool header_checked = false;
  Buffer staged;  // where a staged payload lands before it is copied into `buffer`, else empty
  transfer::Requests payload;

  std::span<const std::int64_t> expected_shape() const { return {expected.data(), ndim}; }
  Operation operation() const { return {"recv from", peer, buffer->bytes()}; }
};

RecvRequest::RecvRequest() = default;
RecvRequest::RecvRequest(std::unique_ptr<State> state) : state_(std::move(state)) {}
RecvRequest::RecvRequest(RecvRequest&& other) noexcept = default;

RecvRequest& RecvRequest::operator=(RecvRequest&& other) noexcept {
  RecvRequest previous(std::move(*this));  // finished by its destructor
  state_ = std::move(other.state_);
  return *this;
}

RecvRequest::~RecvRequest() {
  if (!pending()) return;
  if (std::uncaught_exceptions() == 0) {
    const int rank = state_->comm.world_rank();
    try {
      wait();
      return;
    } catch (const std::exception& error) {
      abort_job(error_line(rank, error.what()), kErrorExitCode);
    }
  }
  release();
}

void RecvRequest::release() noexcept {
  const auto cancel = [](MPI_Request& request) {
    if (request == MPI_REQUEST_NULL) return;
    MPI_Cancel(&request);
    MPI_Request_free(&request);
  };
  cancel(state_->header_request);
  const std::span<MPI_Request> payload = state_->payload.all();
  std::for_each(payload.begin(), payload.end(), cancel);
  transfer::keep_forever(std::move(state_));  // MPI may still write the header and staged copy
}

void RecvRequest::accept_header(const MPI_Status& status) {
  State& s = *state_;
  s.header_checked = true;
  Buffer& landing = s.landing.buffer();
  std::memcpy(s.header.words.data(), landing.data(), transfer::kHeaderBytes);
  const Header& header = s.header;
  int received = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &received), "MPI_Get_count");
  // Well-formed: valid fields, and a message of exactly the header and its inline bytes.
  const bool well_formed = header.valid() && static_cast<std::size_t>(received) ==
                                                 transfer::kHeaderBytes + header.inline_bytes();
  const std::span<const std::int64_t> expected = s.expected_shape();
  const bool matches =
      well_formed && header.dtype() == s.buffer->dtype() &&
      std::equal(expected.begin(), expected.end(), header.shape().begin(), header.shape().end());
  if (matches) {  // the payload's head came with the header; the rest follows in messages
    Buffer& image = s.staged.empty() ? *s.buffer : s.staged;
    const std::size_t inline_count = header.inline_count();
    if (inline_count > 0) {
      kernels::copy_bytes(landing, transfer::kHeaderBytes, image, 0, header.inline_bytes());
    }
    const std::size_t rest = s.buffer->numel() - inline_count;
    s.payload.assign(message_count(rest, header.limit()));
    for (std::size_t i = 0; i < s.payload.size(); ++i) {
      const Range range = message_range(rest, header.limit(), i);
      check_mpi(MPI_Irecv(element(image, inline_count + range.offset), mpi_count(range.count),
                          mpi_type(image.dtype()), s.peer, transfer::payload_tag(s.tag),
                          s.comm.native(), &s.payload[i]),
                "MPI_Irecv");
    }
    return;
  }
  // Built only on failure: a steady stream of matching transfers allocates nothing here.
  std::string what = "recv on the " + s.comm.name() + " communicator: rank " +
                     std::to_string(s.comm.world_rank()) + " expected " +
                     transfer::describe(expected, s.buffer->dtype()) + " from rank " +
                     std::to_string(s.comm.global_rank(s.peer)) + ", but ";
  if (!well_formed) {
    state_.reset();
    throw std::runtime_error(what + "received a malformed header");
  }
  what += "rank " + std::to_string(s.comm.global_rank(s.peer)) + " sent " +
          transfer::describe(header.shape(), header.dtype());
  // The rest of the sender's payload, message by message into scratch memory, so later
  // transfers of this tag stay in step.
  const std::size_t rest = transfer::product(header.shape()) - header.inline_count();
  Buffer& scratch = s.comm.staging().workspace(Slot::pack, kernels::Device::cpu, header.dtype(),
                                               std::min(rest, header.limit()));
  for_each_message(s.comm, rest, header.limit(), s.operation(), [&](const Range& range) {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Irecv(element(scratch, 0), mpi_count(range.count), mpi_type(scratch.dtype()),
                        s.peer, transfer::payload_tag(s.tag), s.comm.native(), &request),
              "MPI_Irecv");
    return request;
  });
  state_.reset();
  throw std::runtime_error(what);
}

void RecvRequest::finish() {
  if (!state_->staged.empty()) stage_out(state_->staged, *state_->buffer);
  state_.reset();
}

bool RecvRequest::test() {
  if (!pending()) return true;
  State& s = *state_;
  if (!s.header_checked) {
    int arrived = 0;
    MPI_Status status;
    check_mpi(MPI_Test(&s.header_request, &arrived, &status), "MPI_Test");
    if (arrived == 0) return false;
    accept_header(status);
  }
  int done = 0;
  const std::span<MPI_Request> payload = s.payload.all();
  check_mpi(
      MPI_Testall(static_cast<int>(payload.size()), payload.data(), &done, MPI_STATUSES_IGNORE),
      "MPI_Testall");
  if (done != 0) finish();
  return done != 0;
}

void RecvRequest::wait() {
  if (!pending()) return;
  State& s = *state_;
  if (!s.header_checked) {
    MPI_Status status;
    wait_one(s.comm, s.header_request, s.operation(), &status);
    accept_header(status);
  }
  wait_all(s.comm, s.payload.all(), s.operation());
  finish();
}

RecvRequest irecv(const Communicator& comm, Buffer& buffer,
                  std::span<const std::int64_t> expected_shape, int src, int tag) {
  transfer::check_arguments("recv", comm, buffer, expected_shape, src, tag);
  auto state = std::make_unique<RecvRequest::State>();
  state->comm = comm;
  state->peer = src;
  state->tag = tag;
  state->buffer = &buffer;
  std::copy(expected_shape.begin(), expected_shape.end(), state->expected.begin());
  state->ndim = expected_shape.size();
  state->staged = stage_landing(comm, buffer);
  RecvRequest request(std::move(state));  // from here on, a failure releases what was started
  // Room for the header and an inline payload of any sender (transfer.h).
  request.state_->landing = transfer::MessageMemory::take();
  Buffer& landing = request.state_->landing.buffer();
  std::memset(landing.data(), 0, transfer::kHeaderBytes);  // a short stray message is malformed
  check_mpi(MPI_Irecv(landing.data(), static_cast<int>(transfer::kMessageBytes), MPI_BYTE, src,
                      transfer::header_tag(tag), comm.native(), &request.state_->header_request),
            "MPI_Irecv");
  return request;
}

}  // namespace mpitron::comm
