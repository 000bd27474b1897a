// Where MPI reads and writes a buffer's elements: the buffer itself when MPI can see it (host
// memory, or CUDA memory with direct transfers), otherwise a reused pinned host copy
// (communication layer internal).
#pragma once

#include <array>
#include <cstddef>

#include "comm/communicator.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// The purposes one operation may need workspaces for at the same time.
enum class Slot { send, recv, pack };

/// Reused workspaces, one per (slot, device, dtype), grown on demand and never shrunk, so a
/// steady state of repeated operations allocates nothing. Host workspaces are pinned
/// (kernels::Buffer::pinned_host) so CUDA copies into them are fast.
class Staging {
 public:
  /// A buffer of at least `numel` elements of `dtype` on `device` (host workspaces report
  /// Device::cpu). Its contents are whatever the previous user left. Throws what
  /// kernels::Buffer throws when allocation fails.
  kernels::Buffer& workspace(Slot slot, kernels::Device device, kernels::DType dtype,
                             std::size_t numel);

 private:
  static constexpr std::size_t kKinds = 4;  // the kernels::DType values
  std::array<kernels::Buffer, 3 * 2 * kKinds> buffers_;
};

/// True when MPI may read and write `buffer`'s memory directly on `comm`: host buffers unless
/// `comm.stage_host_buffers()`, CUDA buffers when `comm.direct_transfers()`.
bool mpi_visible(const Communicator& comm, const kernels::Buffer& buffer);

/// The device on which MPI-visible images of `buffer` live (cpu when staged).
kernels::Device mpi_space(const Communicator& comm, const kernels::Buffer& buffer);

/// Memory holding `buffer`'s elements for MPI to read: `buffer` itself when MPI-visible (after
/// waiting for queued CUDA work), else the `slot` host workspace filled with a copy.
const kernels::Buffer& stage_in(const Communicator& comm, const kernels::Buffer& buffer, Slot slot);

/// For a transfer that outlives the call: an empty buffer when MPI may read `buffer` itself
/// (after waiting for queued CUDA work on it), else a new pinned host copy of it (from the
/// caching allocator, so a steady state allocates nothing). Also empty for an empty `buffer`.
kernels::Buffer stage_copy(const Communicator& comm, const kernels::Buffer& buffer);

/// For a receive that outlives the call: an empty buffer when MPI may write `buffer` itself
/// (after waiting for queued CUDA work on it), else a new uninitialized pinned host buffer of its
/// size (from the caching allocator) that `stage_out` later copies into `buffer`. Also empty for
/// an empty `buffer`.
kernels::Buffer stage_landing(const Communicator& comm, const kernels::Buffer& buffer);

/// As `stage_in`, but writable: results MPI writes there reach `buffer` by `stage_out`.
kernels::Buffer& stage_in_place(const Communicator& comm, kernels::Buffer& buffer, Slot slot);

/// Memory for MPI to write `buffer`'s new elements into (`buffer` itself when MPI-visible, else
/// the uninitialized `slot` host workspace); `stage_out` completes the write.
kernels::Buffer& stage_target(const Communicator& comm, kernels::Buffer& buffer, Slot slot);

/// Copies the first `buffer.bytes()` bytes of `image` into `buffer` unless they are the same
/// buffer.
void stage_out(const kernels::Buffer& image, kernels::Buffer& buffer);

/// A workspace of at least `numel` elements of `like`'s dtype in `like`'s MPI space, used to
/// reorder elements next to an MPI call.
kernels::Buffer& pack_workspace(const Communicator& comm, const kernels::Buffer& like,
                                std::size_t numel);

}  // namespace mpitron::comm
