#include "comm/staging.h"

namespace mpitron::comm {

using kernels::Buffer;
using kernels::Device;

Buffer& Staging::workspace(Slot slot, Device device, kernels::DType dtype, std::size_t numel) {
  const std::size_t index =
      (static_cast<std::size_t>(slot) * 2 + (device == Device::cuda ? 1 : 0)) * kKinds +
      static_cast<std::size_t>(dtype);
  Buffer& buffer = buffers_[index];
  if (buffer.numel() < numel) {
    buffer = Buffer();  // release first, so the old and new storage never coexist
    buffer = device == Device::cuda ? Buffer(numel, dtype, Device::cuda)
                                    : Buffer::pinned_host(numel, dtype);
  }
  return buffer;
}

bool mpi_visible(const Communicator& comm, const Buffer& buffer) {
  return buffer.device() == Device::cpu ? !comm.stage_host_buffers() : comm.direct_transfers();
}

Device mpi_space(const Communicator& comm, const Buffer& buffer) {
  return mpi_visible(comm, buffer) ? buffer.device() : Device::cpu;
}

namespace {

// nullptr when MPI sees `buffer` itself (queued kernels on it are finished first); otherwise the
// `slot` host workspace, filled with a copy of `buffer` when `copy_in`.
Buffer* staging_image(const Communicator& comm, const Buffer& buffer, Slot slot, bool copy_in) {
  if (mpi_visible(comm, buffer)) {
    kernels::synchronize(buffer.device());
    return nullptr;
  }
  Buffer& image = comm.staging().workspace(slot, Device::cpu, buffer.dtype(), buffer.numel());
  if (copy_in) kernels::copy_bytes(buffer, 0, image, 0, buffer.bytes());
  return &image;
}

}  // namespace

const Buffer& stage_in(const Communicator& comm, const Buffer& buffer, Slot slot) {
  const Buffer* image = staging_image(comm, buffer, slot, true);
  return image != nullptr ? *image : buffer;
}

Buffer stage_landing(const Communicator& comm, const Buffer& buffer) {
  if (mpi_visible(comm, buffer)) {
    kernels::synchronize(buffer.device());
    return Buffer();
  }
  if (buffer.empty()) return Buffer();
  return Buffer::pinned_host(buffer.numel(), buffer.dtype());
}

Buffer stage_copy(const Communicator& comm, const Buffer& buffer) {
  Buffer copy = stage_landing(comm, buffer);
  if (!copy.empty()) kernels::copy_bytes(buffer, 0, copy, 0, buffer.bytes());
  return copy;
}

Buffer& stage_in_place(const Communicator& comm, Buffer& buffer, Slot slot) {
  Buffer* image = staging_image(comm, buffer, slot, true);
  return image != nullptr ? *image : buffer;
}

Buffer& stage_target(const Communicator& comm, Buffer& buffer, Slot slot) {
  Buffer* image = staging_image(comm, buffer, slot, false);
  return image != nullptr ? *image : buffer;
}

void stage_out(const Buffer& image, Buffer& buffer) {
  if (&image != &buffer) kernels::copy_bytes(image, 0, buffer, 0, buffer.bytes());
}

Buffer& pack_workspace(const Communicator& comm, const Buffer& like, std::size_t numel) {
  return comm.staging().workspace(Slot::pack, mpi_space(comm, like), like.dtype(), numel);
}

}  // namespace mpitron::comm
