// What point-to-point sends and receives share (communication layer internal): the header that
// precedes every payload, the MPI tags of a transfer, argument checks and error text.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/eager.h"
#include "comm/point_to_point.h"
#include "kernels/device.h"

namespace mpitron::comm::transfer {

/// Marks a header ("mpitr1"), so a stray message is reported as malformed.
inline constexpr std::int64_t kMagic = 0x6d7069747231;

/// The most bytes of a payload's head that travel inside its header's message when the payload
/// travels as eager pieces (a payload below kEagerPiecesBelowBytesForCopies, eager.h, that MPI
/// reads from host memory): the header message is then one eager piece too, and the pieces
/// after it start on a 64-byte line of the payload. A 4 KiB transfer is then two eager messages
/// where MPI_Send of 4 KiB is one rendezvous (the shared-memory transport's eager limit of 4 KiB
/// includes its match header).
inline constexpr std::size_t kInlinePayloadBytes = 3840;

/// What precedes a payload: [magic, dtype, message limit, ndim, dims[kMaxTransferDims], inline
/// payload bytes (the payload's head in the header's message; the rest follows in messages of at
/// most the limit's elements, none when the inline bytes are the whole payload)].
struct Header {
  std::array<std::int64_t, 5 + kMaxTransferDims> words{};

  /// A header describing `shape` (at most kMaxTransferDims dims) of `dtype` whose first
  /// `inline_bytes` bytes travel in the header's message and the rest in messages of at most
  /// `limit` elements.
  static Header describe(std::span<const std::int64_t> shape, kernels::DType dtype,
                         std::size_t limit, std::size_t inline_bytes = 0);

  kernels::DType dtype() const { return static_cast<kernels::DType>(words[1]); }
  std::size_t limit() const { return static_cast<std::size_t>(words[2]); }
  std::span<const std::int64_t> shape() const {
    return {words.data() + 4, static_cast<std::size_t>(words[3])};
  }
  std::size_t inline_bytes() const { return static_cast<std::size_t>(words.back()); }
  /// The elements of the payload's head in the header's message (needs valid()).
  std::size_t inline_count() const { return inline_bytes() / kernels::dtype_size(dtype()); }
  /// Magic, dtype, limit (1..kMaxMessageElements), ndim (0..kMaxTransferDims), dims (>= 0, their
  /// product's bytes within std::size_t) and inline bytes (0..kInlinePayloadBytes, whole
  /// elements, at most the shape's) in range.
  bool valid() const;
};

/// The bytes of a header; a header message holds up to kInlinePayloadBytes more.
inline constexpr std::size_t kHeaderBytes = sizeof(Header::words);

/// The most bytes of a header message: a header and an inline payload.
inline constexpr std::size_t kMessageBytes = kHeaderBytes + kInlinePayloadBytes;
static_assert(kMessageBytes <= kEagerMessageBytes, "a header message is one eager piece");

/// Host memory for one header message (kMessageBytes, as int64 words), taken from the spares of
/// the thread that makes it and given back to its thread's spares when destroyed (at most four
/// are kept per thread; more are freed), so a steady stream of transfers allocates none: from
/// the caching allocator, a send/recv of 4 KiB spent about 1,000 instructions per round trip in
/// it (callgrind, docs/performance.md).
class MessageMemory {
 public:
  /// Holds no memory.
  MessageMemory() = default;
  MessageMemory(MessageMemory&& other) noexcept = default;
  MessageMemory& operator=(MessageMemory&& other) noexcept;
  MessageMemory(const MessageMemory&) = delete;
  MessageMemory& operator=(const MessageMemory&) = delete;
  ~MessageMemory();

  /// Memory for a header message: a spare of this thread, or a new buffer. Its contents are
  /// undefined.
  static MessageMemory take();

  /// The memory (empty when default-made or moved from).
  kernels::Buffer& buffer() { return buffer_; }

 private:
  void give_back() noexcept;
  kernels::Buffer buffer_;
};

/// The MPI requests a transfer of eager pieces needs at most (at the default message limit): its
/// header's message and the pieces of a payload below kEagerPiecesBelowBytesForCopies after the
/// inline head.
inline constexpr std::size_t kFewRequests =
    1 + (kEagerPiecesBelowBytesForCopies - kInlinePayloadBytes + kEagerMessageBytes - 1) /
            kEagerMessageBytes;

/// The MPI requests of one transfer's messages, each MPI_REQUEST_NULL until posted: up to
/// kFewRequests without a heap allocation.
class Requests {
 public:
  Requests() { few_.fill(MPI_REQUEST_NULL); }
  /// `count` requests, each MPI_REQUEST_NULL (replacing the previous ones).
  void assign(std::size_t count);

  std::span<MPI_Request> all() {
    return few() ? std::span<MPI_Request>(few_.data(), count_) : std::span<MPI_Request>(many_);
  }
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  MPI_Request& operator[](std::size_t i) { return all()[i]; }

 private:
  bool few() const { return count_ <= kFewRequests; }
  std::array<MPI_Request, kFewRequests> few_{};
  std::vector<MPI_Request> many_;
  std::size_t count_ = 0;
};

/// The MPI tags of transfer `tag` (in [0, kMaxTransferTag]): the header's and the payload's.
/// They lie in [kFirstMpiTag, 32767] (32767 is the least MPI_TAG_UB MPI allows), above every
/// other tag the comm layer uses on a communicator (kCollectiveTag).
inline constexpr int kFirstMpiTag = 8192;
inline int header_tag(int tag) {
  return kFirstMpiTag + 2 * tag;
}
inline int payload_tag(int tag) {
  return kFirstMpiTag + 2 * tag + 1;
}

/// prod(shape) (1 for []).
std::size_t product(std::span<const std::int64_t> shape);

/// Throws std::invalid_argument "<op> on the <name> communicator: ..." when `peer` is not
/// another rank of `comm`, `tag` is outside [0, kMaxTransferTag], or `shape` has more than
/// kMaxTransferDims dims, a negative dim, or not buffer.numel() elements.
void check_arguments(const char* op, const Communicator& comm, const kernels::Buffer& buffer,
                     std::span<const std::int64_t> shape, int peer, int tag);

/// "[2, 3] float32".
std::string describe(std::span<const std::int64_t> shape, kernels::DType dtype);

/// Keeps `owned` alive until the process ends (never freed, not even at exit, when the
/// allocator may be gone): memory MPI may still read or write after a request was released
/// while an exception unwinds.
template <class T>
void keep_forever(std::unique_ptr<T> owned) {
  static auto* kept = new std::vector<std::unique_ptr<T>>();
  kept->push_back(std::move(owned));
}

}  // namespace mpitron::comm::transfer
