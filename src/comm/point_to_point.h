// Shape-checked point-to-point transfers (pipeline activations and gradients).
//
// A send is a small header (dtype, shape, message size limit) followed by the payload, cut into
// messages of at most `comm.max_message_elements()` elements. The receiver compares the header
// with what it expects before it accepts any payload, so a mismatch is an error naming both
// shapes and both ranks, never truncated or garbage data. Both sides wait through the deadline
// routine (wait.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "comm/communicator.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// Most dimensions a transferred shape may have.
inline constexpr std::size_t kMaxTransferDims = 8;

/// Sends `buffer`, whose shape is `shape` (row-major, prod(shape) == numel), to rank `dst` of
/// `comm`. Throws std::invalid_argument when the shape does not match the buffer, has more than
/// kMaxTransferDims dims or a negative dim, or when dst is outside [0, size) or this rank.
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
