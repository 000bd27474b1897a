// Size-class free lists with a limit on cached bytes, one pool per (device, host) pair.
#include "kernels/allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <limits>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda_module.h"

namespace mpitron::kernels {
namespace {

constexpr std::size_t kGranularity = 512;
constexpr std::size_t kFineLimit = 4096;  // 512-byte classes up to here, then 4 per power of two
constexpr std::size_t kLargeStep = std::size_t{1} << 20;  // the widest class step (from 4 MiB)

std::size_t initial_cache_limit() {
  const char* text = std::getenv("MPITRON_ALLOCATOR_CACHE_MIB");
  if (text == nullptr || *text == '\0') return std::size_t{256} << 20;
  char* end = nullptr;
  const unsigned long long mib = std::strtoull(text, &end, 10);
  if (*end != '\0' || *text == '-' || mib > (std::numeric_limits<std::size_t>::max() >> 20)) {
    throw std::invalid_argument(
        std::string("MPITRON_ALLOCATOR_CACHE_MIB must be a non-negative integer, not '") + text +
        "'");
  }
  return static_cast<std::size_t>(mib) << 20;
}

std::atomic<std::size_t>& cache_limit() {
  static std::atomic<std::size_t> limit{initial_cache_limit()};
  return limit;
}

class Pool {
 public:
  void* allocate(Backend& backend, bool host, std::size_t size) {
    std::lock_guard lock(mutex_);
    ++stats_.requests;
    void* ptr = take_cached(size);
    if (ptr == nullptr) {
      ptr = raw_allocate(backend, host, size);
      if (ptr == nullptr) {
        release_oldest(backend, host, 0);
        ptr = raw_allocate(backend, host, size);
      }
      if (ptr == nullptr) return nullptr;
      ++stats_.backend_allocations;
    }
    stats_.in_use_bytes += size;
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
    note_held();
    return ptr;
  }

  void deallocate(Backend& backend, bool host, void* ptr, std::size_t size) noexcept {
    std::lock_guard lock(mutex_);
    stats_.in_use_bytes -= size;
    const std::size_t limit = cache_limit().load();
    if (size > limit) {
      raw_deallocate(backend, host, ptr);
      return;
    }
    release_oldest(backend, host, limit - size);
    try {
      free_[size].push_back({ptr, ++clock_});
      stats_.cached_bytes += size;
    } catch (const std::bad_alloc&) {
      raw_deallocate(backend, host, ptr);  // no room for the free list: give the block back
    }
  }

  void trim(Backend& backend, bool host, std::size_t limit) noexcept {
    std::lock_guard lock(mutex_);
    release_oldest(backend, host, limit);
  }

  void reset_peaks() {
    std::lock_guard lock(mutex_);
    stats_.peak_in_use_bytes = stats_.in_use_bytes;
    stats_.peak_held_bytes = stats_.in_use_bytes + stats_.cached_bytes;
  }

  AllocatorStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  struct Block {
    void* ptr;
    std::uint64_t freed_at;  // clock_ value when cached: smaller is older
  };

  void* take_cached(std::size_t size) {
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* ptr = it->second.back().ptr;  // the most recently freed: likely still in cache
    it->second.pop_back();
    stats_.cached_bytes -= size;
    return ptr;
  }

  // Releases cached blocks, oldest first, until at most `keep` bytes stay cached.
  void release_oldest(Backend& backend, bool host, std::size_t keep) noexcept {
    while (stats_.cached_bytes > keep) {
      auto oldest = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (!it->second.empty() && (oldest == free_.end() || it->second.front().freed_at <
                                                                 oldest->second.front().freed_at)) {
          oldest = it;
        }
      }
      raw_deallocate(backend, host, oldest->second.front().ptr);
      oldest->second.erase(oldest->second.begin());
      stats_.cached_bytes -= oldest->first;
    }
  }

  void note_held() {
    stats_.peak_held_bytes =
        std::max(stats_.peak_held_bytes, stats_.in_use_bytes + stats_.cached_bytes);
  }

  void* raw_allocate(Backend& backend, bool host, std::size_t bytes) {
    void* ptr = host ? backend.allocate_host(bytes) : backend.allocate(bytes);
    return ptr;
  }

  void raw_deallocate(Backend& backend, bool host, void* ptr) noexcept {
    ++stats_.backend_releases;
    if (host) {
      backend.deallocate_host(ptr);
    } else {
      backend.deallocate(ptr);
    }
  }

  std::mutex mutex_;
  // Per class, cached blocks in the order they were freed (front is oldest).
  std::unordered_map<std::size_t, std::vector<Block>> free_;
  std::uint64_t clock_ = 0;
  AllocatorStats stats_;
};

// Never destroyed: buffers with static storage duration may be freed after main returns.
Pool& pool(Device device, bool host) {
  static auto* pools = new std::array<Pool, 4>();
  return (*pools)[static_cast<std::size_t>(device) * 2 + (host ? 1 : 0)];
}

}  // namespace

std::size_t allocation_class(std::size_t bytes) {
  const std::size_t step =
      bytes <= kFineLimit ? kGranularity : std::min(std::bit_floor(bytes - 1) / 4, kLargeStep);
  if (bytes > std::numeric_limits<std::size_t>::max() - step) {
    throw std::length_error("kernels: cannot allocate " + std::to_string(bytes) + " bytes");
  }
  return (bytes + step - 1) / step * step;
}

void* cached_allocate(Device device, bool host, std::size_t bytes) {
  void* ptr = pool(device, host).allocate(backend(device), host, allocation_class(bytes));
  if (ptr == nullptr) {
    throw std::runtime_error("kernels: cannot allocate " + std::to_string(bytes) + " bytes of " +
                             (host ? "host memory for " : "memory on ") + to_string(device));
  }
  return ptr;
}

void cached_deallocate(Device device, bool host, void* ptr, std::size_t bytes) noexcept {
  // backend(device) cannot throw here: a block of `device` exists, so its backend does.
  pool(device, host).deallocate(backend(device), host, ptr, allocation_class(bytes));
}

AllocatorStats allocator_stats(Device device, bool host) {
  return pool(device, host).stats();
}

void reset_allocator_peaks(Device device, bool host) {
  pool(device, host).reset_peaks();
}

namespace {

// Trims every pool whose backend is loaded to at most `bytes` cached bytes.
void trim_pools(std::size_t bytes) {
  for (Device device : {Device::cpu, Device::cuda}) {
    for (bool host : {false, true}) {
      if (device == Device::cuda && !cuda_module_loaded()) continue;
      pool(device, host).trim(backend(device), host, bytes);
    }
  }
}

}  // namespace

void set_allocator_cache_limit(std::size_t bytes) {
  cache_limit().store(bytes);
  trim_pools(bytes);
}

void release_cached_blocks() {
  trim_pools(0);
#ifdef __GLIBC__
  // Host blocks below glibc's mmap threshold (32 MiB at most) came from its heap, which keeps
  // freed chunks mapped; this hands their pages back too.
  malloc_trim(0);
#endif
}

std::size_t allocator_cache_limit() {
  return cache_limit().load();
}

}  // namespace mpitron::kernels
