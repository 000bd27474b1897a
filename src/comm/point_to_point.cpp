#include "comm/point_to_point.h"

#include <algorithm>
#include <array>
#include <exception>
#include <stdexcept>
#include <vector>

#include "comm/errors.h"
#include "comm/mpi_util.h"
#include "comm/staging.h"

namespace mpitron::comm {

using kernels::Buffer;

namespace {

constexpr int kHeaderTag = 7301;
constexpr int kPayloadTag = 7302;
constexpr std::int64_t kMagic = 0x6d7069747231;  // "mpitr1"

constexpr std::int64_t kDTypes = 4;  // kernels::DType f32, f64, i32, i64, sent as 0..3

// [magic, dtype, message limit, ndim, dims[kMaxTransferDims]]
struct Header {
  std::array<std::int64_t, 4 + kMaxTransferDims> words{};

  kernels::DType dtype() const { return static_cast<kernels::DType>(words[1]); }
  std::size_t limit() const { return static_cast<std::size_t>(words[2]); }
  std::span<const std::int64_t> shape() const {
    return {words.data() + 4, static_cast<std::size_t>(words[3])};
  }
  bool valid() const {
    return words[0] == kMagic && words[1] >= 0 && words[1] < kDTypes && words[2] >= 1 &&
           words[2] <= static_cast<std::int64_t>(kMaxMessageElements) && words[3] >= 0 &&
           words[3] <= static_cast<std::int64_t>(kMaxTransferDims);
  }
};

std::size_t product(std::span<const std::int64_t> shape) {
  std::size_t n = 1;
  for (std::int64_t dim : shape)
    n *= static_cast<std::size_t>(dim);
  return n;
}

void check_arguments(const char* op, const Communicator& comm, const Buffer& buffer,
                     std::span<const std::int64_t> shape, int peer) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(op) + " on the " + comm.name() +
                                " communicator: " + why);
  };
  if (peer < 0 || peer >= comm.size() || peer == comm.rank()) {
    fail("peer rank " + std::to_string(peer) + " must be another rank in [0, " +
         std::to_string(comm.size()) + ")");
  }
  if (shape.size() > kMaxTransferDims) {
    fail("shape " + shape_to_string(shape) + " has more than " + std::to_string(kMaxTransferDims) +
         " dims");
  }
  if (std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d < 0; }) ||
      product(shape) != buffer.numel()) {
    fail("shape " + shape_to_string(shape) + " does not describe a buffer of " +
         std::to_string(buffer.numel()) + " elements");
  }
}

std::string describe(std::span<const std::int64_t> shape, kernels::DType dtype) {
  return shape_to_string(shape) + " " + kernels::to_string(dtype);
}

// Receives `numel` elements of `image`'s dtype from `src` as messages of at most `limit`. With
// `drain` every message lands at the start of `image` (a scratch buffer of `limit` elements).
void receive_payload(const Communicator& comm, Buffer& image, std::size_t numel, std::size_t limit,
                     int src, const Operation& op, bool drain) {
  for_each_message(comm, numel, limit, op, [&](const Range& range) {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Irecv(element(image, drain ? 0 : range.offset), mpi_count(range.count),
                        mpi_type(image.dtype()), src, kPayloadTag, comm.native(), &request),
              "MPI_Irecv");
    return request;
  });
}

}  // namespace

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
  Buffer staged;  // the payload's host copy when it is staged, else empty
  std::vector<MPI_Request> requests;
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
  for (MPI_Request& request : state_->requests) {
    if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  }
  // MPI may still read these; never freed (not even at exit, when the allocator may be gone).
  static auto* abandoned = new std::vector<std::unique_ptr<State>>();
  abandoned->push_back(std::move(state_));
}

bool SendRequest::test() {
  if (!pending()) return true;
  int done = 0;
  check_mpi(MPI_Testall(static_cast<int>(state_->requests.size()), state_->requests.data(), &done,
                        MPI_STATUSES_IGNORE),
            "MPI_Testall");
  if (done != 0) state_.reset();
  return done != 0;
}

void SendRequest::wait() {
  if (!pending()) return;
  wait_all(state_->comm, state_->requests, Operation{"send to", state_->peer, state_->bytes});
  state_.reset();
}

void wait_all(std::span<SendRequest> requests) {
  for (SendRequest& request : requests)
    request.wait();
}

SendRequest isend(const Communicator& comm, const Buffer& buffer,
                  std::span<const std::int64_t> shape, int dst) {
  check_arguments("send", comm, buffer, shape, dst);
  auto state = std::make_unique<SendRequest::State>();
  state->comm = comm;
  state->peer = dst;
  state->bytes = buffer.bytes();
  std::int64_t* words = state->header.words.data();
  words[0] = kMagic;
  words[1] = static_cast<std::int64_t>(buffer.dtype());
  words[2] = static_cast<std::int64_t>(comm.max_message_elements());
  words[3] = static_cast<std::int64_t>(shape.size());
  std::copy(shape.begin(), shape.end(), words + 4);
  state->staged = stage_copy(comm, buffer);
  const Buffer& image = state->staged.empty() ? buffer : state->staged;
  const std::size_t limit = comm.max_message_elements();
  const std::size_t messages = message_count(buffer.numel(), limit);
  state->requests.assign(1 + messages, MPI_REQUEST_NULL);
  SendRequest request(std::move(state));  // from here on, a failure releases what was started
  std::vector<MPI_Request>& requests = request.state_->requests;
  check_mpi(MPI_Isend(words, static_cast<int>(request.state_->header.words.size()), MPI_INT64_T,
                      dst, kHeaderTag, comm.native(), &requests[0]),
            "MPI_Isend");
  for (std::size_t i = 0; i < messages; ++i) {
    const Range range = message_range(buffer.numel(), limit, i);
    check_mpi(MPI_Isend(element(image, range.offset), mpi_count(range.count),
                        mpi_type(image.dtype()), dst, kPayloadTag, comm.native(), &requests[1 + i]),
              "MPI_Isend");
  }
  return request;
}

void send(const Communicator& comm, const Buffer& buffer, std::span<const std::int64_t> shape,
          int dst) {
  isend(comm, buffer, shape, dst).wait();
}

void recv(const Communicator& comm, Buffer& buffer, std::span<const std::int64_t> expected_shape,
          int src) {
  check_arguments("recv", comm, buffer, expected_shape, src);
  const Operation op{"recv from", src, buffer.bytes()};
  Header header;
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Irecv(header.words.data(), static_cast<int>(header.words.size()), MPI_INT64_T, src,
                      kHeaderTag, comm.native(), &request),
            "MPI_Irecv");
  wait_one(comm, request, op);
  // Built only on failure: a steady stream of matching transfers allocates nothing.
  const auto mismatch = [&](const std::string& what_arrived) {
    return std::runtime_error("recv on the " + comm.name() + " communicator: rank " +
                              std::to_string(comm.world_rank()) + " expected " +
                              describe(expected_shape, buffer.dtype()) + " from rank " +
                              std::to_string(comm.global_rank(src)) + ", but " + what_arrived);
  };
  if (!header.valid()) throw mismatch("received a malformed header");
  const bool matches =
      header.dtype() == buffer.dtype() && std::equal(expected_shape.begin(), expected_shape.end(),
                                                     header.shape().begin(), header.shape().end());
  if (!matches) {
    const std::size_t numel = product(header.shape());
    Buffer& scratch = comm.staging().workspace(Slot::pack, kernels::Device::cpu, header.dtype(),
                                               std::min(numel, header.limit()));
    receive_payload(comm, scratch, numel, header.limit(), src, op, true);
    throw mismatch("rank " + std::to_string(comm.global_rank(src)) + " sent " +
                   describe(header.shape(), header.dtype()));
  }
  Buffer& image = stage_target(comm, buffer, Slot::recv);
  receive_payload(comm, image, buffer.numel(), header.limit(), src, op, false);
  stage_out(image, buffer);
}

}  // namespace mpitron::comm
