// Internal: the per-device caching allocator behind Buffer.
#pragma once

#include <cstddef>

#include "kernels/device.h"

namespace mpitron::kernels {

/// Returns `bytes` bytes (> 0) of storage: device memory of `device`, or, when `host` is true,
/// host memory allocated by that device's backend (pinned for cuda). Blocks freed with
/// `cached_deallocate` are kept in free lists bucketed by size (rounded up to 512 bytes) and
/// handed out again for the same bucket, so a steady-state step calls no malloc/cudaMalloc.
/// When the backend is out of memory, the cached blocks are released and the allocation retried
/// once; throws std::runtime_error naming the byte count and device when that fails too.
void* cached_allocate(Device device, bool host, std::size_t bytes);

/// Returns a block from `cached_allocate` (same device, host flag and byte count) to its free list.
void cached_deallocate(Device device, bool host, void* ptr, std::size_t bytes) noexcept;

}  // namespace mpitron::kernels
