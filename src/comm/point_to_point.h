// Shape-checked point-to-point transfers (pipeline activations and gradients).
//
// A send is a small header (dtype, shape, message size limit) followed by the payload, cut into
// messages of at most `comm.max_message_elements()` elements. A payload below
// kEagerPiecesBelowBytesForCopies (eager.h) that MPI reads from host memory travels as pieces of
// at most kEagerMessageBytes, which Open MPI sends eagerly, the first transfer::kInlinePayloadBytes
// inside the header's own message; a larger one, or one in device memory, follows the header as
// messages of its own. The receiver compares the header with what it expects before it accepts
// any payload, so a mismatch is an error naming both shapes and both ranks, never truncated or
// garbage data. Both sides wait through the deadline routine (wait.h). A send may stay in flight
// (`isend`) while its rank goes on, e.g. to receive from the same peer: a pipeline schedule then
// cannot deadlock on two ranks that both send first. A receive may be started early (`irecv`)
// and finished when its data is needed.
//
// Every transfer carries a tag in [0, kMaxTransferTag] that the sender and the receiver agree on
// (0 unless given). Its header and payload only match a receive of the same tag, so receives of
// different tags from one peer may be started and finished in any order. Transfers with the same
// tag from one peer are received in the order they were sent.
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

/// Largest transfer tag: every tag in [0, kMaxTransferTag] maps to two MPI tags below 32767, the
/// least MPI_TAG_UB MPI allows.
inline constexpr int kMaxTransferTag = 12287;

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
                           std::span<const std::int64_t>, int, int);
  struct State;
  explicit SendRequest(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Starts sending `buffer`, whose shape is `shape` (row-major, prod(shape) == numel), to rank
/// `dst` of `comm` as transfer `tag`, and returns without waiting for the receiver. Queued CUDA
/// work on `buffer` is finished (or the buffer copied to the host) before this returns. Messages
/// to the same peer with the same tag arrive in the order they were started. Throws
/// std::invalid_argument when the shape does not match the buffer, has more than
/// kMaxTransferDims dims or a negative dim, when dst is outside [0, size) or this rank, or when
/// tag is outside [0, kMaxTransferTag]; MpiError when MPI fails.
SendRequest isend(const Communicator& comm, const kernels::Buffer& buffer,
                  std::span<const std::int64_t> shape, int dst, int tag = 0);

/// Waits for every request in `requests`, in order, each as SendRequest::wait.
void wait_all(std::span<SendRequest> requests);

/// `isend(...)` followed by `wait()`: returns when rank `dst` has taken the whole message.
void send(const Communicator& comm, const kernels::Buffer& buffer,
          std::span<const std::int64_t> shape, int dst, int tag = 0);

/// A receive in flight, returned by `irecv`; it writes the caller's buffer, which must stay
/// alive (and unread) until the request has completed (`wait` returned, or `test` returned
/// true).
///
/// `irecv` posts the receive of the header at once. The payload receives are posted as soon as
/// the header has arrived and matches what is expected, with the sender's own message sizes (from
/// the header): in `test` or in `wait`, whichever sees the header first. Open MPI moves data
/// only inside MPI calls of both ranks, so a `test` between pieces of computation lets a payload
/// that has arrived move before `wait`. Payloads are never posted before their header is checked,
/// so a larger payload than expected can never land in (and be truncated by) a posted receive,
/// a rejected payload never touches the buffer, and ranks with different message limits work.
///
/// Move-only. Destroying (or assigning over) a pending request waits for it like `wait`; a
/// failure there cannot be thrown from a destructor, so it ends the job with the error line
/// (guard.h, exit code kErrorExitCode). While an exception unwinds it does not wait, so the
/// error reaches the job's guard at once: its MPI receives are then cancelled (MPI_Cancel) and
/// released, and its own memory is kept until the process exits (a receive that had already
/// matched may still write the buffer, so the job must end).
class RecvRequest {
 public:
  /// A request with nothing in flight.
  RecvRequest();
  RecvRequest(RecvRequest&& other) noexcept;
  RecvRequest& operator=(RecvRequest&& other) noexcept;
  ~RecvRequest();

  /// True until the transfer is known to be complete (by `wait` or `test`), or has failed.
  bool pending() const { return state_ != nullptr; }

  /// Polls MPI without blocking: checks the header once it has arrived and then posts the
  /// payload receives; true (and no longer pending) when the whole payload is in the buffer.
  /// A header that does not match raises the error described at `wait` (receiving the rejected
  /// payload into scratch memory first, which waits for it). Throws MpiError when MPI fails.
  bool test();

  /// Waits through the deadline routine (wait.h) for the header and then for the payload; past
  /// the deadline the job aborts with "rank A: recv from rank B on the <name> communicator (N
  /// bytes) did not complete within T s" (N: the expected payload). Returns at once when not
  /// pending. Throws std::runtime_error "recv on the <name> communicator: rank A expected [..]
  /// float32 from rank B, but rank B sent [..] float32" (world ranks) when the header differs
  /// from the expected shape or dtype ("... but received a malformed header" for a message that
  /// is no header, or not as long as its header says); the sender's payload is then received
  /// into scratch memory and dropped, so later transfers stay in step, and the request is no
  /// longer pending. Throws MpiError.
  void wait();

 private:
  friend RecvRequest irecv(const Communicator&, kernels::Buffer&, std::span<const std::int64_t>,
                           int, int);
  struct State;
  explicit RecvRequest(std::unique_ptr<State> state);
  void accept_header(const MPI_Status& status);
  void finish();
  void release() noexcept;
  std::unique_ptr<State> state_;
};

/// Starts receiving into `buffer` transfer `tag` from rank `src` of `comm`, which must have
/// `expected_shape` (row-major, prod == buffer.numel()) and `buffer`'s dtype; returns without
/// waiting. Queued CUDA work on `buffer` is finished first. A CUDA buffer that MPI cannot see
/// (staged transfers) receives into a pinned host copy owned by the request, copied into
/// `buffer` when the request completes. Of two receives in flight with the same tag from the
/// same peer, finish the earlier before testing or waiting on the later: each posts its payload
/// receives once it has seen its header, and payload messages match in the order those receives
/// are posted. Same argument checks (std::invalid_argument) as `isend`; MpiError when MPI fails;
/// mismatches are reported by the request (RecvRequest::wait).
RecvRequest irecv(const Communicator& comm, kernels::Buffer& buffer,
                  std::span<const std::int64_t> expected_shape, int src, int tag = 0);

/// `irecv(...)` followed by `wait()`: returns when the payload is in `buffer`. Errors as
/// `irecv` and RecvRequest::wait.
void recv(const Communicator& comm, kernels::Buffer& buffer,
          std::span<const std::int64_t> expected_shape, int src, int tag = 0);

/// "[2, 16]" for a shape.
std::string shape_to_string(std::span<const std::int64_t> shape);

}  // namespace mpitron::comm
