// Shape-checked point-to-point transfers (pipeline activations and gradients).
//
// A send is a small header (dtype, shape, message size limit) followed by the payload, cut into
// messages of at most `comm.max_message_elements()` elements. The receiver compares the header
// with what it expects before it accepts any payload, so a mismatch is an error naming both
// shapes and both ranks, never truncated or garbage data. Both sides wait through the deadline
// routine (wait.h). A send may stay in flight (`isend`) while its rank goes on, e.g. to receive
// from the same peer: a pipeline schedule then cannot deadlock on two ranks that both send first.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "comm/communicator.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// Most dimensions a transferred shape may have.
inline constexpr std::size_t kMaxTransferDims = 8;

/// A send in flight, returned by `isend`. It owns what must live until the transfer completes:
/// the header and, when the payload is staged (a CUDA buffer without direct transfers, or a host
/// buffer with `stage_host_buffers`), the payload's host copy. A payload MPI reads in place (a
/// host buffer, or a CUDA buffer with direct transfers) is the caller's: keep that buffer alive
/// and unchanged until the request has completed (`wait`, or `test` returned true).
///
/// Move-only. Destroying (or assigning over) a pending request waits for it like `wait`; while
/// an exception unwinds it does not wait, so the error reaches the job's guard at once: the MPI
/// requests are then released (MPI_Request_free) and the owned memory is kept until the process
/// exits.
class SendRequest {
 public:
  /// A request with nothing in flight.
  SendRequest();
  SendRequest(SendRequest&& other) noexcept;
  SendRequest& operator=(SendRequest&& other) noexcept;
  ~SendRequest();

  /// True until the transfer is known to be complete (by `wait` or `test`).
  bool pending() const { return state_ != nullptr; }

  /// Polls MPI once without blocking; true (and no longer pending) when the transfer completed.
  /// Throws MpiError when MPI reports a failure.
  bool test();

  /// Waits through the deadline routine (wait.h) until the peer has taken the whole message;
  /// past the deadline the job aborts with "rank A: send to rank B on the <name> communicator
  /// (N bytes) did not complete within T s". Returns at once when not pending. Throws MpiError.
  void wait();

 private:
  friend SendRequest isend(const Communicator&, const kernels::Buffer&,
                           std::span<const std::int64_t>, int);
  struct State;
  explicit SendRequest(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Starts sending `buffer`, whose shape is `shape` (row-major, prod(shape) == numel), to rank
/// `dst` of `comm`, and returns without waiting for the receiver. Queued CUDA work on `buffer`
/// is finished (or the buffer copied to the host) before this returns. Messages to the same peer
/// arrive in the order they were started. Throws std::invalid_argument when the shape does not
/// match the buffer, has more than kMaxTransferDims dims or a negative dim, or when dst is
/// outside [0, size) or this rank; MpiError when MPI fails.
SendRequest isend(const Communicator& comm, const kernels::Buffer& buffer,
                  std::span<const std::int64_t> shape, int dst);

/// Waits for every request in `requests`, in order, each as SendRequest::wait.
void wait_all(std::span<SendRequest> requests);

/// `isend(...)` followed by `wait()`: returns when rank `dst` has taken the whole message.
void send(const Communicator& comm, const kernels::Buffer& buffer,
          std::span<const std::int64_t> shape, int dst);

/// Receives into `buffer` what rank `src` of `comm` sends, which must have `expected_shape` and
/// `buffer`'s dtype. Throws std::runtime_error "recv on the <name> communicator: rank A expected
/// [..] float32 from rank B, but rank B sent [..] float32" (world ranks) when the header
/// differs; the sender's payload is then received into scratch memory and dropped, so later
/// transfers stay in step. Same argument checks as `send`.
void recv(const Communicator& comm, kernels::Buffer& buffer,
          std::span<const std::int64_t> expected_shape, int src);

/// "[2, 16]" for a shape.
std::string shape_to_string(std::span<const std::int64_t> shape);

}  // namespace mpitron::comm
