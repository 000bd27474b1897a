// The per-device caching allocator behind Buffer, and its counters.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/device.h"

namespace mpitron::kernels {

/// The size class a request of `bytes` bytes (> 0) is served from: a multiple of 512 bytes up
/// to 4 KiB, above that the next of four evenly spaced sizes per power of two (5, 6, 7 and 8 KiB;
/// 10, 12, 14 and 16 KiB; ...) up to 4 MiB, and above 4 MiB the next multiple of 1 MiB. So a
/// block is at most 25 % and at most 1 MiB larger than asked for (a 32 MiB flat gradient buffer
/// does not take 40 MiB), and blocks of nearby sizes serve each other. Throws std::length_error
/// when the class would overflow.
std::size_t allocation_class(std::size_t bytes);

/// Returns `bytes` bytes (> 0) of storage: device memory of `device`, or, when `host` is true,
/// host memory allocated by that device's backend (pinned for cuda). Served from the free list of
/// the request's allocation_class when it holds a block, else from the backend. When the backend
/// is out of memory, every cached block of the pool is released and the allocation retried once;
/// throws std::runtime_error naming the byte count and device when that fails too.
void* cached_allocate(Device device, bool host, std::size_t bytes);

/// Returns a block from `cached_allocate` (same device, host flag and byte count) to its free
/// list. When that would make the pool's cached bytes exceed its limit, the blocks freed longest
/// ago are given back to the backend first (the returned block too, if it alone is over).
void cached_deallocate(Device device, bool host, void* ptr, std::size_t bytes) noexcept;

/// Counters of one pool (device memory of `device`, or its host memory when `host`), in bytes of
/// size classes. Counts accumulate from process start.
struct AllocatorStats {
  std::uint64_t requests = 0;             ///< cached_allocate calls
  std::uint64_t backend_allocations = 0;  ///< blocks the backend allocated (cache misses)
  std::uint64_t backend_releases = 0;     ///< blocks given back to the backend
  std::size_t in_use_bytes = 0;           ///< handed out, not yet returned
  std::size_t cached_bytes = 0;           ///< in free lists
  std::size_t peak_in_use_bytes = 0;      ///< largest in_use_bytes so far
  std::size_t peak_held_bytes = 0;        ///< largest in_use_bytes + cached_bytes so far
};

/// The counters of one pool.
AllocatorStats allocator_stats(Device device, bool host = false);

/// Restarts the peaks of one pool from now: peak_in_use_bytes becomes in_use_bytes and
/// peak_held_bytes in_use_bytes + cached_bytes (as torch.cuda.reset_peak_memory_stats), so a
/// later allocator_stats reports the peak of what ran in between.
void reset_allocator_peaks(Device device, bool host = false);

/// Limits the bytes each pool keeps cached (default: MPITRON_ALLOCATOR_CACHE_MIB mebibytes when
/// that environment variable is set, else 256 MiB); blocks over the limit are released at once.
/// Throws std::invalid_argument when MPITRON_ALLOCATOR_CACHE_MIB is not a non-negative integer.
void set_allocator_cache_limit(std::size_t bytes);

/// Gives every cached block of every pool back to its backend (torch.cuda.empty_cache), and with
/// glibc the freed pages of its heap back to the system (malloc_trim): for blocks the steady
/// state will not ask for again, e.g. after a model is built from master weights. Blocks in use
/// are untouched.
void release_cached_blocks();

/// The current limit on each pool's cached bytes.
std::size_t allocator_cache_limit();

}  // namespace mpitron::kernels
