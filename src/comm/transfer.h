// What point-to-point sends and receives share (communication layer internal): the header that
// precedes every payload, the MPI tags of a transfer, argument checks and error text.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/point_to_point.h"
#include "kernels/device.h"

namespace mpitron::comm::transfer {

/// Marks a header ("mpitr1"), so a stray message is reported as malformed.
inline constexpr std::int64_t kMagic = 0x6d7069747231;

/// What precedes a payload: [magic, dtype, message limit, ndim, dims[kMaxTransferDims]].
struct Header {
  std::array<std::int64_t, 4 + kMaxTransferDims> words{};

  /// A header describing `shape` (at most kMaxTransferDims dims) of `dtype`, sent in messages
  /// of at most `limit` elements.
  static Header describe(std::span<const std::int64_t> shape, kernels::DType dtype,
                         std::size_t limit);

  kernels::DType dtype() const { return static_cast<kernels::DType>(words[1]); }
  std::size_t limit() const { return static_cast<std::size_t>(words[2]); }
  std::span<const std::int64_t> shape() const {
    return {words.data() + 4, static_cast<std::size_t>(words[3])};
  }
  /// Magic, dtype, limit (1..kMaxMessageElements) and ndim (0..kMaxTransferDims) in range.
  bool valid() const;
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
